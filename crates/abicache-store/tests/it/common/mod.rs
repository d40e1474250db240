//! Helpers shared by the integration tests: real stores in real temp dirs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use abicache_store::{Claim, Hit, Manifest, Store};

/// A fresh store under a new temp dir (kept alive by the returned guard).
pub fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("cache"));
    (dir, store)
}

/// Opens `root` with settings independent of the test runner's environment,
/// and no gc grace (the tests of the grace set their own).
pub fn open(root: &Path) -> Store {
    Store::open(root)
        .unwrap()
        .with_lock_timeout(Duration::from_secs(20))
        .with_max_size(None)
        .with_gc_grace(Duration::ZERO)
}

/// A 64-hex-digit key derived from `seed`, like a real payload key.
pub fn key(seed: &str) -> String {
    blake3::hash(seed.as_bytes()).to_hex().to_string()
}

/// Builds and publishes `bytes` as `lib<name>.so` under `key`.
pub fn publish(store: &Store, key: &str, name: &str, bytes: &[u8]) -> Hit {
    let guard = match store.lookup_or_lock(key).unwrap() {
        Claim::Build { guard, .. } => guard,
        Claim::Hit { .. } => panic!("{key} already cached"),
    };
    let lib = format!("lib{name}.so");
    std::fs::write(guard.temp_dir().join(&lib), bytes).unwrap();
    let mut manifest = Manifest::new(key, name, format!("format=1\nname={name}\n"));
    manifest
        .toolchain
        .insert("c++".into(), "g++ (test) 13".into());
    manifest.compile_seconds = 1.5;
    manifest.units = 2;
    guard.publish(&lib, manifest).unwrap().hit
}

/// Sets an entry's last-used time to `secs` after the epoch.
pub fn set_last_used(store: &Store, key: &str, secs: u64) {
    let path = store
        .layout()
        .entry_dir(key)
        .join(abicache_store::LAST_USED_FILE);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// Names of the directories under `dir`.
pub fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Insta settings that replace `root` with `[ROOT]`.
pub fn filtered(root: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex_escape(&root.display().to_string()), "[ROOT]");
    s
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// The root of a store as a path buffer.
pub fn root(store: &Store) -> PathBuf {
    store.root().to_owned()
}
