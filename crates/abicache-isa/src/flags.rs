//! Reading compile flags: the flags that ask for the host's CPU
//! (`-march=native` and its kin) and the flags that choose the target's
//! instruction set, in host compiler flags and in nvcc flags (which pass
//! host compiler flags on with `-Xcompiler`/`--compiler-options`).

/// The options whose value `native` asks for the host's CPU.
const NATIVE_OPTIONS: [&str; 3] = ["-march", "-mcpu", "-mtune"];

/// nvcc's options that pass their value (comma-separated flags) to the host compiler.
const NVCC_FORWARD: [&str; 2] = ["-Xcompiler", "--compiler-options"];

/// Where a flag came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagSource {
    /// The host compiler's own flags (`extra_cflags`).
    Host,
    /// nvcc flags (`extra_cuda_cflags`): only what `-Xcompiler` or
    /// `--compiler-options` pass on counts.
    Nvcc,
}

/// The host compiler flags in `flags`: as given for [`FlagSource::Host`];
/// for [`FlagSource::Nvcc`] the values of `-Xcompiler X`, `-Xcompiler=X`,
/// `--compiler-options X` and `--compiler-options=X`, split at commas.
pub fn host_compiler_flags(flags: &[String], source: FlagSource) -> Vec<String> {
    match source {
        FlagSource::Host => flags.to_vec(),
        FlagSource::Nvcc => {
            let mut out = Vec::new();
            let mut i = 0;
            while i < flags.len() {
                let f = flags[i].as_str();
                let value = if NVCC_FORWARD.contains(&f) {
                    i += 1;
                    flags.get(i).map(String::as_str)
                } else {
                    NVCC_FORWARD
                        .iter()
                        .find_map(|o| f.strip_prefix(o).and_then(|r| r.strip_prefix('=')))
                };
                if let Some(value) = value {
                    out.extend(
                        value
                            .split([',', ' ', '\t'])
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                    );
                }
                i += 1;
            }
            out
        }
    }
}

/// The flags in `flags` (host compiler flags, see [`host_compiler_flags`])
/// that ask for the host's CPU, each as one argument: `-march=native`,
/// `-mcpu=native`, `-mtune=native`, also when written as two arguments
/// (`-march native`, which GCC itself rejects). In order, without repeats.
pub fn native_flags(flags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, f) in flags.iter().enumerate() {
        let native = NATIVE_OPTIONS.iter().find(|o| {
            f.strip_prefix(*o) == Some("=native")
                || (f == *o && flags.get(i + 1).is_some_and(|v| v == "native"))
        });
        if let Some(option) = native {
            let one = format!("{option}=native");
            if !out.contains(&one) {
                out.push(one);
            }
        }
    }
    out
}

/// The native-CPU flags of a spec's host flags and nvcc flags together.
pub fn spec_native_flags(host: &[String], nvcc: &[String]) -> Vec<String> {
    let mut all = native_flags(&host_compiler_flags(host, FlagSource::Host));
    for f in native_flags(&host_compiler_flags(nvcc, FlagSource::Nvcc)) {
        if !all.contains(&f) {
            all.push(f);
        }
    }
    all
}

/// The flags that choose the target's instruction set among host compiler
/// flags: every `-m…` flag (`-march=…`, `-mcpu=…`, `-mtune=…`,
/// `-mavx512bf16`, `-mno-avx512f`, …), a two-argument `-march X` joined
/// into `-march=X`. In order, without repeats.
pub fn target_flags(flags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let f = &flags[i];
        let flag = if NATIVE_OPTIONS.contains(&f.as_str()) {
            i += 1;
            flags.get(i).map(|v| format!("{f}={v}"))
        } else {
            f.starts_with("-m").then(|| f.clone())
        };
        if let Some(flag) = flag.filter(|f| !out.contains(f)) {
            out.push(flag);
        }
        i += 1;
    }
    out
}

/// The target flags ([`target_flags`]) of a spec's host and nvcc flags together.
pub fn spec_target_flags(host: &[String], nvcc: &[String]) -> Vec<String> {
    let mut all = target_flags(&host_compiler_flags(host, FlagSource::Host));
    for f in target_flags(&host_compiler_flags(nvcc, FlagSource::Nvcc)) {
        if !all.contains(&f) {
            all.push(f);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn every_spelling_of_a_native_flag() {
        let host = |v: &[&str]| spec_native_flags(&s(v), &[]);
        let nvcc = |v: &[&str]| spec_native_flags(&[], &s(v));
        assert_eq!(host(&["-O3", "-march=native"]), ["-march=native"]);
        assert_eq!(host(&["-mcpu=native"]), ["-mcpu=native"]);
        assert_eq!(host(&["-mtune=native"]), ["-mtune=native"]);
        assert_eq!(host(&["-march", "native"]), ["-march=native"]);
        assert_eq!(
            host(&["-mtune", "native", "-march=native"]),
            ["-mtune=native", "-march=native"]
        );
        assert_eq!(nvcc(&["-Xcompiler", "-march=native"]), ["-march=native"]);
        assert_eq!(nvcc(&["-Xcompiler=-march=native"]), ["-march=native"]);
        assert_eq!(
            nvcc(&["--compiler-options", "-fPIC,-march=native"]),
            ["-march=native"]
        );
        assert_eq!(
            nvcc(&["--compiler-options=-mtune=native"]),
            ["-mtune=native"]
        );
        assert_eq!(
            nvcc(&["-Xcompiler", "-march", "-Xcompiler", "native"]),
            ["-march=native"]
        );
        // Not native: another CPU, nvcc's own flags, a value that only starts so.
        assert!(host(&["-march=znver3", "-mcpu=neoverse-v2", "-march=nativex"]).is_empty());
        assert!(
            nvcc(&["-march=native", "-arch=native"]).is_empty(),
            "nvcc's own flags"
        );
        assert!(host(&["-march"]).is_empty());
    }

    #[test]
    fn target_flags_are_the_m_flags() {
        assert_eq!(
            spec_target_flags(
                &s(&[
                    "-O3",
                    "-mavx512bf16",
                    "-march",
                    "znver3",
                    "-DX",
                    "-mavx512bf16"
                ]),
                &s(&["-Xcompiler", "-fopenmp,-mamx-tile", "-O3"])
            ),
            ["-mavx512bf16", "-march=znver3", "-mamx-tile"]
        );
    }
}
