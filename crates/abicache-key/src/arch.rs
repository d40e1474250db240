//! CUDA arch lists (`TORCH_CUDA_ARCH_LIST` syntax) to nvcc `-gencode` flags.
//!
//! Mirrors `torch.utils.cpp_extension._get_cuda_arch_flags`: entries are
//! separated by whitespace or `;`, named architectures expand as in torch
//! (`Ampere` → `8.0;8.6+PTX`), `M.m` gives
//! `-gencode=arch=compute_Mm,code=sm_Mm`, a `+PTX` suffix adds
//! `-gencode=arch=compute_Mm,code=compute_Mm`, and the result is sorted
//! (byte order, as Python's `sorted`) and de-duplicated.
//!
//! Deliberate differences: empty entries (`"8.0;;9.0"`, a trailing `;`) are
//! skipped instead of rejected, and any `M.m` with an optional `a`/`f`
//! suffix is accepted instead of a per-torch-release allowlist, so that a
//! new architecture does not need a new abicache (nvcc rejects what it does
//! not know at build time). `native` must be resolved to the visible GPUs by
//! the environment probe before it gets here.

use crate::KeyError;

/// Torch's named architectures, in torch's replacement order.
const NAMED_ARCHES: &[(&str, &str)] = &[
    ("Kepler+Tesla", "3.7"),
    ("Kepler", "3.5+PTX"),
    ("Maxwell+Tegra", "5.3"),
    ("Maxwell", "5.0;5.2+PTX"),
    ("Pascal", "6.0;6.1+PTX"),
    ("Volta+Tegra", "7.2"),
    ("Volta", "7.0+PTX"),
    ("Turing", "7.5+PTX"),
    ("Ampere+Tegra", "8.7"),
    ("Ampere", "8.0;8.6+PTX"),
    ("Ada", "8.9+PTX"),
    ("Hopper", "9.0+PTX"),
    ("Blackwell+Tegra", "11.0"),
    ("Blackwell", "10.0;10.3;12.0;12.1+PTX"),
    ("Rubin", "10.7+PTX"),
];

/// Parses an arch list into sorted, de-duplicated nvcc `-gencode` flags.
///
/// An entry that is neither `M.m[a|f][+PTX]` nor a named architecture is
/// [`KeyError::InvalidCudaArch`] naming the entry; so is a list with no
/// entries at all.
pub fn gencode_flags(list: &str) -> Result<Vec<String>, KeyError> {
    let bad = |entry: &str| KeyError::InvalidCudaArch {
        entry: entry.to_string(),
        list: list.to_string(),
    };
    let mut flags = Vec::new();
    let mut any = false;
    for token in list.split([' ', ';', '\t', '\n']).filter(|t| !t.is_empty()) {
        let expanded = NAMED_ARCHES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(token))
            .map_or(token, |(_, archs)| archs);
        for arch in expanded.split(';') {
            any = true;
            let (version, ptx) = match arch.strip_suffix("+PTX") {
                Some(v) => (v, true),
                None => (arch, false),
            };
            let num = arch_number(version).ok_or_else(|| bad(token))?;
            flags.push(format!("-gencode=arch=compute_{num},code=sm_{num}"));
            if ptx {
                flags.push(format!("-gencode=arch=compute_{num},code=compute_{num}"));
            }
        }
    }
    if !any {
        return Err(bad(list));
    }
    flags.sort();
    flags.dedup();
    Ok(flags)
}

/// `"9.0a"` → `"90a"`; `None` when not `digits.digits[a|f]`.
fn arch_number(version: &str) -> Option<String> {
    let (major, rest) = version.split_once('.')?;
    let minor = rest.strip_suffix(['a', 'f']).unwrap_or(rest);
    let suffix = &rest[minor.len()..];
    let digits = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(major) && digits(minor)).then(|| format!("{major}{minor}{suffix}"))
}

/// True when the user's nvcc flags already choose architectures
/// (`-gencode`, `--generate-code`, `-arch`, `--gpu-architecture`, `-code`,
/// `--gpu-code`); torch then adds no arch flags of its own, and neither do we.
pub fn user_sets_arch(cuda_flags: &[String]) -> bool {
    const OPTS: &[&str] = &[
        "-gencode",
        "--generate-code",
        "-arch",
        "--gpu-architecture",
        "-code",
        "--gpu-code",
    ];
    cuda_flags.iter().any(|f| {
        OPTS.iter().any(|o| {
            f.strip_prefix(o).is_some_and(|rest| {
                rest.is_empty()
                    || rest.starts_with('=')
                    || (*o == "-arch" && rest.starts_with("sm_"))
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_separators_ptx_sorted_dedup() {
        assert_eq!(
            gencode_flags("8.0 8.6+PTX;9.0;8.0").unwrap(),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_86,code=compute_86",
                "-gencode=arch=compute_86,code=sm_86",
                "-gencode=arch=compute_90,code=sm_90",
            ]
        );
    }

    #[test]
    fn suffixes_double_digit_majors_and_order_independence() {
        assert_eq!(
            gencode_flags("9.0a").unwrap(),
            ["-gencode=arch=compute_90a,code=sm_90a"]
        );
        assert_eq!(
            gencode_flags("12.0").unwrap(),
            ["-gencode=arch=compute_120,code=sm_120"]
        );
        assert_eq!(
            gencode_flags("12.0;9.0").unwrap(),
            gencode_flags("9.0 12.0").unwrap()
        );
        // Python's sorted() is byte order: "compute_120" < "compute_90".
        assert_eq!(
            gencode_flags("9.0;12.0").unwrap()[0],
            "-gencode=arch=compute_120,code=sm_120"
        );
    }

    #[test]
    fn named_architectures_expand_like_torch() {
        assert_eq!(
            gencode_flags("Ampere").unwrap(),
            gencode_flags("8.0;8.6+PTX").unwrap()
        );
        assert_eq!(
            gencode_flags("Hopper").unwrap(),
            gencode_flags("9.0+PTX").unwrap()
        );
        assert_eq!(
            gencode_flags("Kepler+Tesla").unwrap(),
            gencode_flags("3.7").unwrap()
        );
        assert_eq!(
            gencode_flags("Ampere+Tegra").unwrap(),
            gencode_flags("8.7").unwrap()
        );
    }

    #[test]
    fn invalid_entries_are_named() {
        for (list, entry) in [
            ("8.0;sm_90", "sm_90"),
            ("native", "native"),
            ("8", "8"),
            ("8.0+ptx", "8.0+ptx"),
            ("9.0b", "9.0b"),
        ] {
            match gencode_flags(list) {
                Err(KeyError::InvalidCudaArch { entry: e, .. }) => assert_eq!(e, entry),
                other => panic!("{list}: {other:?}"),
            }
        }
        assert!(gencode_flags(" ; ").is_err());
    }

    #[test]
    fn user_arch_flags_are_detected_precisely() {
        let f = |v: &[&str]| user_sets_arch(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(f(&["-gencode=arch=compute_90,code=sm_90"]));
        assert!(f(&["-gencode", "arch=compute_90,code=sm_90"]));
        assert!(f(&["-arch=sm_90"]));
        assert!(f(&["-arch", "sm_90"]));
        assert!(
            !f(&["-Xcompiler", "-march=native"]),
            "torch's substring check would wrongly match this"
        );
        assert!(!f(&["-O3", "--use_fast_math"]));
    }
}
