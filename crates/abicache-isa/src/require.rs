//! What a library requires: the extensions enabled beyond the fixed
//! baseline of its architecture ([`BASELINE`]: `x86-64`, `armv8-a`), read
//! from the macros the compiler predefines (`-dM -E`) with its flags, so
//! `-march=<cpu>`, `-march=native` and every `-m<ext>` count with what they
//! imply (`-mavx512bf16` implies `avx512f` and `avx512bw`), and so does what
//! the compiler enables by itself (a `CXX` wrapper adding `-mavx512f`, a
//! compiler whose default `-march` is newer).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::table::{by_flag, by_macro, Arch, Extension};

/// One extension a library requires, and the flag that required it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Requirement {
    /// Its `/proc/cpuinfo` name, e.g. `avx512_bf16`.
    pub feature: String,
    /// The compile flag that required it, e.g. `-mavx512bf16` (several,
    /// space-separated, when no single one of them did).
    pub flag: String,
}

/// The macro names a `-dM -E` dump defines (`#define NAME value` lines).
pub fn defined_macros(dump: &str) -> BTreeSet<&str> {
    dump.lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|rest| rest.split([' ', '(']).next())
        .collect()
}

/// The extensions every CPU of its architecture has, by `/proc/cpuinfo`
/// name: x86-64's baseline (`-march=x86-64`: `mmx`, `sse`, `sse2`) and
/// AArch64's (`-march=armv8-a`: `fp`, `asimd`). Requirements are recorded
/// beyond these, never beyond a compiler's default (which may be newer).
pub const BASELINE: &[&str] = &["mmx", "sse", "sse2", "fp", "asimd"];

/// The architecture a dump's macros target: `__aarch64__` AArch64,
/// `__x86_64__` x86-64, `None` for neither.
fn target_arch(macros: &BTreeSet<&str>) -> Option<Arch> {
    if macros.contains("__aarch64__") {
        Some(Arch::Aarch64)
    } else if macros.contains("__x86_64__") {
        Some(Arch::X86_64)
    } else {
        None
    }
}

/// The extensions whose macro `macro_name` is, among those of `arch` (of
/// every architecture for `None`). A macro GCC defines on every target
/// (`__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16`, x86-64's `cx16`, is also defined
/// on AArch64) counts only for its own architecture.
fn extension_of(macro_name: &str, arch: Option<Arch>) -> Option<&'static Extension> {
    by_macro(macro_name).filter(|e| arch.is_none_or(|a| e.arch == a))
}

/// The extensions a `-dM -E` dump enables beyond [`BASELINE`], by
/// `/proc/cpuinfo` name, sorted: the compiler's effective target as far as
/// the CPU guard is concerned (empty for a plain compiler at its baseline).
/// Only the extensions of the dump's own architecture (`__aarch64__`,
/// `__x86_64__`) are read.
pub fn beyond_baseline(dump: &str) -> BTreeSet<&'static str> {
    let macros = defined_macros(dump);
    let arch = target_arch(&macros);
    macros
        .into_iter()
        .filter_map(|m| extension_of(m, arch))
        .map(|e| e.name)
        .filter(|name| !BASELINE.contains(name))
        .collect()
}

/// The extensions (their `/proc/cpuinfo` names) a dump enables beyond `default`.
fn enabled_beyond(dump: &str, default: &BTreeSet<&str>) -> BTreeSet<&'static str> {
    let macros = defined_macros(dump);
    let arch = target_arch(&macros);
    macros
        .into_iter()
        .filter(|m| !default.contains(m))
        .filter_map(|m| extension_of(m, arch))
        .map(|e| e.name)
        .collect()
}

