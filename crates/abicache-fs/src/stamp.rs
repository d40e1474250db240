//! Stat stamps: a file's identity, cheap to compare, changed by any write.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A stamp taken less than this long after the file's last change (mtime or
/// ctime) is not trusted: a write in the same timestamp tick could leave the
/// stamp unchanged (git's "racy" rule). Two seconds covers the coarsest
/// timestamps of the filesystems a cache lives on.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Device, inode, size, mtime and ctime (nanoseconds) of a file.
///
/// Equal stamps mean the file was not written, truncated, replaced or
/// renamed over since the stamp was taken, provided the stamp was trusted
/// when taken ([`FileStamp::trusted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileStamp {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`.
    pub size: u64,
    /// `st_mtime` in nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// `st_ctime` in nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
}

impl FileStamp {
    /// The stamp of `meta`, trusted or not (for comparing with a stored one).
    pub fn of(meta: &Metadata) -> FileStamp {
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }
    }

    /// The stamp of `meta` if it may be stored and trusted later: its last
    /// change (mtime and ctime) lies at least [`RACY_WINDOW`] before `now`.
    pub fn trusted(meta: &Metadata, now: SystemTime) -> Option<FileStamp> {
        FileStamp::of(meta).trusted_at(now)
    }

    /// This stamp if it may be stored and trusted later, it having been
    /// taken at or after `now`: [`FileStamp::trusted`] for a stamp already
    /// taken (`now` may be any earlier moment, which is only stricter).
    pub fn trusted_at(self, now: SystemTime) -> Option<FileStamp> {
        let now_ns = now.duration_since(UNIX_EPOCH).ok()?.as_nanos() as i64;
        let last_change = self.mtime_ns.max(self.ctime_ns);
        (now_ns - last_change >= RACY_WINDOW.as_nanos() as i64).then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_file_is_racy_and_an_old_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(FileStamp::trusted(&meta, SystemTime::now()).is_none());
        let later = SystemTime::now() + RACY_WINDOW + Duration::from_millis(10);
        assert_eq!(FileStamp::trusted(&meta, later), Some(FileStamp::of(&meta)));
    }

    #[test]
    fn any_write_changes_the_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        let before = FileStamp::of(&std::fs::metadata(&path).unwrap());
        // Same size, same content length, written at once: ctime still moves
        // (or the inode does, for a replacement).
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"abd").unwrap();
        assert_ne!(before, FileStamp::of(&std::fs::metadata(&path).unwrap()));
        let other = dir.path().join("g");
        std::fs::write(&other, b"abd").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_ne!(before, FileStamp::of(&std::fs::metadata(&path).unwrap()));
    }
}
