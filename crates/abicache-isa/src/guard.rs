//! The guard: before a library is loaded, the extensions it requires
//! ([`Requirement`]) are compared with the running CPU's; a library this
//! CPU cannot run is refused with an error naming what is missing and the
//! flag that required it, instead of dying with `SIGILL` in the loader or
//! at the first call.

use abicache_env_vars::ABICACHE_ISA_CHECK;

use crate::cpu::{running_cpu, CpuFeatures};
use crate::require::Requirement;

/// Why a library was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    /// The running CPU lacks extensions the library requires.
    #[error(
        "refusing to load {what}: {reasons}. Loading it would stop this process with an \
         illegal instruction (SIGILL); it was not loaded and nothing was deleted. Rebuild it \
         without those flags (or for this CPU, e.g. `-march=native`), load it on a CPU that \
         has them, or set `ABICACHE_ISA_CHECK=0` to load it anyway"
    )]
    Unsupported {
        /// The library, as the caller names it (name, key, path).
        what: String,
        /// `built with FLAG; this CPU lacks A, B`, per flag, joined by `, and `.
        reasons: String,
        /// The requirements the CPU does not meet.
        missing: Vec<Requirement>,
    },
    /// `ABICACHE_ISA_CHECK` has a value other than `1` or `0`.
    #[error(
        "`ABICACHE_ISA_CHECK={value}` is not `1` or `0`; unset it (the guard is on by default) \
         or set it to `0` to load libraries without comparing their instruction sets with this CPU's"
    )]
    InvalidSetting {
        /// The value found.
        value: String,
    },
}

/// Whether the guard is on: `ABICACHE_ISA_CHECK` unset or `1` (on), `0` (off).
///
/// Restated in Python in
/// `python/abicache/_cpu.py:isa_guard_passes` (`0` waives it; any
/// other value but unset is left to the native path), tied by
/// `tests/python/test_warm_reader.py::test_an_isa_requirement_is_waived_only_by_isa_check_0`.
///
/// The rule is `abicache_settings::parse_isa_check`, which also refuses a
/// bad value when settings are resolved, before any work.
pub fn guard_enabled() -> Result<bool, IsaError> {
    let value = abicache_env_vars::var(ABICACHE_ISA_CHECK);
    abicache_settings::parse_isa_check(value.as_deref()).map_err(|_| IsaError::InvalidSetting {
        value: value.unwrap_or_default(),
    })
}

/// The requirements `cpu` does not meet, in order.
///
/// Restated in Python in
/// `python/abicache/_cpu.py:isa_guard_passes` (each required feature
/// among the CPU's `/proc/cpuinfo` flags), tied by
/// `tests/python/test_warm_reader.py::test_an_isa_requirement_is_waived_only_by_isa_check_0`.
pub fn missing<'a>(required: &'a [Requirement], cpu: &CpuFeatures) -> Vec<&'a Requirement> {
    required.iter().filter(|r| !cpu.has(&r.feature)).collect()
}

/// Refuses `required` on `cpu` when something is missing; `what` names the
/// library in the message (e.g. ``extension `ops` (`/c/v1/…/ops.so`)``).
pub fn check_on(required: &[Requirement], cpu: &CpuFeatures, what: &str) -> Result<(), IsaError> {
    let missing: Vec<Requirement> = missing(required, cpu).into_iter().cloned().collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in &missing {
        match groups.iter_mut().find(|(flag, _)| *flag == r.flag) {
            Some((_, features)) => features.push(&r.feature),
            None => groups.push((&r.flag, vec![&r.feature])),
        }
    }
    let reasons = groups
        .iter()
        .map(|(flag, features)| {
            format!("built with {flag}; this CPU lacks {}", features.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", and ");
    Err(IsaError::Unsupported {
        what: what.to_owned(),
        reasons,
        missing,
    })
}

/// The guard before a load: nothing to do when `required` is empty (no
/// variable or file is read then); else, unless `ABICACHE_ISA_CHECK=0`,
/// [`check_on`] the running CPU. A CPU whose features cannot be read
/// (no `/proc/cpuinfo`) is not refused.
pub fn check(required: &[Requirement], what: &str) -> Result<(), IsaError> {
    if required.is_empty() || !guard_enabled()? {
        return Ok(());
    }
    match running_cpu() {
        Some(cpu) => check_on(required, cpu, what),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(feature: &str, flag: &str) -> Requirement {
        Requirement {
            feature: feature.into(),
            flag: flag.into(),
        }
    }

    #[test]
    fn the_message_names_each_flag_and_what_this_cpu_lacks() {
        let cpu = CpuFeatures::from_cpuinfo("flags\t: fpu sse2 avx512f avx512bw\n");
        let required = [
            req("amx_int8", "-march=sapphirerapids"),
            req("amx_tile", "-march=sapphirerapids"),
            req("avx512_bf16", "-mavx512bf16"),
            req("avx512f", "-mavx512bf16"),
            req("sse2", "-msse2"),
        ];
        let err = check_on(&required, &cpu, "extension `ops` (`/c/ops.so`)").unwrap_err();
        insta::assert_snapshot!(err.to_string(), @"refusing to load extension `ops` (`/c/ops.so`): built with -march=sapphirerapids; this CPU lacks amx_int8, amx_tile, and built with -mavx512bf16; this CPU lacks avx512_bf16. Loading it would stop this process with an illegal instruction (SIGILL); it was not loaded and nothing was deleted. Rebuild it without those flags (or for this CPU, e.g. `-march=native`), load it on a CPU that has them, or set `ABICACHE_ISA_CHECK=0` to load it anyway");
        assert!(check_on(&required[3..], &cpu, "x").is_ok());
        assert!(check_on(&[], &cpu, "x").is_ok());
    }
}
