//! Generated sources (what `load_inline` compiles), stored by content.
//!
//! ```text
//! <root>/v1/sources/<digest>/<file>...
//! ```
//!
//! `<digest>` is 32 hex digits of the BLAKE3 of every file's name and
//! contents, so one set of generated files always lives at one path, and the
//! key of an extension built from them does not depend on who wrote them or
//! when. Writing is atomic (a private directory under `v1/tmp/`, fsynced, then
//! renamed into place); a set that is already there with the right bytes is
//! not written again, and one with wrong or missing bytes is replaced.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use fs_err::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::layout::create_dir_0700;
use crate::lock::FileLock;
use crate::store::Store;

/// Name of the directory under `v1/` that holds generated sources.
pub const SOURCES_DIR: &str = "sources";

/// Prefix of the private directory a set is written into under `v1/tmp/`
/// before it is renamed into place. It starts with `.`, which no key does,
/// so the stale-temp cleanup every `Store::open` runs leaves it alone until
/// it is an hour old.
pub(crate) const TEMP_PREFIX: &str = ".sources.";

/// How many times a set is re-checked and re-written when a corrupt copy gets in the way.
const ATTEMPTS: usize = 3;

/// One generated file: a plain file name (`main.cpp`) and its contents.
#[derive(Clone, Copy, Debug)]
pub struct GeneratedFile<'a> {
    /// The file name: `[A-Za-z0-9_.-]`, not starting with `.`.
    pub name: &'a str,
    /// The bytes of the file.
    pub contents: &'a [u8],
}

