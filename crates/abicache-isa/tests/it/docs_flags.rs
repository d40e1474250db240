//! The documentation's list of understood flags (`docs/key.md`, "The
//! instruction-set guard", "Understood flags") is the table's.

use abicache_isa::{understood_flags, Arch};

#[test]
fn the_docs_list_every_understood_flag() {
    // The crate's directory as the test runner names it (read at run time:
    // a binary reused from a checkout at another path would name that one).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .expect("run with `cargo nextest run` or `cargo test`");
    let page = std::path::Path::new(&manifest).join("../../docs/key.md");
    let text = std::fs::read_to_string(&page)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", page.display()));
    let section: String = text
        .lines()
        .skip_while(|l| !l.contains("Understood flags"))
        .take_while(|l| !l.contains("Not checked:"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        !section.is_empty(),
        "`{}` has no \"Understood flags\" section ending at \"Not checked:\"",
        page.display()
    );
    let listed: Vec<&str> = section
        .split(['`', ' ', ';', ':'])
        .filter(|w| w.starts_with("-m") || w.starts_with('+'))
        .collect();
    for arch in [Arch::X86_64, Arch::Aarch64] {
        for flag in understood_flags(arch).split(' ') {
            assert!(
                listed.contains(&flag),
                "`{}` (\"Understood flags\") lacks `{flag}`: add it to the list there",
                page.display()
            );
        }
    }
}
