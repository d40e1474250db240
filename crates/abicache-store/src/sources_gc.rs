//! Collecting generated sources (`v1/sources/<digest>/`, see [`crate::sources`]).
//!
//! A set of generated sources is *referenced* while some entry in the store was built
//! from it: that entry's payload records the BLAKE3 of every file of the set (its
//! `file=<blake3> <path>` lines). Every gc removes the sets that no entry references
//! and that were not used within the grace period (`ABICACHE_GC_GRACE`; a set's last
//! use is the later of its directory's mtime (its creation) and the mtime of the
//! marker `<digest>.used` beside it, refreshed by every [`crate::Store::store_generated_sources`]
//! that finds it in place: the directory's own stamp never changes, so the key
//! memo and warm-load records that stamp it stay valid), so a `load_inline` between writing its sources and
//! publishing its entry never loses them. A set is removed under its lock
//! (`locks/sources-<digest>.lock`, which its writers hold while they check and mark
//! it), its last use read again first; it is renamed into `tmp/` and deleted there,
//! so it vanishes at once and a half-deleted set is never seen in place.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::lock::FileLock;
use crate::sources::{sources_lock_path, SOURCES_DIR};
use crate::store::{dir_size, Store};

impl Store {
    /// Removes unreferenced generated-source sets older than the grace period (see the
    /// module documentation); `payloads` are the payloads of every entry in the store.
    /// Best effort; returns how many sets were removed and the bytes they held.
    pub(crate) fn gc_sources(&self, payloads: &[&str]) -> (usize, u64) {
        let root = self.layout().version_dir().join(SOURCES_DIR);
        let Ok(rd) = std::fs::read_dir(&root) else {
            return (0, 0);
        };
        let (mut removed, mut bytes) = (0, 0);
        for entry in rd.flatten() {
            let dir = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&dir) else {
                continue;
            };
            if meta.is_file() && dir.extension().is_some_and(|e| e == "used") {
                self.remove_orphan_marker(&dir, &meta);
                continue;
            }
            if !meta.is_dir() || self.is_recent(last_used(&dir, &meta)) {
                continue;
            }
            let Some(hashes) = file_hashes(&dir) else {
                continue;
            };
            let referenced = payloads
                .iter()
                .any(|payload| hashes.iter().all(|h| payload.contains(h.as_str())));
            if referenced {
                continue;
            }
            // Under the set's lock (writers hold it while they check, mark
            // or replace it): read its last use again, then move it into
            // `tmp/` at once and delete it there.
            let Ok(Some(lock)) = FileLock::try_acquire(&sources_lock_path(self, &dir)) else {
                continue;
            };
            let used = std::fs::symlink_metadata(&dir).map(|m| last_used(&dir, &m));
            if used.map_or(true, |t| self.is_recent(t)) {
                continue;
            }
            let size = dir_size(&dir);
            let trash = self.trash_path("sources");
            if std::fs::rename(&dir, &trash).is_ok() {
                let _ = std::fs::remove_file(used_marker(&dir));
                lock.unlink();
                drop(lock);
                let _ = std::fs::remove_dir_all(&trash);
                removed += 1;
                bytes += size;
            }
        }
        (removed, bytes)
    }
}

impl Store {
    /// Removes `marker` (a `<digest>.used` file, whose metadata is `meta`) when its set is
    /// gone and it was not touched within the grace period: under the set's lock, so a
    /// writer marking a set it just stored is never undone. Best effort.
    fn remove_orphan_marker(&self, marker: &Path, meta: &std::fs::Metadata) {
        let set = marker.with_extension("");
        if self.is_recent(meta.modified().unwrap_or(SystemTime::now())) || set.exists() {
            return;
        }
        let Ok(Some(lock)) = FileLock::try_acquire(&sources_lock_path(self, &set)) else {
            return;
        };
        if !set.exists() {
            let _ = std::fs::remove_file(marker);
            lock.unlink();
        }
    }
}

/// The BLAKE3 (hex) of every regular file in `dir`; `None` when one cannot be read
/// (the set is then left alone).
fn file_hashes(dir: &Path) -> Option<Vec<String>> {
    let mut hashes = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        if !entry.file_type().ok()?.is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path()).ok()?;
        hashes.push(format!("file={}", blake3::hash(&bytes).to_hex()));
    }
    Some(hashes)
}

/// The marker whose mtime says when the set `dir` was last found in place
/// (`<digest>.used`, beside it).
fn used_marker(dir: &Path) -> PathBuf {
    dir.with_extension("used")
}

/// When the set `dir` (whose metadata is `meta`) was last used: the later of
/// its directory's mtime and its marker's.
fn last_used(dir: &Path, meta: &std::fs::Metadata) -> SystemTime {
    let created = meta.modified().unwrap_or(SystemTime::now());
    std::fs::symlink_metadata(used_marker(dir))
        .and_then(|m| m.modified())
        .map_or(created, |marked| marked.max(created))
}

