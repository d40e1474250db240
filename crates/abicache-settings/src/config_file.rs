//! The config file (`~/.config/abicache/config.toml`): where it is, its
//! keys, and what it sets for `abicache config`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Result, SettingsError};
use abicache_env_vars::{
    ABICACHE_CONFIG, ABICACHE_MISS_REPORT, ABICACHE_OFFLINE, ABICACHE_READONLY_DIRS,
    ABICACHE_REMOTE, ABICACHE_REMOTE_MODE, ABICACHE_REMOTE_TIMEOUT, ABICACHE_SHARED,
    ABICACHE_SIGNING_KEY, ABICACHE_TRUSTED_KEYS,
};

/// The config file's fields. Every key names a variable that wins over it
/// (`abicache_env_vars::EnvVar::config_key`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// `ABICACHE_REMOTE`.
    pub(crate) remote: Option<String>,
    /// `ABICACHE_REMOTE_MODE`.
    pub(crate) remote_mode: Option<String>,
    /// `ABICACHE_REMOTE_TIMEOUT`.
    pub(crate) remote_timeout: Option<f64>,
    /// `ABICACHE_TRUSTED_KEYS`.
    #[serde(default)]
    pub(crate) trusted_keys: Vec<String>,
    /// `ABICACHE_SIGNING_KEY`.
    pub(crate) signing_key: Option<String>,
    /// Read-only cache layers (`ABICACHE_READONLY_DIRS`).
    #[serde(default)]
    pub(crate) readonly_dirs: Vec<PathBuf>,
    /// `ABICACHE_OFFLINE`: `true`, `false`, `0`, `1` or `"warn"`.
    pub(crate) offline: Option<toml::Value>,
    /// `ABICACHE_MISS_REPORT`.
    pub(crate) miss_report: Option<PathBuf>,
    /// `ABICACHE_SHARED`: `"auto"`, `"on"` or `"off"`.
    pub(crate) shared: Option<String>,
}

/// The config file: `ABICACHE_CONFIG`, else `$XDG_CONFIG_HOME/abicache/config.toml`,
/// else `~/.config/abicache/config.toml`; `None` when none of those variables is set.
/// Reads only those variables, never the file.
pub fn config_path() -> Option<PathBuf> {
    config_path_with(&|name| abicache_env_vars::var_os(name))
}

pub(crate) fn config_path_with(
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let set = |name| {
        var(name)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.is_empty())
    };
    if let Some(path) = set(ABICACHE_CONFIG) {
        return Some(PathBuf::from(path));
    }
    if let Some(dir) = set(abicache_env_vars::XDG_CONFIG_HOME) {
        return Some(Path::new(&dir).join("abicache/config.toml"));
    }
    set(abicache_env_vars::HOME).map(|home| Path::new(&home).join(".config/abicache/config.toml"))
}

/// The settings the config file at `path` sets, as (the environment variable
/// that overrides it, its value as text), for `abicache config`. A missing
/// file sets nothing; an unreadable or invalid one is an error naming it.
pub fn config_file_settings(path: &Path) -> Result<Vec<(&'static str, String)>> {
    let file = read_config(path)?;
    let settings = [
        (ABICACHE_REMOTE, file.remote),
        (ABICACHE_REMOTE_MODE, file.remote_mode),
        (
            ABICACHE_REMOTE_TIMEOUT,
            file.remote_timeout.map(|s| s.to_string()),
        ),
        (
            ABICACHE_TRUSTED_KEYS,
            Some(file.trusted_keys.join(", ")).filter(|k| !k.is_empty()),
        ),
        (ABICACHE_SIGNING_KEY, file.signing_key),
        (
            ABICACHE_READONLY_DIRS,
            Some(join_paths(&file.readonly_dirs)).filter(|d| !d.is_empty()),
        ),
        (
            ABICACHE_OFFLINE,
            file.offline.as_ref().map(|v| match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
        ),
        (
            ABICACHE_MISS_REPORT,
            file.miss_report.as_ref().map(|p| p.display().to_string()),
        ),
        (ABICACHE_SHARED, file.shared),
    ];
    Ok(settings
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect())
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// The largest config file read.
const MAX_CONFIG_SIZE: u64 = 1 << 20;

/// The file at `path`, read once; a missing file sets nothing.
pub(crate) fn read_config(path: &Path) -> Result<ConfigFile> {
    let config_error = |reason: String| SettingsError::ConfigFile {
        path: path.to_owned(),
        reason,
    };
    let text = match abicache_fs::read_bounded(path, abicache_fs::Follow::Yes, MAX_CONFIG_SIZE) {
        Ok(bytes) => {
            String::from_utf8(bytes).map_err(|_| config_error("it is not UTF-8".into()))?
        }
        Err(e) if e.is_not_found() => return Ok(ConfigFile::default()),
        Err(e) => return Err(config_error(e.to_string())),
    };
    toml::from_str(&text).map_err(|e| config_error(e.message().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_file_is_the_variable_else_xdg_else_home() {
        let path = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            config_path_with(&|name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.into()))
        };
        assert_eq!(path(&[]), None);
        assert_eq!(
            path(&[("HOME", "/h")]),
            Some(PathBuf::from("/h/.config/abicache/config.toml"))
        );
        assert_eq!(
            path(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")]),
            Some(PathBuf::from("/x/abicache/config.toml"))
        );
        assert_eq!(
            path(&[("HOME", "/h"), ("ABICACHE_CONFIG", "/c.toml")]),
            Some(PathBuf::from("/c.toml"))
        );
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "remote_url = \"s3://b\"\n").unwrap();
        let err = read_config(&file).unwrap_err().to_string();
        assert!(
            err.contains(&file.display().to_string()) && err.contains("remote_url"),
            "{err}"
        );
        assert!(config_file_settings(&dir.path().join("missing.toml"))
            .unwrap()
            .is_empty());
    }
}
