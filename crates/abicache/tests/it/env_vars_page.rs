//! The documentation's environment-variable reference is generated from
//! `env_vars::ENV_VARS` (ARCHITECTURE convention 7): the committed page is
//! exactly what the generator prints, and the table covers what the store reads.

use abicache::env_vars::{reference_page, ENV_VARS, REFERENCE_PAGE_COMMAND, REFERENCE_PAGE_PATH};

#[test]
fn env_vars_reference_page_is_generated_from_env_vars() {
    let committed = abicache_test_support::assert_generated_file(
        REFERENCE_PAGE_PATH,
        &reference_page(),
        REFERENCE_PAGE_COMMAND,
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
