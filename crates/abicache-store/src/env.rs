//! The environment variables that set the store's settings (names,
//! defaults and the empty-value rule live in `abicache-env-vars`; they are
//! read and checked once by `abicache-settings`, never by this crate).

pub use abicache_env_vars::{
    ABICACHE_DIR, ABICACHE_GC_GRACE, ABICACHE_LEASE_TIMEOUT, ABICACHE_LOCK_TIMEOUT,
    ABICACHE_MAX_SIZE, ABICACHE_PCH_JOBS, ABICACHE_PCH_MAX_SIZE, ABICACHE_SHARED, HOME,
    XDG_CACHE_HOME,
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
    ABICACHE_SHARED,
    ABICACHE_LEASE_TIMEOUT,
];
