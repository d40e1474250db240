//! The key-code fingerprint (`build.rs`, over
//! `abicache::key_code::KEY_CODE_ROOTS`) covers only the code that turns a
//! scan into a key: a comment edited in the fleet tools (or elsewhere in the
//! load pipeline) leaves it, hence every key memo and warm-load record, as
//! it was; an edit in the key code changes it. Computed for real, on a copy
//! of the sources, with the function `build.rs` calls.

use std::path::{Path, PathBuf};

use abicache::key_code::{KEY_CODE_FINGERPRINT, KEY_CODE_ROOTS};
use abicache_source_fingerprint::fingerprint;
use abicache_test_support::copy_dir;

/// The crates whose sources are copied: the key code's and the fleet's.
const CRATES: &[&str] = &["abicache", "abicache-fleet", "abicache-isa", "abicache-key"];

/// The fingerprint `build.rs` computes for the `abicache` crate at
/// `crates/abicache` (its base and roots as there).
fn key_code_fingerprint(crates: &Path) -> u64 {
    let manifest = crates.join("abicache");
    let roots: Vec<PathBuf> = KEY_CODE_ROOTS.iter().map(|r| manifest.join(r)).collect();
    fingerprint(&manifest, &roots)
}

/// Adds a word to the file's first comment line; nothing else changes.
fn edit_a_comment(file: &Path) {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("//"))
        .unwrap_or_else(|| panic!("`{}` has no comment", file.display()));
    let edited = text.replacen(line, &format!("{line} (edited)"), 1);
    assert_ne!(edited, text);
    std::fs::write(file, edited).unwrap();
}

#[test]
fn a_comment_edited_in_the_fleet_code_keeps_the_key_code_fingerprint_and_one_in_the_key_code_changes_it(
) {
    let repo = abicache_test_support::repo_root();
    let dir = tempfile::tempdir().unwrap();
    let crates = dir.path().join("crates");
    for name in CRATES {
        copy_dir(
            &repo.join("crates").join(name).join("src"),
            &crates.join(name).join("src"),
        );
    }
    let before = key_code_fingerprint(&crates);
    // The copy's fingerprint is this build's: the computation is build.rs's.
    assert_eq!(
        format!("{}-{before:016x}", env!("CARGO_PKG_VERSION")),
        KEY_CODE_FINGERPRINT,
        "the fingerprint recomputed from {} differs from the one compiled in",
        repo.display()
    );

    // Outside the key code: the fleet tools, and the load pipeline's other modules.
    for file in [
        "abicache-fleet/src/wheel.rs",
        "abicache-fleet/src/prebuild.rs",
        "abicache-fleet/src/matrix/spec.rs",
        "abicache/src/layers.rs",
        "abicache/src/session/warm_load.rs",
    ] {
        edit_a_comment(&crates.join(file));
        assert_eq!(
            key_code_fingerprint(&crates),
            before,
            "a comment edited in `{file}` changed the key-code fingerprint"
        );
    }

    // Inside it: each edit changes the fingerprint again.
    let mut last = before;
    for file in [
        "abicache-key/src/lib.rs",
        "abicache-isa/src/lib.rs",
        "abicache/src/session.rs",
        "abicache/src/session/warm_key.rs",
    ] {
        edit_a_comment(&crates.join(file));
        let now = key_code_fingerprint(&crates);
        assert_ne!(
            now, last,
            "a comment edited in `{file}` left the key-code fingerprint as it was"
        );
        last = now;
    }
}
