//! The environment variables this crate reads (names, defaults and the
//! empty-value rule live in `abicache-env-vars`).

pub use abicache_env_vars::{
    ABICACHE_DIR, ABICACHE_LOCK_TIMEOUT, ABICACHE_MAX_SIZE, HOME, XDG_CACHE_HOME,
};

/// Every variable above, for documentation tables and checks.
pub const ALL: &[&str] = &[
    ABICACHE_DIR,
    XDG_CACHE_HOME,
    HOME,
    ABICACHE_LOCK_TIMEOUT,
    ABICACHE_MAX_SIZE,
];

/// Reads a variable with the table's empty-value rule (empty means unset).
pub(crate) fn var_os(name: &str) -> Option<std::ffi::OsString> {
    abicache_env_vars::var_os(name)
}
