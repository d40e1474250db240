//! The environment variables this crate reads (names, defaults and the
//! empty-value rule live in `abicache-env-vars`).

use std::ffi::OsStr;
use std::time::Duration;

use crate::error::{Result, StoreError};

pub use abicache_env_vars::{
    ABICACHE_DIR, ABICACHE_GC_GRACE, ABICACHE_LOCK_TIMEOUT, ABICACHE_MAX_SIZE, ABICACHE_PCH_JOBS,
    ABICACHE_PCH_MAX_SIZE, HOME, XDG_CACHE_HOME,
};

/// Every variable above, for documentation tables and checks.
pub const ALL: &[&str] = &[
    ABICACHE_DIR,
    XDG_CACHE_HOME,
    HOME,
    ABICACHE_LOCK_TIMEOUT,
    ABICACHE_MAX_SIZE,
    ABICACHE_GC_GRACE,
    ABICACHE_PCH_MAX_SIZE,
    ABICACHE_PCH_JOBS,
];

/// Reads a variable with the table's empty-value rule (empty means unset).
pub(crate) fn var_os(name: &str) -> Option<std::ffi::OsString> {
    abicache_env_vars::var_os(name)
}

/// Parses a non-negative number of seconds (`600`, `0.5`) given in `var`;
/// `None` or empty gives `default`.
pub(crate) fn parse_seconds(
    var: &'static str,
    value: Option<&OsStr>,
    default: Duration,
) -> Result<Duration> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    let text = value.to_string_lossy();
    abicache_env_vars::parse_seconds(&text).ok_or_else(|| StoreError::BadEnv {
        var,
        value: text.into_owned(),
        expected: "a non-negative number of seconds",
    })
}