/// The directory `files` are stored in: `<root>/v1/sources/<digest>`, with
/// `<digest>` the first 128 bits of BLAKE3 over each file's name, length and
/// contents, in order.
pub fn sources_dir_for(store: &Store, files: &[GeneratedFile<'_>]) -> PathBuf {
    let mut hasher = abicache_fs::FieldHasher::new();
    for file in files {
        hasher
            .unframed(file.name.as_bytes())
            .unframed(&[0])
            .field(file.contents);
    }
    let digest = hasher.finalize().to_hex();
    store
        .layout()
        .version_dir()
        .join(SOURCES_DIR)
        .join(&digest[..32])
}

/// The lock of the sources directory `dir` (`v1/locks/sources-<digest>.lock`),
/// held by its writers and by gc.
pub(crate) fn sources_lock_path(store: &Store, dir: &Path) -> PathBuf {
    let digest = dir.file_name().unwrap_or_default().to_string_lossy();
    store.layout().lock_path(&format!("sources-{digest}"))
}

fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// True when `dir` holds every file of `files` as a regular file (not a
/// symlink) with exactly those bytes.
fn holds(dir: &Path, files: &[GeneratedFile<'_>]) -> bool {
    files.iter().all(|file| {
        let path = dir.join(file.name);
        let same_size = std::fs::symlink_metadata(&path)
            .map(|m| m.is_file() && m.len() == file.contents.len() as u64)
            .unwrap_or(false);
        same_size && std::fs::read(&path).is_ok_and(|bytes| bytes == file.contents)
    })
}

impl Store {
    /// Stores generated source files and returns their directory
    /// ([`sources_dir_for`]). When the directory already holds exactly these
    /// bytes nothing is written (a warm `load_inline` writes nothing);
    /// otherwise the set is written owner-only into a private directory,
    /// fsynced and renamed into place, replacing a corrupt copy. A reader
    /// never sees a partial set. Runs under the set's lock
    /// (`locks/sources-<digest>.lock`), which gc takes before removing it.
    pub fn store_generated_sources(&self, files: &[GeneratedFile<'_>]) -> Result<PathBuf> {
        for file in files {
            if !valid_file_name(file.name) {
                return Err(StoreError::InvalidSourceName {
                    name: file.name.to_owned(),
                });
            }
        }
        let dir = sources_dir_for(self, files);
        // The set's lock, which gc takes too: it never removes a set while it
        // is checked, marked used or replaced here.
        let _lock = FileLock::acquire(
            &sources_lock_path(self, &dir),
            "generated sources",
            self.lock_timeout(),
        )?;
        for _ in 0..ATTEMPTS {
            if holds(&dir, files) {
                // Used now: gc spares it for the grace period (see `crate::sources_gc`).
                crate::sources_gc::touch_dir(&dir);
                return Ok(dir);
            }
            let parent = dir.parent().expect("sources dir has a parent");
            create_dir_0700(parent)?;
            let temp = self.write_private_copy(files)?;
            match std::fs::rename(temp.path(), &dir) {
                Ok(()) => {
                    // The directory now lives on as `dir`; nothing to clean up.
                    let _ = temp.keep();
                    fsync_dir(parent)?;
                    return Ok(dir);
                }
                // Another writer got there first, or a corrupt copy is in the
                // way: re-check, and move a corrupt one aside.
                Err(_) if dir.exists() => {
                    if !holds(&dir, files) {
                        self.discard(&dir)?;
                    }
                }
                Err(e) => return Err(StoreError::io_at("rename a sources directory to", &dir)(e)),
            }
        }
        if holds(&dir, files) {
            return Ok(dir);
        }
        Err(StoreError::SourcesUnstable { dir })
    }

    fn write_private_copy(&self, files: &[GeneratedFile<'_>]) -> Result<tempfile::TempDir> {
        let tmp = self.layout().tmp_dir();
        create_dir_0700(&tmp)?;
        let temp = tempfile::Builder::new()
            // A name no key starts with (`.`): opening the store removes a
            // `tmp/<key>.…` whose key lock is free, which would take a set
            // another process is still writing.
            .prefix(TEMP_PREFIX)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&tmp)
            .map_err(StoreError::io_at("create a directory in", &tmp))?;
        for file in files {
            let path = temp.path().join(file.name);
            let mut out = fs_err::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            out.write_all(file.contents)?;
            out.sync_all()?;
        }
        fsync_dir(temp.path())?;
        Ok(temp)
    }

    /// Moves a wrong sources directory out of the way (into `v1/tmp/`) and removes it.
    fn discard(&self, dir: &Path) -> Result<()> {
        let trash = tempfile::Builder::new()
            .prefix(".sources-trash.")
            .tempdir_in(self.layout().tmp_dir())
            .map_err(StoreError::io_at(
                "create a directory in",
                self.layout().tmp_dir(),
            ))?;
        let target = trash.path().join("old");
        match std::fs::rename(dir, &target) {
            Ok(()) => Ok(()),
            // Someone else moved or replaced it: the caller re-checks.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io_at(
                "move aside the corrupt sources directory",
                dir,
            )(e)),
        }
    }
}

fn fsync_dir(dir: &Path) -> Result<()> {
    fs_err::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files<'a>(main: &'a str, cu: &'a str) -> [GeneratedFile<'a>; 2] {
        [
            GeneratedFile {
                name: "main.cpp",
                contents: main.as_bytes(),
            },
            GeneratedFile {
                name: "cuda.cu",
                contents: cu.as_bytes(),
            },
        ]
    }

    fn store() -> (tempfile::TempDir, Store) {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path().join("cache")).unwrap();
        (root, store)
    }

    #[test]
    fn same_contents_same_directory_written_once() {
        let (_root, store) = store();
        let dir = store.store_generated_sources(&files("int a;", "")).unwrap();
        assert_eq!(
            fs_err::read_to_string(dir.join("main.cpp")).unwrap(),
            "int a;"
        );
        assert_eq!(fs_err::read_to_string(dir.join("cuda.cu")).unwrap(), "");
        let mode = fs_err::metadata(dir.join("main.cpp"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let before = fs_err::metadata(dir.join("main.cpp"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let again = store.store_generated_sources(&files("int a;", "")).unwrap();
        assert_eq!(again, dir);
        let after = fs_err::metadata(dir.join("main.cpp"))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after, "an existing, intact set is not rewritten");
    }

    #[test]
    fn different_contents_or_names_get_different_directories() {
        let (_root, store) = store();
        let a = store.store_generated_sources(&files("int a;", "")).unwrap();
        let b = store.store_generated_sources(&files("int b;", "")).unwrap();
        // Moving bytes from one file to the other is a different set.
        let c = store.store_generated_sources(&files("", "int a;")).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert!(a.starts_with(store.root().join("v1").join(SOURCES_DIR)));
    }

    #[test]
    fn a_corrupt_copy_is_replaced() {
        let (_root, store) = store();
        let dir = store
            .store_generated_sources(&files("int a;", "x"))
            .unwrap();
        fs_err::write(dir.join("main.cpp"), "int evil;").unwrap();
        fs_err::remove_file(dir.join("cuda.cu")).unwrap();
        let again = store
            .store_generated_sources(&files("int a;", "x"))
            .unwrap();
        assert_eq!(again, dir);
        assert_eq!(
            fs_err::read_to_string(dir.join("main.cpp")).unwrap(),
            "int a;"
        );
        assert_eq!(fs_err::read_to_string(dir.join("cuda.cu")).unwrap(), "x");
    }

    #[test]
    fn a_symlink_in_place_of_a_file_is_replaced() {
        let (root, store) = store();
        let dir = store.store_generated_sources(&files("int a;", "")).unwrap();
        let elsewhere = root.path().join("elsewhere.cpp");
        fs_err::write(&elsewhere, "int a;").unwrap();
        fs_err::remove_file(dir.join("main.cpp")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("main.cpp")).unwrap();
        store.store_generated_sources(&files("int a;", "")).unwrap();
        assert!(fs_err::symlink_metadata(dir.join("main.cpp"))
            .unwrap()
            .is_file());
    }

    #[test]
    fn names_that_are_not_plain_file_names_are_refused() {
        let (_root, store) = store();
        for name in ["../x.cpp", "a/b.cpp", ".hidden.cpp", "", "sp ace.cpp"] {
            let err = store
                .store_generated_sources(&[GeneratedFile {
                    name,
                    contents: b"",
                }])
                .unwrap_err();
            assert!(
                matches!(err, StoreError::InvalidSourceName { .. }),
                "{name}: {err}"
            );
        }
    }
}