/// The requirements of a library, from the compiler's macro dumps:
/// `default` without any flag, `all` with every flag of `per_flag`, and
/// `per_flag` each flag alone (may be empty when there is one flag). Every
/// extension `all` enables beyond [`BASELINE`] is required. Each is
/// attributed to the flag that asks for it by name (`-mavx512bf16` →
/// `avx512_bf16`), else to `compiler` (e.g. ``the default target of
/// `/usr/bin/c++` ``) when the compiler enables it without flags, else to
/// the first flag whose dump enables it, else to all the flags. Sorted by
/// flag, then extension.
pub fn requirements_from_macros(
    default: &str,
    all: &str,
    flags: &[String],
    per_flag: &[(String, String)],
    compiler: &str,
) -> Vec<Requirement> {
    let by_compiler = beyond_baseline(default);
    let default = defined_macros(default);
    let required = beyond_baseline(all);
    let per_flag: Vec<(&str, BTreeSet<&str>)> = per_flag
        .iter()
        .map(|(flag, dump)| (flag.as_str(), enabled_beyond(dump, &default)))
        .collect();
    let mut out: Vec<Requirement> = required
        .into_iter()
        .map(|feature| {
            let named = flags
                .iter()
                .find(|f| by_flag(f).is_some_and(|e| e.name == feature))
                .map(String::as_str);
            let implied = || {
                per_flag
                    .iter()
                    .find(|(_, set)| set.contains(feature))
                    .map(|(f, _)| *f)
            };
            let flag = match (named, flags) {
                (Some(f), _) => f.to_owned(),
                (None, _) if by_compiler.contains(feature) => compiler.to_owned(),
                (None, [only]) => only.clone(),
                (None, _) => implied().map_or_else(|| flags.join(" "), str::to_owned),
            };
            Requirement {
                feature: feature.to_owned(),
                flag,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.flag, &a.feature).cmp(&(&b.flag, &b.feature)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: &str =
        "#define __SSE__ 1\n#define __SSE2__ 1\n#define __MMX__ 1\n#define f(x) x\n";

    #[test]
    fn a_macro_counts_only_for_its_own_architecture() {
        // GCC defines the 16-byte compare-and-swap macro (x86-64's `cx16`) on AArch64 too.
        let cas = "#define __GCC_HAVE_SYNC_COMPARE_AND_SWAP_16 1\n";
        let arm = format!("#define __aarch64__ 1\n#define __ARM_NEON 1\n{cas}");
        assert!(
            beyond_baseline(&arm).is_empty(),
            "{:?}",
            beyond_baseline(&arm)
        );
        let x86 = format!("#define __x86_64__ 1\n#define __SSE2__ 1\n{cas}");
        assert_eq!(
            beyond_baseline(&x86).into_iter().collect::<Vec<_>>(),
            ["cx16"]
        );
        let sve = format!("{arm}#define __ARM_FEATURE_SVE 1\n#define __AVX2__ 1\n");
        assert_eq!(
            requirements_from_macros(&arm, &sve, &["-march=armv8-a+sve".into()], &[], "cc")
                .iter()
                .map(|r| r.feature.as_str())
                .collect::<Vec<_>>(),
            ["sve"],
            "an x86-64 macro in an AArch64 dump is not read"
        );
    }

    #[test]
    fn named_flags_win_then_the_flag_that_implies() {
        let all = format!(
            "{DEFAULT}#define __AVX512F__ 1\n#define __AVX512BF16__ 1\n#define __AMX_TILE__ 1\n\
             #define __SHSTK__ 1\n#define __CRC32__ 1\n"
        );
        let flags = vec![
            "-mavx512bf16".to_owned(),
            "-march=sapphirerapids".to_owned(),
        ];
        let per_flag = vec![
            (
                flags[0].clone(),
                format!("{DEFAULT}#define __AVX512F__ 1\n#define __AVX512BF16__ 1\n"),
            ),
            (flags[1].clone(), all.clone()),
        ];
        let req = requirements_from_macros(DEFAULT, &all, &flags, &per_flag, "cc");
        let pairs: Vec<(&str, &str)> = req
            .iter()
            .map(|r| (r.flag.as_str(), r.feature.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("-march=sapphirerapids", "amx_tile"),
                ("-mavx512bf16", "avx512_bf16"),
                ("-mavx512bf16", "avx512f"),
            ],
            "shstk and crc32 are not checked"
        );
        // One flag: everything is its.
        let req = requirements_from_macros(DEFAULT, &all, &flags[1..], &[], "cc");
        assert!(req.iter().all(|r| r.flag == "-march=sapphirerapids"));
        // No flag enabling anything beyond the baseline: nothing required.
        assert!(requirements_from_macros(DEFAULT, DEFAULT, &flags, &[], "cc").is_empty());
        // A compiler whose own target is beyond the baseline: required
        // without any flag, and attributed to the compiler.
        let wrapped = format!("{DEFAULT}#define __AVX512F__ 1\n");
        let req =
            requirements_from_macros(&wrapped, &wrapped, &[], &[], "the default target of `cc`");
        assert_eq!(
            req,
            [Requirement {
                feature: "avx512f".into(),
                flag: "the default target of `cc`".into()
            }]
        );
    }
}
