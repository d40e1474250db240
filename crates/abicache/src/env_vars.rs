//! Every environment variable abicache reads, in one documented list: the
//! table of the bottom-level `abicache-env-vars` crate, re-exported.
//!
//! The README's table is checked against [`ENV_VARS`] by a test, so a
//! variable cannot be added there without being documented here.

pub use abicache_env_vars::*;
