//! What the remote cache and the signing keys are told: `--remote`, then
//! the variables, then the config file.

use std::path::Path;
use std::time::Duration;

use abicache_env_vars::{
    ABICACHE_REMOTE, ABICACHE_REMOTE_MAX_SIZE, ABICACHE_REMOTE_MODE, ABICACHE_REMOTE_OBJECTS,
    ABICACHE_REMOTE_TIMEOUT, ABICACHE_SIGNING_KEY, ABICACHE_TRUSTED_KEYS,
};

use crate::config_file::ConfigFile;
use crate::error::{Result, SettingsError};

/// Seconds one remote operation may take when `ABICACHE_REMOTE_TIMEOUT` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest remote object downloaded when `ABICACHE_REMOTE_MAX_SIZE` is unset (4 GiB).
pub const DEFAULT_MAX_SIZE: u64 = 4 << 30;

/// Whether entries are uploaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteMode {
    /// Download and upload (the default).
    ReadWrite,
    /// Download only.
    ReadOnly,
}

/// The remote cache's settings and the keys, every value checked; the keys
/// stay text (hex, or files of keys) for the remote crate to read.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteSettings {
    /// The remote cache URL: `--remote`, else `ABICACHE_REMOTE`, else
    /// `remote` in the config file; `None` when none is set or it is `none`/`off`.
    pub url: Option<String>,
    /// Whether uploads are allowed (`ABICACHE_REMOTE_MODE`, else `remote_mode`).
    pub mode: RemoteMode,
    /// The bound on each remote operation (`ABICACHE_REMOTE_TIMEOUT`, else `remote_timeout`).
    pub timeout: Duration,
    /// The largest object a download reads (`ABICACHE_REMOTE_MAX_SIZE`).
    pub max_size: u64,
    /// Whether compiled objects go through the remote (`ABICACHE_REMOTE_OBJECTS`).
    pub objects: bool,
    /// Trusted public keys as given: hex keys or files of them
    /// (`ABICACHE_TRUSTED_KEYS`, split at commas and blanks, else `trusted_keys`).
    pub trusted_keys: Vec<String>,
    /// Where [`RemoteSettings::trusted_keys`] came from, for error messages.
    pub trusted_keys_origin: &'static str,
    /// The signing key as given: hex or a file holding it
    /// (`ABICACHE_SIGNING_KEY`, else `signing_key`).
    pub signing_key: Option<String>,
}

/// The origin named when a trusted key from `ABICACHE_TRUSTED_KEYS` cannot be read.
pub const TRUSTED_KEYS_FROM_ENV: &str = "`ABICACHE_TRUSTED_KEYS`";
/// The origin named when a trusted key from the config file cannot be read.
pub const TRUSTED_KEYS_FROM_FILE: &str = "`trusted_keys` in the config file";

impl Default for RemoteSettings {
    /// No remote, no keys, the documented defaults.
    fn default() -> Self {
        RemoteSettings {
            url: None,
            mode: RemoteMode::ReadWrite,
            timeout: DEFAULT_TIMEOUT,
            max_size: DEFAULT_MAX_SIZE,
            objects: true,
            trusted_keys: Vec::new(),
            trusted_keys_origin: TRUSTED_KEYS_FROM_ENV,
            signing_key: None,
        }
    }
}

