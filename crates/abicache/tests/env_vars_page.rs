//! The README documents every environment variable abicache reads, exactly
//! as `env_vars::ENV_VARS` describes it (ARCHITECTURE convention 7).

use abicache::env_vars::{markdown_table, ENV_VARS};

#[test]
fn readme_env_table_matches_env_vars() {
    let readme =
        std::fs::read_to_string(abicache_test_support::repo_root().join("README.md")).unwrap();
    let table: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("## Environment variables"))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let expected = markdown_table();
    assert_eq!(
        table,
        expected.lines().collect::<Vec<_>>(),
        "regenerate the README table: cargo run -p abicache-env-vars --example readme_table"
    );
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
