//! The documentation's command-line reference is generated from clap: the
//! committed page is exactly what the generator prints, and it has a section
//! for every command.

use abicache_cli::{cli_reference, CLI_REFERENCE_COMMAND, CLI_REFERENCE_PATH};

#[test]
fn cli_reference_page_is_generated_from_clap() {
    let expected = cli_reference();
    abicache_test_support::assert_generated_file(
        CLI_REFERENCE_PATH,
        &expected,
        CLI_REFERENCE_COMMAND,
    );
    for command in [
        "abicache",
        "abicache key",
        "abicache build",
        "abicache run",
        "abicache import",
    ] {
        assert!(
            expected.contains(&format!("\n## {command}\n")),
            "no section for `{command}` in the generated reference"
        );
    }
    assert!(
        expected.contains("Usage: abicache key [OPTIONS] <SPEC.toml>"),
        "the key command's usage line is missing"
    );
    assert!(
        !expected.contains('\u{1b}'),
        "the reference has terminal escape codes"
    );
}
