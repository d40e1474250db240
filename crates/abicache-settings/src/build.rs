//! What a build is told: whether precompiled headers are used.

use abicache_env_vars::ABICACHE_PCH;

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

/// The settings of a build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildSettings {
    /// Whether precompiled headers are used (`ABICACHE_PCH`).
    pub pch: PchMode,
}

impl Default for BuildSettings {
    /// Precompiled headers on ([`PchMode::Auto`]).
    fn default() -> Self {
        BuildSettings { pch: PchMode::Auto }
    }
}