/// Marks a set of generated sources used now (its marker's mtime, the
/// marker created when missing; the directory itself is left alone); best effort.
pub(crate) fn touch_dir(dir: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let marker = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(used_marker(dir));
    if let Ok(file) = marker {
        let _ = file.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::sources::GeneratedFile;
    use crate::Store;

    /// Ages a set: its directory's mtime and its marker's, when it has one.
    fn set_mtime(dir: &std::path::Path, ago: Duration) {
        for path in [dir.to_path_buf(), super::used_marker(dir)] {
            if let Ok(file) = std::fs::File::open(path) {
                file.set_modified(std::time::SystemTime::now() - ago)
                    .unwrap();
            }
        }
    }

    #[test]
    fn marking_a_set_used_leaves_its_directory_stamp_alone() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path()).unwrap();
        let files = [GeneratedFile {
            name: "main.cpp",
            contents: b"int stamped;",
        }];
        let dir = store.store_generated_sources(&files).unwrap();
        let before = std::fs::metadata(&dir).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(store.store_generated_sources(&files).unwrap(), dir);
        let after = std::fs::metadata(&dir).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (before.mtime_nsec(), before.ctime_nsec()),
            (after.mtime_nsec(), after.ctime_nsec()),
            "a key memo or warm-load record stamping the set stays valid"
        );
        assert!(
            super::used_marker(&dir).is_file(),
            "the use is marked beside it"
        );
    }

    #[test]
    fn unreferenced_sources_past_the_grace_period_go_and_others_stay() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path()).unwrap();
        let grace = store.gc_grace();
        let old = Duration::from_secs(3600) + grace;
        let kept_by_entry = store
            .store_generated_sources(&[GeneratedFile {
                name: "main.cpp",
                contents: b"int a;",
            }])
            .unwrap();
        let orphan = store
            .store_generated_sources(&[GeneratedFile {
                name: "main.cpp",
                contents: b"int b;",
            }])
            .unwrap();
        let recent = store
            .store_generated_sources(&[GeneratedFile {
                name: "main.cpp",
                contents: b"int c;",
            }])
            .unwrap();
        set_mtime(&kept_by_entry, old);
        set_mtime(&orphan, old);
        let payload = format!(
            "format=1\nfile={} main.cpp\n",
            blake3::hash(b"int a;").to_hex()
        );
        let (removed, bytes) = store.gc_sources(&[&payload]);
        assert_eq!(removed, 1);
        assert!(bytes > 0);
        assert!(kept_by_entry.is_dir(), "referenced by an entry's payload");
        assert!(!orphan.exists(), "unreferenced and old");
        assert!(recent.is_dir(), "within the grace period");

        // Storing a set again marks it used: an old orphan written again stays.
        let again = store
            .store_generated_sources(&[GeneratedFile {
                name: "main.cpp",
                contents: b"int b;",
            }])
            .unwrap();
        set_mtime(&again, old);
        store
            .store_generated_sources(&[GeneratedFile {
                name: "main.cpp",
                contents: b"int b;",
            }])
            .unwrap();
        assert_eq!(store.gc_sources(&[&payload]).0, 0);
        assert!(again.is_dir());
    }

    #[test]
    fn a_use_marker_whose_set_is_gone_is_removed_once_past_the_grace_period() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path()).unwrap();
        let old = Duration::from_secs(3600) + store.gc_grace();
        let make = |contents: &'static [u8]| {
            let files = [GeneratedFile {
                name: "main.cpp",
                contents,
            }];
            let dir = store.store_generated_sources(&files).unwrap();
            store.store_generated_sources(&files).unwrap(); // found in place: marked used
            let marker = super::used_marker(&dir);
            assert!(marker.is_file());
            // The set removed behind gc's back (by hand, or a crash after the rename).
            std::fs::remove_dir_all(&dir).unwrap();
            marker
        };
        let stale = make(b"int stale;");
        let fresh = make(b"int fresh;");
        set_mtime(&stale, old);
        assert_eq!(store.gc_sources(&[]).0, 0, "markers are not sets");
        assert!(!stale.exists(), "its set is gone and it is old");
        assert!(fresh.exists(), "touched within the grace period");
    }

    /// gc read a set's mtime, hashed it and deleted it in place without a lock:
    /// a writer that found the set and marked it used meanwhile lost it anyway.
    #[test]
    fn gc_leaves_a_sources_set_a_writer_holds_and_removes_others_through_trash() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path()).unwrap();
        let old = Duration::from_secs(3600) + store.gc_grace();
        let files = [GeneratedFile {
            name: "main.cpp",
            contents: b"int held;",
        }];
        let dir = store.store_generated_sources(&files).unwrap();
        set_mtime(&dir, old);
        // A writer in the middle of its check holds the set's lock.
        let lock_path = crate::sources::sources_lock_path(&store, &dir);
        let writer = crate::lock::FileLock::acquire(&lock_path, "w", Duration::ZERO).unwrap();
        assert_eq!(store.gc_sources(&[]).0, 0);
        assert!(dir.is_dir(), "not removed under its writer");
        // The writer marks it used before letting go: gc reads the mark under the lock.
        super::touch_dir(&dir);
        drop(writer);
        assert_eq!(store.gc_sources(&[]).0, 0);
        assert!(dir.is_dir(), "used within the grace period");
        // Unused and unlocked: moved into `tmp/`, deleted, its lock file gone.
        set_mtime(&dir, old);
        assert_eq!(store.gc_sources(&[]).0, 1);
        assert!(!dir.exists());
        assert!(!lock_path.exists());
        assert_eq!(
            std::fs::read_dir(store.layout().tmp_dir()).unwrap().count(),
            0
        );
        // And a writer storing it again gets it back whole.
        assert_eq!(store.store_generated_sources(&files).unwrap(), dir);
        assert_eq!(std::fs::read(dir.join("main.cpp")).unwrap(), b"int held;");
    }
}