impl RemoteSettings {
    /// The settings from `--remote` (`flag`), the variables (`env`, blank
    /// counts as unset) and the config `file` at `path`, in that order.
    pub(crate) fn resolve(
        flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        file: &ConfigFile,
        path: &Path,
    ) -> Result<RemoteSettings> {
        let url = flag
            .map(str::to_owned)
            .or_else(|| env(ABICACHE_REMOTE))
            .or_else(|| file.remote.clone())
            .map(|u| u.trim().to_owned())
            .filter(|u| !(u.is_empty() || u == "none" || u == "off"));
        let bad_file = |key, name, value: String, reason| SettingsError::BadConfigValue {
            key,
            name,
            path: path.to_owned(),
            value,
            reason,
        };
        const MODES: &str = "expected `read-write` or `read-only`";
        let mode = match env(ABICACHE_REMOTE_MODE) {
            Some(value) => parse_mode(&value).ok_or(SettingsError::InvalidSetting {
                name: ABICACHE_REMOTE_MODE,
                value,
                reason: MODES,
            })?,
            None => match &file.remote_mode {
                None => RemoteMode::ReadWrite,
                Some(value) => parse_mode(value).ok_or_else(|| {
                    bad_file(
                        "remote_mode",
                        ABICACHE_REMOTE_MODE,
                        format!("{value:?}"),
                        MODES,
                    )
                })?,
            },
        };
        const SECONDS: &str = "expected a positive number of seconds";
        let positive = |s: &str| abicache_env_vars::parse_seconds(s).filter(|d| !d.is_zero());
        let timeout = match env(ABICACHE_REMOTE_TIMEOUT) {
            Some(value) => positive(&value).ok_or(SettingsError::InvalidSetting {
                name: ABICACHE_REMOTE_TIMEOUT,
                value,
                reason: SECONDS,
            })?,
            None => match file.remote_timeout {
                None => DEFAULT_TIMEOUT,
                Some(seconds) => positive(&seconds.to_string()).ok_or_else(|| {
                    bad_file(
                        "remote_timeout",
                        ABICACHE_REMOTE_TIMEOUT,
                        seconds.to_string(),
                        SECONDS,
                    )
                })?,
            },
        };
        let max_size = match env(ABICACHE_REMOTE_MAX_SIZE) {
            Some(value) => abicache_env_vars::parse_size(&value)
                .filter(|&n| n > 0)
                .ok_or(SettingsError::InvalidSetting {
                    name: ABICACHE_REMOTE_MAX_SIZE,
                    value,
                    reason: "expected a positive size such as `4G`, `500M` or a number of bytes",
                })?,
            None => DEFAULT_MAX_SIZE,
        };
        let (trusted_keys, trusted_keys_origin) = match env(ABICACHE_TRUSTED_KEYS) {
            Some(value) => (
                value
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
                TRUSTED_KEYS_FROM_ENV,
            ),
            None if file.trusted_keys.is_empty() => (Vec::new(), TRUSTED_KEYS_FROM_ENV),
            None => (file.trusted_keys.clone(), TRUSTED_KEYS_FROM_FILE),
        };
        Ok(RemoteSettings {
            url,
            mode,
            timeout,
            max_size,
            objects: parse_objects(env(ABICACHE_REMOTE_OBJECTS))?,
            trusted_keys,
            trusted_keys_origin,
            signing_key: env(ABICACHE_SIGNING_KEY).or_else(|| file.signing_key.clone()),
        })
    }

    /// These settings with the remote URL `url` (`--remote` given to one
    /// command after the settings were resolved); `none` or `off` turns it off.
    pub fn with_url(mut self, url: &str) -> Self {
        let url = url.trim();
        self.url = (!(url.is_empty() || url == "none" || url == "off")).then(|| url.to_owned());
        self
    }
}

fn parse_mode(value: &str) -> Option<RemoteMode> {
    match value.trim() {
        "read-write" | "rw" => Some(RemoteMode::ReadWrite),
        "read-only" | "ro" => Some(RemoteMode::ReadOnly),
        _ => None,
    }
}

fn parse_objects(value: Option<String>) -> Result<bool> {
    let value = value.unwrap_or_default();
    match value.trim() {
        "" | "1" => Ok(true),
        "0" => Ok(false),
        other => Err(SettingsError::NotUnderstood {
            name: ABICACHE_REMOTE_OBJECTS,
            value: other.to_owned(),
            problem: "is not understood: use `0` to keep compiled objects out of the remote \
                      cache, or `1` (the default)",
        }),
    }
}
