//! The environment variables this crate reads, in one place.

use std::ffi::OsStr;
use std::time::Duration;

use crate::error::{Result, StoreError};

/// Cache root; overrides `XDG_CACHE_HOME` and `HOME`.
pub const ABICACHE_DIR: &str = "ABICACHE_DIR";
/// Base of the default cache root (`$XDG_CACHE_HOME/abicache`), when absolute.
pub const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
/// Fallback base of the cache root (`~/.cache/abicache`).
pub const HOME: &str = "HOME";
/// Seconds to wait for a key's lock before giving up (default 600).
pub const ABICACHE_LOCK_TIMEOUT: &str = "ABICACHE_LOCK_TIMEOUT";
/// When set (e.g. `10G`), the store is garbage-collected to this size after every publish.
pub const ABICACHE_MAX_SIZE: &str = "ABICACHE_MAX_SIZE";
/// Seconds after its last use during which gc never evicts an entry or an
/// object (default 60), so a path returned by a hit stays loadable.
pub const ABICACHE_GC_GRACE: &str = "ABICACHE_GC_GRACE";

/// Every variable above, for documentation tables and checks.
pub const ALL: &[&str] = &[
    ABICACHE_DIR,
    XDG_CACHE_HOME,
    HOME,
    ABICACHE_LOCK_TIMEOUT,
    ABICACHE_MAX_SIZE,
    ABICACHE_GC_GRACE,
];

/// Reads a variable, treating an empty value as unset.
pub(crate) fn var_os(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
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
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| StoreError::BadEnv {
            var,
            value: text.into_owned(),
            expected: "a non-negative number of seconds",
        })
}
