//! The environment variables this crate reads, in one place.

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

/// Every variable above, for documentation tables and checks.
pub const ALL: &[&str] = &[
    ABICACHE_DIR,
    XDG_CACHE_HOME,
    HOME,
    ABICACHE_LOCK_TIMEOUT,
    ABICACHE_MAX_SIZE,
];

/// Reads a variable, treating an empty value as unset.
pub(crate) fn var_os(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}
