//! Writing the files a test's project is made of, and checking a tree was
//! left alone.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Writes `text` to `path`, creating its parent directories first, and
/// returns `path`. Panics (failing the test) when either cannot be done.
pub fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|e| panic!("cannot create `{}`: {e}", parent.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("cannot write `{}`: {e}", path.display()));
    path.to_path_buf()
}

/// Copies a directory tree (sources only; no symlinks expected) into `to`.
/// Panics (failing the test) when a file cannot be read or written.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// What [`tree`] records of one path: its mode, size, modification time
/// (nanoseconds) and, for a file, its content.
pub type PathState = (u32, u64, i64, Vec<u8>);

/// Every path below `root` (not following links) with its [`PathState`],
/// so two calls compare equal exactly when nothing below `root` was
/// written, created, removed, re-moded or touched in between.
pub fn tree(root: &Path) -> BTreeMap<PathBuf, PathState> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list `{}`: {e}", dir.display()))
        {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mtime = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
            let bytes = if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                if meta.is_dir() {
                    todo.push(path.clone());
                }
                Vec::new()
            };
            out.insert(path, (meta.mode(), meta.len(), mtime, bytes));
        }
    }
    out
}

/// `chmod -R a-w root`: every file and directory below `root`, and `root`
/// itself, loses its write bits (links are left alone).
pub fn make_read_only(root: &Path) {
    for path in tree(root).keys().chain([&root.to_path_buf()]) {
        let meta = std::fs::symlink_metadata(path).unwrap();
        if meta.is_symlink() {
            continue;
        }
        let mode = meta.mode() & 0o7777;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o222)).unwrap();
    }
}

/// Asserts that the committed file at `relative` (from the repository root)
/// is exactly `expected`, its generator's output, and returns it; a stale or
/// missing file fails the test with the `regenerate` command that rewrites it.
pub fn assert_generated_file(relative: &str, expected: &str, regenerate: &str) -> String {
    let path = crate::repo_root().join(relative);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "{} is stale (or missing): regenerate it with `{regenerate}` (from the repository root)",
        path.display()
    );
    committed
}
