//! The README's list of understood flags is the table's.

use abicache_isa::{understood_flags, Arch};

#[test]
fn the_readme_lists_every_understood_flag() {
    // The crate's directory as the test runner names it (read at run time:
    // a binary reused from a checkout at another path would name that one).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .expect("run with `cargo nextest run` or `cargo test`");
    let readme =
        std::fs::read_to_string(std::path::Path::new(&manifest).join("../../README.md")).unwrap();
    let section: String = readme
        .lines()
        .skip_while(|l| !l.contains("Understood flags"))
        .take_while(|l| !l.contains("Not checked:"))
        .collect::<Vec<_>>()
        .join(" ");
    let listed: Vec<&str> = section
        .split(['`', ' ', ';', ':'])
        .filter(|w| w.starts_with("-m") || w.starts_with('+'))
        .collect();
    for arch in [Arch::X86_64, Arch::Aarch64] {
        for flag in understood_flags(arch).split(' ') {
            assert!(listed.contains(&flag), "README lacks `{flag}`");
        }
    }
}
