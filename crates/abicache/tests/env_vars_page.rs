//! The documentation's environment-variable reference is generated from
//! `env_vars::ENV_VARS` (ARCHITECTURE convention 7): the committed page is
//! exactly what the generator prints, and the table covers what the store reads.

use abicache::env_vars::{reference_page, ENV_VARS, REFERENCE_PAGE_COMMAND, REFERENCE_PAGE_PATH};

#[test]
fn env_vars_reference_page_is_generated_from_env_vars() {
    let path = abicache_test_support::repo_root().join(REFERENCE_PAGE_PATH);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let expected = reference_page();
    assert!(
        committed == expected,
        "{} is stale (or missing): regenerate it with `{REFERENCE_PAGE_COMMAND}` (from the repository root)",
        path.display()
    );
    for var in ENV_VARS {
        assert!(
            committed.contains(&format!("| `{}` |", var.name)),
            "`{}` has no row in {REFERENCE_PAGE_PATH}",
            var.name
        );
    }
}

#[test]
fn env_vars_cover_what_the_store_reads() {
    for name in abicache::store::env::ALL {
        assert!(
            ENV_VARS.iter().any(|v| v.name == *name),
            "`{name}` is read by abicache-store but not in ENV_VARS"
        );
    }
}
