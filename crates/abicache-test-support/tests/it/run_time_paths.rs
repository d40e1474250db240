//! No code in the workspace takes a checkout path from `env!` (compile
//! time). The per-machine target directory is shared by every checkout on
//! a machine (CI clones into a new folder each time), and cargo reuses a
//! binary or build script compiled in another checkout when this one's
//! sources are older than it: a path compiled in then names that other
//! checkout. A test reading it failed with "No such file or directory" once
//! that checkout was removed; a build script fingerprinting it hashed no
//! code at all. `CARGO_MANIFEST_DIR` is read at run time instead
//! (`abicache_test_support::repo_root`, or `std::env::var_os` in a build
//! script).

use abicache_source_fingerprint::rust_files;

#[test]
fn no_checkout_path_is_compiled_in() {
    let root = abicache_test_support::repo_root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    assert!(
        files.len() > 50,
        "the workspace's sources were found under {}",
        root.display()
    );
    // Spelled in two parts so this file does not match itself.
    let needle = concat!("env!(\"CARGO_", "MANIFEST_DIR\")");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(at) = line.find(needle) {
                if !line[..at].contains("//") {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "read CARGO_MANIFEST_DIR at run time (abicache_test_support::repo_root(), or \
         std::env::var_os in a build script), not with env!:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_repository_root_is_found_from_the_running_tests_crate() {
    let root = abicache_test_support::repo_root();
    assert!(
        root.join("Cargo.lock").is_file() && root.join("README.md").is_file(),
        "{}",
        root.display()
    );
}
