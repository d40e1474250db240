//! The last-used protocol of an entry: the one home of how a hit marks an
//! entry used and how gc reads that mark before evicting it.
//!
//! Guarantees:
//! - **One file**: an entry's last use is the mtime of its
//!   [`LAST_USED_FILE`] (`last-used`), else its manifest's ([`read`]).
//! - **Never through a symlink, never blocking, owner-only**: the file is
//!   opened for writing with `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC` (a FIFO
//!   does not block the open, a symlink fails it) and, when missing,
//!   created with mode 0600 ([`open`]).
//! - **A touch under a shared lock** ([`touch`]): a hit sets the mtime to
//!   now holding a shared `flock` of the file, best effort (a read-only
//!   cache still serves hits). A lookup touches *before* it checks the entry.
//! - **gc's exclusive lock** ([`lock_for_removal`]): gc re-reads the time
//!   holding an exclusive `flock` of the same file and keeps it until the
//!   entry is removed, so a touch lands either before that re-read (which
//!   then spares the entry) or after the entry is gone (and the checks that
//!   follow the touch miss): a hit never returns a path about to vanish.
//! - **Touched recently, left alone**: only the Python warm reader skips
//!   the touch, when the file is a regular file set at most 10 s ago (one in
//!   the future is set to now), well inside gc's default grace of 60 s; every
//!   touch of this crate sets it.
//!
//! Restated in Python at `python/abicache/_warm_record.py:check_record`
//! (its `last_used` block, and `_TOUCHED_RECENTLY_NS`: the warm path reads
//! no native module), tied by
//! `tests/python/test_warm_reader.py::test_the_touch_of_last_used_waits_while_gc_holds_it`.

use std::path::Path;
use std::time::SystemTime;

pub(crate) use crate::layout::LAST_USED_FILE;
use crate::layout::MANIFEST_FILE;

/// Sets `dir/last-used`'s mtime to now, creating it owner-only if needed,
/// under a shared `flock` of it: gc holds it exclusively from its last
/// re-read of the time to the entry's removal (see [`lock_for_removal`]),
/// so this touch lands either before that re-read (which then spares the
/// entry) or after the entry is gone (and the checks that follow miss).
/// Best effort: a read-only cache still serves hits.
pub(crate) fn touch(dir: &Path) {
    if let Ok(f) = open(dir) {
        if f.lock_shared().is_ok() {
            let _ = f.set_modified(SystemTime::now());
        }
    }
}

/// [`touch`] for a shared cache: sets `dir/last-used`'s mtime to now with
/// `futimens(UTIME_NOW)` (a server that sets times uses its own clock),
/// without a lock (no lock holds across nodes, and a filesystem without
/// lock support must not skip the touch). Best effort. gc on a shared
/// cache relies on the grace period instead (see `Store::gc`).
pub(crate) fn touch_shared(dir: &Path) {
    if let Ok(f) = open(dir) {
        let _ = crate::private_file::set_times_now(&f);
    }
}

/// Opens (creating it owner-only if needed) `dir/last-used` for writing,
/// never through a symlink and never blocking on a FIFO.
pub(crate) fn open(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(LAST_USED_FILE))
}

/// Opens `dir/last-used` for reading (never through a symlink, never
/// blocking): a fresh descriptor, whose `fstat` a network filesystem
/// revalidates (NFS's close-to-open rule).
pub(crate) fn open_read(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(LAST_USED_FILE))
}

/// An entry's last use, read for its removal: `last-used` locked
/// exclusively (a lookup touches it under a shared lock, see [`touch`])
/// and its mtime, which no touch can change while the returned file is
/// open. `None` (no time) while a lookup is touching it. An entry without
/// one (every publish writes one) gets one now, and so counts as used now:
/// the next gc past the grace evicts it. A `last-used` that cannot be
/// opened (a symlink, say) cannot be touched either: then the unlocked
/// [`read`], and no file.
pub(crate) fn lock_for_removal(dir: &Path) -> (Option<SystemTime>, Option<std::fs::File>) {
    let Ok(file) = open(dir) else {
        return (Some(read(dir)), None);
    };
    match file.try_lock() {
        Ok(()) => (file.metadata().and_then(|m| m.modified()).ok(), Some(file)),
        Err(_) => (None, None),
    }
}

/// An entry's last use: the mtime of `last-used`, else of its manifest.
pub(crate) fn read(dir: &Path) -> SystemTime {
    std::fs::symlink_metadata(dir.join(LAST_USED_FILE))
        .or_else(|_| std::fs::symlink_metadata(dir.join(MANIFEST_FILE)))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    use super::*;

    fn set_mtime(path: &Path, secs: u64) {
        std::fs::File::options()
            .append(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn a_touch_creates_last_used_owner_only_and_sets_it_to_now() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path());
        let meta = std::fs::symlink_metadata(dir.path().join(LAST_USED_FILE)).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let age = SystemTime::now()
            .duration_since(read(dir.path()))
            .unwrap_or_default();
        assert!(age < Duration::from_secs(60), "{age:?}");
    }

    #[test]
    fn a_symlinked_last_used_is_neither_followed_nor_touched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "").unwrap();
        set_mtime(&target, 1_000_000);
        std::os::unix::fs::symlink(&target, dir.path().join(LAST_USED_FILE)).unwrap();
        touch(dir.path());
        assert!(open(dir.path()).is_err());
        let target_time = std::fs::metadata(&target).unwrap().modified().unwrap();
        assert_eq!(
            target_time,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000)
        );
        // gc reads the link's own time, unlocked, and holds no file.
        let (time, held) = lock_for_removal(dir.path());
        assert!(held.is_none());
        assert_eq!(time, Some(read(dir.path())));
    }

    #[test]
    fn without_last_used_the_manifest_time_is_read() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), SystemTime::UNIX_EPOCH);
        std::fs::write(dir.path().join(MANIFEST_FILE), "{}").unwrap();
        set_mtime(&dir.path().join(MANIFEST_FILE), 2_000_000);
        assert_eq!(
            read(dir.path()),
            SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000)
        );
    }

    #[test]
    fn gc_gets_no_time_while_a_touch_holds_the_shared_lock() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path());
        set_mtime(&dir.path().join(LAST_USED_FILE), 1_000_000);
        let touching = open(dir.path()).unwrap();
        touching.lock_shared().unwrap();
        let (time, held) = lock_for_removal(dir.path());
        assert_eq!(time, None);
        assert!(held.is_none());
        drop(touching);
        let (time, held) = lock_for_removal(dir.path());
        assert_eq!(
            time,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
        );
        assert!(held.is_some(), "gc holds the file until the removal");
    }
}
