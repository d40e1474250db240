//! The README documents every environment variable abicache reads, exactly
//! as `env_vars::ENV_VARS` describes it (ARCHITECTURE convention 7).

use abicache::env_vars::ENV_VARS;

#[test]
fn readme_env_table_matches_env_vars() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let table: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("## Environment variables"))
        .filter(|l| l.starts_with("| `"))
        .collect();
    let expected: Vec<String> = ENV_VARS
        .iter()
        .map(|v| format!("| `{}` | {} | {} |", v.name, v.default, v.meaning))
        .collect();
    assert_eq!(
        table, expected,
        "regenerate the README table from crates/abicache/src/env_vars.rs"
    );
}

#[test]
fn env_vars_cover_what_the_store_reads() {
    for name in abicache::store::env::ALL.iter().filter(|n| **n != "HOME") {
        assert!(
            ENV_VARS.iter().any(|v| v.name == *name),
            "`{name}` is read by abicache-store but not in ENV_VARS"
        );
    }
}
