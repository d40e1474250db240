//! The one error of this crate: a setting that cannot be used, naming the
//! variable (or the config key and file) and what to set instead.
//!
//! Each variable keeps the wording it had before settings were resolved up
//! front (the store's, the façade's and the remote's), so messages that
//! users and tests know did not change.

use std::path::PathBuf;

/// A setting that cannot be used. Every variant names where the value came
/// from (a variable, or a key of the config file and the file) and what is
/// accepted.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A variable of the store (`ABICACHE_LOCK_TIMEOUT`, `ABICACHE_MAX_SIZE`, …).
    #[error("`{name}` is set to `{value}`, which is not {expected}; fix or unset `{name}`")]
    BadValue {
        /// The variable.
        name: &'static str,
        /// Its value, lossily decoded.
        value: String,
        /// What it should be.
        expected: &'static str,
    },

    /// A variable whose value is one of a few words (`ABICACHE_PCH`,
    /// `ABICACHE_REMOTE_OBJECTS`).
    #[error("`{name}={value}` {problem}")]
    NotUnderstood {
        /// The variable.
        name: &'static str,
        /// Its value, blanks around it removed.
        value: String,
        /// What is wrong with it and what to set instead.
        problem: &'static str,
    },

    /// A variable of the remote cache (`ABICACHE_REMOTE_MODE`, …).
    #[error("invalid {name} `{value}`: {reason}")]
    InvalidSetting {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is accepted.
        reason: &'static str,
    },

    /// A key of the config file with a value that cannot be used.
    #[error(
        "`{key} = {value}` in the abicache config file `{p}` cannot be used: {reason}; \
         fix it there, or set `{name}` (which wins over the file)",
        p = .path.display()
    )]
    BadConfigValue {
        /// The config key (`remote_mode`).
        key: &'static str,
        /// The variable that sets the same thing (`ABICACHE_REMOTE_MODE`).
        name: &'static str,
        /// The config file.
        path: PathBuf,
        /// The value as written in the file.
        value: String,
        /// What is accepted.
        reason: &'static str,
    },

    /// The config file exists but cannot be read or parsed.
    #[error("cannot use the abicache config file `{p}`: {reason}; fix it, or set `ABICACHE_CONFIG` to another file", p = .path.display())]
    ConfigFile {
        /// The config file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

impl SettingsError {
    /// The variable the refused value was given in, or that sets the same
    /// thing as the refused config key; `None` for an unreadable config file.
    pub fn variable(&self) -> Option<&'static str> {
        match self {
            SettingsError::BadValue { name, .. }
            | SettingsError::NotUnderstood { name, .. }
            | SettingsError::InvalidSetting { name, .. }
            | SettingsError::BadConfigValue { name, .. } => Some(name),
            SettingsError::ConfigFile { .. } => None,
        }
    }
}

/// This crate's results.
pub type Result<T, E = SettingsError> = std::result::Result<T, E>;
