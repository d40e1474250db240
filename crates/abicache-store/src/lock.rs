//! Per-key OS file locks that die with their holder.
//!
//! A lock is `std::fs::File::lock`/`try_lock` (`flock(2)` on Linux) on a
//! file under `v1/locks/`: the kernel releases it when the holder exits or is
//! killed, so the mere existence of a lock file never means "locked". The
//! wait is bounded by polling `try_lock` with short sleeps up to a time-out
//! (`ABICACHE_LOCK_TIMEOUT`). After acquiring, the holder writes its pid,
//! host and start time into the file so a time-out can say who holds it.

use std::ffi::OsStr;
use std::fs::TryLockError;
use std::io::{Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::env;
use crate::error::{Result, StoreError};
use crate::manifest::unix_now;

/// The bounded wait used when `ABICACHE_LOCK_TIMEOUT` is not set.
pub use abicache_settings::DEFAULT_LOCK_TIMEOUT;

/// Parses a lock time-out in seconds (e.g. `600`, `0.5`); `None` or empty
/// gives [`DEFAULT_LOCK_TIMEOUT`]. `0` means "try once, never wait". The
/// rule of `abicache_settings::StoreSettings::lock_timeout`.
pub fn parse_lock_timeout(value: Option<&OsStr>) -> Result<Duration> {
    Ok(abicache_settings::parse_seconds(
        env::ABICACHE_LOCK_TIMEOUT,
        value,
        DEFAULT_LOCK_TIMEOUT,
    )?)
}

/// An exclusive lock on a file, held until dropped (or until the process
/// dies: the kernel releases it either way).
#[derive(Debug)]
pub struct FileLock {
    file: fs_err::File,
    path: PathBuf,
}

impl FileLock {
    /// Takes the lock if it is free right now; `Ok(None)` when another open
    /// file (in this or another process) holds it.
    pub fn try_acquire(path: &Path) -> Result<Option<FileLock>> {
        loop {
            let file = open_lock_file(path)?;
            match file.file().try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(StoreError::io_at("lock", path)(e)),
            }
            // A holder may have unlinked the file (see `unlink`) between our
            // open and our lock: then this lock guards nothing; open again.
            let ours = file.metadata()?;
            match std::fs::metadata(path) {
                Ok(m) if m.ino() == ours.ino() && m.dev() == ours.dev() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io_at("inspect lock file", path)(e)),
            }
            let mut lock = FileLock {
                file,
                path: path.to_owned(),
            };
            lock.write_holder();
            return Ok(Some(lock));
        }
    }

    /// Takes the lock, polling with short sleeps for at most `timeout`;
    /// a time-out is [`StoreError::LockTimeout`] naming `what`, the lock
    /// file and the holder recorded in it.
    pub fn acquire(path: &Path, what: &str, timeout: Duration) -> Result<FileLock> {
        let start = Instant::now();
        let mut sleep = Duration::from_millis(2);
        loop {
            if let Some(lock) = Self::try_acquire(path)? {
                return Ok(lock);
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(StoreError::LockTimeout {
                    key: what.to_owned(),
                    path: path.to_owned(),
                    timeout,
                    holder: describe_holder(path),
                });
            }
            std::thread::sleep(sleep.min(timeout - waited));
            sleep = (sleep * 2).min(Duration::from_millis(50));
        }
    }

    /// The open, locked file: the lock stays held while it (or a copy inherited by a
    /// child process) is open.
    pub fn into_file(self) -> std::fs::File {
        self.file.into_parts().0
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the lock file while still holding the lock, so `locks/` does
    /// not grow without bound. Safe: anyone who opened the old file notices
    /// it was unlinked after locking it and opens the path again.
    pub fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    fn write_holder(&mut self) {
        // Best effort: the information is only used in time-out messages.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
        let text = format!(
            "pid={}\nhost={}\nsince={}\n",
            std::process::id(),
            host,
            unix_now()
        );
        let _ = self.file.set_len(0);
        let _ = self.file.rewind();
        let _ = self.file.write_all(text.as_bytes());
    }
}

/// Opens (creating owner-only) a lock file: never through a symlink, never
/// blocking on a FIFO, and a directory or anything else squatting on the
/// path is [`StoreError::Squatted`], naming the fix.
fn open_lock_file(path: &Path) -> Result<fs_err::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| StoreError::opening("open lock file", path, e))?;
    let meta = file
        .metadata()
        .map_err(StoreError::io_at("inspect lock file", path))?;
    if !meta.is_file() {
        return Err(StoreError::Squatted {
            path: path.to_owned(),
            kind: "special file",
        });
    }
    Ok(fs_err::File::from_parts(file, path))
}

/// Who holds the lock at `path`, in words, from what the holder wrote into it.
pub fn describe_holder(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .map(str::to_owned)
    };
    match field("pid") {
        Some(pid) => {
            let mut s = format!("pid {pid}");
            if let Some(host) = field("host") {
                s += &format!(" on host `{host}`");
            }
            if let Some(since) = field("since").and_then(|v| v.parse::<u64>().ok()) {
                s += &format!(" for {}s", unix_now().saturating_sub(since));
            }
            s
        }
        None => "a process that has not recorded its pid yet".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_timeout_parses_seconds_and_defaults() {
        assert_eq!(parse_lock_timeout(None).unwrap(), DEFAULT_LOCK_TIMEOUT);
        assert_eq!(
            parse_lock_timeout(Some(OsStr::new(""))).unwrap(),
            DEFAULT_LOCK_TIMEOUT
        );
        assert_eq!(
            parse_lock_timeout(Some(OsStr::new("30"))).unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(
            parse_lock_timeout(Some(OsStr::new("0.5"))).unwrap(),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn unparseable_lock_timeout_names_the_variable() {
        assert!(parse_lock_timeout(Some(OsStr::new("-1"))).is_err());
        let err = parse_lock_timeout(Some(OsStr::new("ten minutes"))).unwrap_err();
        insta::assert_snapshot!(err.to_string());
    }

    #[test]
    fn second_open_file_in_same_process_cannot_take_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let held = FileLock::try_acquire(&path).unwrap().expect("free lock");
        assert!(FileLock::try_acquire(&path).unwrap().is_none());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(&format!("pid={}\n", std::process::id())),
            "{text}"
        );
        drop(held);
        assert!(FileLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn unlinked_lock_file_is_reopened_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.lock");
        let held = FileLock::try_acquire(&path).unwrap().unwrap();
        held.unlink();
        // A new holder gets a fresh file; the old holder's lock guards nothing any more.
        let fresh = FileLock::try_acquire(&path)
            .unwrap()
            .expect("fresh file is free");
        assert!(path.exists());
        drop((held, fresh));
    }
}
