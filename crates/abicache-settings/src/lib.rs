//! abicache's settings, resolved once, up front, into one [`Settings`]
//! value (as uv's `uv-settings` does): the environment variables of
//! `abicache-env-vars`'s table, the config file
//! (`~/.config/abicache/config.toml`) and the command-line flags.
//!
//! Guarantees:
//! - **One read of each source**: [`Settings::resolve`] reads every
//!   variable once and the config file at most once (never when no config
//!   path applies); nothing below it reads them again.
//! - **Checked before any work**: every value is parsed and checked by
//!   [`Settings::resolve`]; a value that cannot be used is a
//!   [`SettingsError`] naming the variable (or the config key and the file)
//!   and what to set instead, before a key is computed or a file scanned.
//! - **One precedence**: a flag (`--cache-dir`, `--remote`, `--offline`) wins over its
//!   variable, and a variable wins over its config-file key
//!   (`abicache_env_vars::EnvVar::config_key`).
//! - What is checked here is the form of a value. Key files named by
//!   `ABICACHE_TRUSTED_KEYS` or `ABICACHE_SIGNING_KEY` are read by the
//!   remote crate when keys are first needed.
//!
//! ```
//! use abicache_settings::{Flags, PchMode, Settings};
//!
//! let vars = |name: &str| match name {
//!     "HOME" => Some("/home/me".into()),
//!     "ABICACHE_PCH" => Some("0".into()),
//!     _ => None,
//! };
//! let settings = Settings::resolve_with(&Flags::default(), &vars).unwrap();
//! assert_eq!(settings.build.pch, PchMode::Off);
//! assert_eq!(
//!     settings.store.root.as_deref(),
//!     Some(std::path::Path::new("/home/me/.cache/abicache"))
//! );
//!
//! let bogus = |name: &str| (name == "ABICACHE_PCH").then(|| "bogus".into());
//! let err = Settings::resolve_with(&Flags::default(), &bogus).unwrap_err();
//! assert_eq!(err.variable(), Some("ABICACHE_PCH"));
//! ```

#![deny(missing_docs)]

mod build;
mod config_file;
mod error;
mod misses;
mod remote;
mod store;

use std::ffi::OsString;
use std::path::PathBuf;

pub use build::{parse_isa_check, BuildSettings, PchMode};
pub use config_file::{config_file_settings, config_path};
pub use error::{Result, SettingsError};
pub use misses::{MissSettings, OfflineMode};
pub use remote::{
    RemoteMode, RemoteSettings, DEFAULT_MAX_SIZE, DEFAULT_TIMEOUT, TRUSTED_KEYS_FROM_ENV,
    TRUSTED_KEYS_FROM_FILE,
};
pub use store::{
    parse_pch_jobs, parse_seconds, resolve_root, root_from_env, SharedSetting, StoreSettings,
    DEFAULT_GC_GRACE, DEFAULT_LEASE_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_PCH_JOBS,
};

/// How settings read a variable: its raw value, `None` when unset.
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The command-line flags that are settings (the rest are arguments of one
/// command). Each wins over its variable.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--cache-dir`: the cache root.
    pub cache_dir: Option<PathBuf>,
    /// `--remote`: the remote cache URL (`none` turns a configured one off).
    pub remote: Option<String>,
    /// `--offline`: what a cache miss may do.
    pub offline: Option<OfflineMode>,
}

/// The read-only cache layers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerSettings {
    /// `ABICACHE_READONLY_DIRS` (directories separated by `:`, empty items
    /// skipped), else `readonly_dirs` in the config file; relative paths
    /// are kept as given.
    pub readonly_dirs: Vec<PathBuf>,
}

/// Every setting of one abicache call, parsed and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The config file that applied (it may not exist): `ABICACHE_CONFIG`,
    /// else `$XDG_CONFIG_HOME/abicache/config.toml`, else
    /// `~/.config/abicache/config.toml`; `None` when none of those is set.
    pub config_file: Option<PathBuf>,
    /// The local store's.
    pub store: StoreSettings,
    /// A build's.
    pub build: BuildSettings,
    /// The remote cache's and the signing keys'.
    pub remote: RemoteSettings,
    /// The read-only cache layers'.
    pub layers: LayerSettings,
    /// What a cache miss does (offline mode) and where it is reported.
    pub misses: MissSettings,
}

