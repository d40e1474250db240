//! Every environment variable abicache reads, in one documented list: the
//! table of the bottom-level `abicache-env-vars` crate, re-exported.
//!
//! The documentation's reference page (`docs/reference/env-vars.md`) is
//! generated from [`ENV_VARS`] and a test checks the committed copy, so a
//! variable cannot be added here without being documented there.

pub use abicache_env_vars::*;

/// Whether `ABICACHE_REBUILD` asks for a rebuild: `1` yes, unset (or
/// blank) no ([`parse_flag`]).
///
/// # Errors
/// Any other value, naming the variable and what to set instead.
///
/// Its rule is restated in Python at `python/abicache/_warm_record.py:rebuild_set`,
/// tied by `tests/python/test_warm_reader.py::test_abicache_rebuild_is_parsed_by_one_rule`
/// (through `abicache._native.rebuild_requested`, which calls this).
pub fn rebuild_requested() -> crate::Result<bool> {
    let value = var(ABICACHE_REBUILD);
    parse_flag(value.as_deref()).ok_or_else(|| crate::Error::InvalidVariable {
        name: ABICACHE_REBUILD,
        value: value.unwrap_or_default(),
        problem: "is not `1`; set `ABICACHE_REBUILD=1` to rebuild, or unset it to use the cache",
    })
}
