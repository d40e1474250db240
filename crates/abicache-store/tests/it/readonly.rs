//! Read-only cache layers: a verified entry is served in place and nothing
//! in the layer is written; a corrupt, foreign, or writable-by-others entry
//! is skipped with a warning and left as it is.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use abicache_store::{Corruption, Manifest, ReadOnlyLayer, Store};
use common::{key, open};

/// A layer populated like CI populates one: a real store with one audited entry.
fn populated(name: &str) -> (tempfile::TempDir, Store, String) {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(&tmp.path().join("layer"));
    let key = key(name);
    let guard = store.begin_build(&key).unwrap();
    let lib = format!("lib{name}.so");
    std::fs::write(guard.temp_dir().join(&lib), format!("{name} library bytes")).unwrap();
    let mut manifest = Manifest::new(&key, name, format!("format=1\nname={name}\n"));
    manifest.audit = Some(serde_json::json!({"verdict": "ok"}));
    let _ = guard.publish(&lib, manifest).unwrap();
    (tmp, store, key)
}

use abicache_test_support::{make_read_only, tree};

#[test]
fn a_read_only_layer_serves_a_hit_in_place_and_writes_nothing() {
    let (_tmp, store, key) = populated("shared");
    let root = store.root().to_path_buf();
    make_read_only(&root);
    // A stamp is trusted once the file is older than the racy window.
    std::thread::sleep(abicache_fs::RACY_WINDOW + std::time::Duration::from_millis(100));
    let before = tree(&root);
    let layer = ReadOnlyLayer::new(&root);
    for round in 0..3 {
        let found = layer.lookup(&key);
        assert_eq!(found.warning, None);
        let hit = found.hit.expect("a hit");
        assert!(hit.library.starts_with(&root), "served in place");
        assert_eq!(hit.rehashed, round == 0, "hashed once per process");
    }
    assert!(layer.lookup(&key.replace('a', "b")).hit.is_none());
    assert_eq!(
        tree(&root),
        before,
        "the layer is unchanged, bytes and mtimes"
    );
}

#[test]
fn a_corrupt_layer_entry_is_skipped_with_a_warning_and_left_alone() {
    let (_tmp, store, key) = populated("corrupt");
    let library = store.layout().entry_dir(&key).join("libcorrupt.so");
    std::fs::write(&library, "CORRUPT library bytes").unwrap();
    let before = tree(store.root());
    let found = ReadOnlyLayer::new(store.root()).lookup(&key);
    assert!(found.hit.is_none());
    let warning = found.warning.expect("a warning");
    assert!(
        matches!(warning.problem, Corruption::HashMismatch { .. }),
        "{warning}"
    );
    assert!(warning.to_string().contains("built locally"), "{warning}");
    assert_eq!(tree(store.root()), before, "nothing removed or written");
}

#[test]
fn a_layer_entry_writable_by_others_is_skipped() {
    let (_tmp, store, key) = populated("writable");
    let dir = store.layout().entry_dir(&key);
    for path in [dir.clone(), dir.join("libwritable.so")] {
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o7777;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o002)).unwrap();
        let found = ReadOnlyLayer::new(store.root()).lookup(&key);
        assert!(found.hit.is_none());
        let warning = found.warning.expect("a warning").to_string();
        assert!(warning.contains("lets other users write it"), "{warning}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    assert!(ReadOnlyLayer::new(store.root()).lookup(&key).hit.is_some());
}

#[test]
fn a_foreign_layer_entry_is_skipped() {
    let (_tmp, store, key) = populated("foreign");
    let library = store.layout().entry_dir(&key).join("libforeign.so");
    // Only root can give a file away; elsewhere the rule is the same code path.
    if rustix::process::geteuid().as_raw() != 0
        || std::os::unix::fs::lchown(&library, Some(4242), None).is_err()
    {
        abicache_test_support::skip_for_privilege(
            "giving a file to another user needs root (chown)",
        );
        return;
    }
    let found = ReadOnlyLayer::new(store.root()).lookup(&key);
    assert!(found.hit.is_none());
    let warning = found.warning.expect("a warning").to_string();
    assert!(warning.contains("owned by uid 4242"), "{warning}");
}

#[test]
fn a_layer_manifest_without_an_audit_or_for_another_key_is_skipped() {
    let (_tmp, store, key) = populated("noaudit");
    let path = store.layout().entry_dir(&key).join("manifest.json");
    let mut manifest = Manifest::read(&path).unwrap();
    manifest.audit = None;
    std::fs::write(&path, manifest.to_json()).unwrap();
    let found = ReadOnlyLayer::new(store.root()).lookup(&key);
    assert!(found.hit.is_none());
    assert!(matches!(
        found.warning.unwrap().problem,
        Corruption::InconsistentManifest { .. }
    ));
}