impl Default for Settings {
    /// Every documented default: no config file, no cache root, no remote,
    /// no layers (what an empty environment gives).
    fn default() -> Self {
        Settings {
            config_file: None,
            store: StoreSettings::default(),
            build: BuildSettings::default(),
            remote: RemoteSettings::default(),
            layers: LayerSettings::default(),
            misses: MissSettings::default(),
        }
    }
}

impl Settings {
    /// The settings of this process: its environment, then the config file
    /// (read once), with `flags` winning over both. Every value is checked.
    ///
    /// # Errors
    /// The first value that cannot be used, naming its variable (or its
    /// config key and the file), or a config file that cannot be read.
    pub fn resolve(flags: &Flags) -> Result<Settings> {
        Self::resolve_with(flags, &process_var)
    }

    /// [`Settings::resolve`] with variables read through `var` (for tests);
    /// a blank value counts as unset, as for every variable read here.
    pub fn resolve_with(flags: &Flags, var: Vars<'_>) -> Result<Settings> {
        let text = |name: &str| {
            set(var, name)
                .and_then(|v| v.into_string().ok())
                .filter(|v| !v.trim().is_empty())
        };
        let config_file = config_file::config_path_with(var);
        let file = match &config_file {
            Some(path) => config_file::read_config(path)?,
            None => config_file::ConfigFile::default(),
        };
        let mut store = StoreSettings::from_vars(var, flags.cache_dir.clone())?;
        if text(abicache_env_vars::ABICACHE_SHARED).is_none() {
            if let Some(value) = &file.shared {
                store.shared =
                    SharedSetting::parse(Some(value)).map_err(|_| SettingsError::ConfigFile {
                        path: config_file.clone().unwrap_or_default(),
                        reason: format!("`shared = \"{value}\"`: expected `auto`, `on` or `off`"),
                    })?;
            }
        }
        let build = BuildSettings {
            pch: PchMode::parse(text(abicache_env_vars::ABICACHE_PCH).as_deref())?,
            isa_check: build::parse_isa_check(
                text(abicache_env_vars::ABICACHE_ISA_CHECK).as_deref(),
            )?,
        };
        let remote = RemoteSettings::resolve(
            flags.remote.as_deref(),
            &text,
            &file,
            config_file.as_deref().unwrap_or(std::path::Path::new("")),
        )?;
        let misses = MissSettings::resolve(
            flags.offline,
            &text,
            &file,
            config_file.as_deref().unwrap_or(std::path::Path::new("")),
        )?;
        let readonly_dirs = match text(abicache_env_vars::ABICACHE_READONLY_DIRS) {
            Some(value) => value
                .split(':')
                .filter(|d| !d.trim().is_empty())
                .map(PathBuf::from)
                .collect(),
            None => file.readonly_dirs,
        };
        Ok(Settings {
            config_file,
            store,
            build,
            remote,
            layers: LayerSettings { readonly_dirs },
            misses,
        })
    }
}

/// This process's variables: those of `ENV_VARS` through
/// `abicache_env_vars::var_os` (its empty-value rule applied), and
/// `XDG_RUNTIME_DIR`, which the XDG spec defines and abicache only follows.
pub(crate) fn process_var(name: &str) -> Option<OsString> {
    if name == store::XDG_RUNTIME_DIR {
        return std::env::var_os(name);
    }
    abicache_env_vars::var_os(name)
}

/// `name` through `var`, `None` when unset or blank.
pub(crate) fn set(var: Vars<'_>, name: &str) -> Option<OsString> {
    var(name).filter(|v| !v.as_encoded_bytes().iter().all(u8::is_ascii_whitespace))
}

#[cfg(test)]
mod tests;
