//! What a cache miss may do: offline mode (`ABICACHE_OFFLINE`, `offline`,
//! `--offline`) and where misses are reported (`ABICACHE_MISS_REPORT`,
//! `miss_report`).

use std::path::{Path, PathBuf};

use abicache_env_vars::{ABICACHE_MISS_REPORT, ABICACHE_OFFLINE};

use crate::config_file::ConfigFile;
use crate::error::{Result, SettingsError};

/// Whether a cache miss may compile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OfflineMode {
    /// A miss builds (the default).
    #[default]
    Off,
    /// A miss never compiles: it is an error (`abicache.CacheMiss`, exit 3).
    On,
    /// Each miss is reported on stderr and in the miss report, then built
    /// (staging).
    Warn,
}

/// What [`OfflineMode::parse`] accepts, for messages.
const ACCEPTED: &str = "is not understood: use `1` (a cache miss is an error, never a compile), \
                        `warn` (report each miss, then build it) or `0` (off, the default)";

impl OfflineMode {
    /// Parses an `ABICACHE_OFFLINE` value: unset, empty or `0` → off, `1` →
    /// on, `warn` (any case) → warn; anything else is an error naming the
    /// variable and these values.
    pub fn parse(value: Option<&str>) -> Result<OfflineMode> {
        match word(value.unwrap_or_default()) {
            Some(mode) => Ok(mode),
            None => Err(SettingsError::NotUnderstood {
                name: ABICACHE_OFFLINE,
                value: value.unwrap_or_default().trim().to_owned(),
                problem: ACCEPTED,
            }),
        }
    }

    /// The word that sets this mode (`0`, `1`, `warn`).
    pub fn as_str(self) -> &'static str {
        match self {
            OfflineMode::Off => "0",
            OfflineMode::On => "1",
            OfflineMode::Warn => "warn",
        }
    }
}

fn word(value: &str) -> Option<OfflineMode> {
    match value.trim() {
        "" | "0" => Some(OfflineMode::Off),
        "1" => Some(OfflineMode::On),
        w if w.eq_ignore_ascii_case("warn") => Some(OfflineMode::Warn),
        _ => None,
    }
}

/// What a cache miss does and where it is reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MissSettings {
    /// `--offline`, else `ABICACHE_OFFLINE`, else `offline` in the config
    /// file, else [`OfflineMode::Off`].
    pub offline: OfflineMode,
    /// `ABICACHE_MISS_REPORT`, else `miss_report` in the config file: the
    /// file every miss appends one JSON line to (`None`: no report).
    pub report: Option<PathBuf>,
}

impl MissSettings {
    /// The flag, else the variable (`text` reads a variable, blank counts as
    /// unset), else the config file's keys.
    pub(crate) fn resolve(
        flag: Option<OfflineMode>,
        text: &dyn Fn(&str) -> Option<String>,
        file: &ConfigFile,
        config_path: &Path,
    ) -> Result<MissSettings> {
        let offline = match (flag, text(ABICACHE_OFFLINE)) {
            (Some(mode), _) => mode,
            (None, Some(value)) => OfflineMode::parse(Some(&value))?,
            (None, None) => match &file.offline {
                None => OfflineMode::Off,
                Some(value) => from_config(value).ok_or_else(|| SettingsError::BadConfigValue {
                    key: "offline",
                    name: ABICACHE_OFFLINE,
                    path: config_path.to_owned(),
                    value: value.to_string(),
                    reason: "use `true` (or `1`), `\"warn\"` or `false` (or `0`)",
                })?,
            },
        };
        let report = text(ABICACHE_MISS_REPORT)
            .map(PathBuf::from)
            .or_else(|| file.miss_report.clone());
        Ok(MissSettings { offline, report })
    }
}

/// The config key `offline`: a boolean, `0`/`1`, or one of the variable's words.
fn from_config(value: &toml::Value) -> Option<OfflineMode> {
    match value {
        toml::Value::Boolean(true) => Some(OfflineMode::On),
        toml::Value::Boolean(false) => Some(OfflineMode::Off),
        toml::Value::Integer(1) => Some(OfflineMode::On),
        toml::Value::Integer(0) => Some(OfflineMode::Off),
        toml::Value::String(s) => word(s),
        _ => None,
    }
}
