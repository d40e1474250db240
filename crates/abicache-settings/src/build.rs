//! What a build is told: whether precompiled headers are used, and whether
//! a library's instruction-set requirements are checked before it is loaded.

use abicache_env_vars::{ABICACHE_ISA_CHECK, ABICACHE_PCH};

use crate::error::{Result, SettingsError};

/// Whether PCHs are used and built (`ABICACHE_PCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PchMode {
    /// Use ready PCHs, build missing ones in the background (the default).
    Auto,
    /// Neither use nor build PCHs.
    Off,
}

impl PchMode {
    /// Parses an `ABICACHE_PCH` value: unset, empty, `auto` or `1` →
    /// [`PchMode::Auto`]; `0` → [`PchMode::Off`]; anything else is an error
    /// naming the variable and the values to set instead.
    pub fn parse(value: Option<&str>) -> Result<PchMode> {
        match value.unwrap_or_default().trim() {
            "" | "auto" | "1" => Ok(PchMode::Auto),
            "0" => Ok(PchMode::Off),
            other => Err(SettingsError::NotUnderstood {
                name: ABICACHE_PCH,
                value: other.to_owned(),
                problem: "is not understood: use `0` to turn precompiled headers off, \
                          or `auto` (the default)",
            }),
        }
    }
}

/// Parses an `ABICACHE_ISA_CHECK` value: unset, empty or `1` → on, `0` →
/// off; anything else is an error naming the variable, worded as
/// `abicache_isa::guard_enabled` words it (which reads the variable when a
/// library is loaded; checking it here refuses it before any work).
pub fn parse_isa_check(value: Option<&str>) -> Result<bool> {
    match value.map(str::trim) {
        None | Some("") | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => Err(SettingsError::NotUnderstood {
            name: ABICACHE_ISA_CHECK,
            value: other.to_owned(),
            problem: "is not `1` or `0`; unset it (the guard is on by default) or set it to `0` \
                      to load libraries without comparing their instruction sets with this CPU's",
        }),
    }
}

/// The settings of a build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildSettings {
    /// Whether precompiled headers are used (`ABICACHE_PCH`).
    pub pch: PchMode,
    /// Whether a library's instruction-set requirements are compared with
    /// this CPU's before it is loaded (`ABICACHE_ISA_CHECK`).
    pub isa_check: bool,
}

impl Default for BuildSettings {
    /// Precompiled headers on ([`PchMode::Auto`]), the instruction-set guard on.
    fn default() -> Self {
        BuildSettings {
            pch: PchMode::Auto,
            isa_check: true,
        }
    }
}
