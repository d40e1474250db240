//! The stat cache: per cache, each scanned file's (path, stamp) → (BLAKE3,
//! lexer facts), so a warm key stats its files instead of reading, hashing
//! and lexing them (docs/key.md, "The stat cache").
//!
//! Guarantees:
//! - **Exactly the cold scan's answer.** An entry is used only when the
//!   file's current [`FileStamp`] (device, inode, size, mtime and ctime in
//!   nanoseconds) equals the stored one, and a stamp is stored only when it
//!   was trusted at the time the file was read ([`FileStamp::trusted`], the
//!   racy-git rule): a write in the same timestamp tick as the read, a
//!   truncation, a replacement by rename, or an mtime set back by hand all
//!   give another stamp or were never stored, so the file is read again.
//! - **Facts from this scanner only.** The file records the fingerprint of
//!   the scanner's source ([`SCANNER_FINGERPRINT`]) and a format number; a
//!   file written by another version is ignored as a whole. [`FileFacts`] is
//!   stored whole (serde), so a field added to it is cached automatically.
//! - **Never a failed scan.** A missing, unreadable, truncated or corrupt
//!   cache file (checked against its BLAKE3) is an empty cache; saving is
//!   best effort (an atomic rename of a private temporary file; a read-only
//!   or full disk just skips it).

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use abicache_fs::{FileStamp, Follow};
use bincode::Options;
use serde::{Deserialize, Serialize};

use crate::absent::AbsentMap;
use crate::fast_hash::{FastMap, FastSet};
use crate::lexer::FileFacts;

/// The fingerprint of the scanner's source code (crate version and a hash of
/// every `src/**/*.rs`, computed by `build.rs`): facts cached by a scanner
/// with another fingerprint are never used.
pub const SCANNER_FINGERPRINT: &str = env!("ABICACHE_SCAN_FINGERPRINT");

/// Bumped whenever the on-disk layout of the cache file changes.
const FORMAT: u32 = 2;

/// A cache file larger than this is not read (it is then rewritten from
/// scratch by the next scan that changes anything).
const MAX_FILE_BYTES: u64 = 512 << 20;

/// At most this many files are remembered; past it, the entries not used by
/// the latest scan are dropped.
const MAX_ENTRIES: usize = 200_000;

/// About what one entry takes on disk (a header's path, BLAKE3, includes
/// and defines): the first guess of the file's size when saving.
const ENTRY_BYTES_GUESS: usize = 512;

/// What the scan knows about one file without reading it again.
#[derive(Debug, Clone)]
pub(crate) struct CachedFile {
    /// The stamp the file had when it was read (trusted when stored).
    pub(crate) stamp: FileStamp,
    /// Hex BLAKE3 of its contents.
    pub(crate) blake3: Arc<str>,
    /// What the lexer found in it.
    pub(crate) facts: Arc<FileFacts>,
}

/// A file read in full by a scan: what to remember about it.
#[derive(Debug)]
pub(crate) struct FreshFile {
    /// The path the scan read (the cache's key).
    pub(crate) path: PathBuf,
    /// Its stamp before the read, when trusted ([`FileStamp::trusted`]).
    pub(crate) stamp: Option<FileStamp>,
    /// Hex BLAKE3 of what was read.
    pub(crate) blake3: Arc<str>,
    /// What the lexer found.
    pub(crate) facts: Arc<FileFacts>,
}

/// How a scan used the stat cache (for tests, benchmarks and `--verbose`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatCacheStats {
    /// Files whose stamp matched: stat'ed, not read.
    pub hits: usize,
    /// Files read, hashed and lexed (no entry, or a stamp that differed).
    pub reads: usize,
    /// Entries the file held when opened.
    pub loaded: usize,
}

/// The stat cache of one abicache cache: see the module documentation.
///
/// Open it with [`StatCache::open`], pass it to
/// [`scan_cached`](crate::scan_cached), then [`StatCache::save`] it.
#[derive(Debug, Default)]
pub struct StatCache {
    /// Where it is saved; `None` for a cache that lives in memory only.
    path: Option<PathBuf>,
    /// By path, hashed as bytes (a `Path` hashes component by component).
    entries: FastMap<OsString, CachedFile>,
    /// Names known absent from directories, by directory stamp ([`crate::absent`]).
    absent: Arc<AbsentMap>,
    /// Entries used or refreshed by scans since opening (survive a trim).
    touched: FastSet<OsString>,
    dirty: bool,
    hits: AtomicUsize,
    reads: AtomicUsize,
    loaded: usize,
}

/// The on-disk file: a BLAKE3 of the rest, then this (bincode).
#[derive(Serialize, Deserialize)]
struct Disk<E, D> {
    format: u32,
    scanner: String,
    entries: Vec<E>,
    dirs: D,
}

#[derive(Serialize)]
struct DiskEntryRef<'a> {
    path: &'a Path,
    stamp: &'a FileStamp,
    blake3: &'a str,
    facts: &'a FileFacts,
}

#[derive(Deserialize)]
struct DiskEntry {
    path: PathBuf,
    stamp: FileStamp,
    blake3: String,
    facts: FileFacts,
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
}

impl StatCache {
    /// A cache that is never saved (every scan in this process still
    /// benefits from the files earlier scans read).
    pub fn in_memory() -> StatCache {
        StatCache::default()
    }

    /// The cache saved at `path`, or an empty one when the file is absent,
    /// unreadable, corrupt, or written by another scanner version. Never
    /// fails: a cache that cannot be used is a cold scan, not an error.
    pub fn open(path: impl Into<PathBuf>) -> StatCache {
        let path = path.into();
        let (entries, absent) = read_entries(&path).unwrap_or_default();
        StatCache {
            loaded: entries.len(),
            path: Some(path),
            entries,
            absent: Arc::new(absent),
            ..StatCache::default()
        }
    }

    /// Where [`StatCache::save`] writes, if anywhere.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Number of files remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no file is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Hits and reads of the scans run since opening.
    pub fn stats(&self) -> StatCacheStats {
        StatCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            loaded: self.loaded,
        }
    }

    /// The entry for `path` if its current stamp is `stamp`.
    pub(crate) fn get(&self, path: &Path, stamp: &FileStamp) -> Option<&CachedFile> {
        let entry = self
            .entries
            .get(path.as_os_str())
            .filter(|e| e.stamp == *stamp)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(entry)
    }

    /// The names known absent from directories (shared with a scan's resolver).
    pub(crate) fn absent(&self) -> Arc<AbsentMap> {
        Arc::clone(&self.absent)
    }

    /// Replaces the known absences with what a scan learnt.
    pub(crate) fn set_absent(&mut self, absent: AbsentMap) {
        self.absent = Arc::new(absent);
        self.dirty = true;
    }

    /// Whether `path` has an entry at all (then it is worth a `stat` first).
    pub(crate) fn knows(&self, path: &Path) -> bool {
        !self.entries.is_empty() && self.entries.contains_key(path.as_os_str())
    }

    /// Counts one full read.
    pub(crate) fn count_read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks `path` as used by the latest scan.
    pub(crate) fn touch(&mut self, path: &Path) {
        if !self.touched.contains(path.as_os_str()) {
            self.touched.insert(path.as_os_str().to_owned());
        }
    }

    /// Remembers a file the scan read in full: stored when its stamp was
    /// trusted, and any older entry for the path dropped when it was not.
    pub(crate) fn remember(&mut self, fresh: FreshFile) {
        self.touch(&fresh.path);
        match fresh.stamp {
            Some(stamp) => {
                let entry = CachedFile {
                    stamp,
                    blake3: fresh.blake3,
                    facts: fresh.facts,
                };
                self.entries.insert(fresh.path.into_os_string(), entry);
                self.dirty = true;
            }
            None => {
                if self.entries.remove(fresh.path.as_os_str()).is_some() {
                    self.dirty = true;
                }
            }
        }
    }

    /// Writes the cache back when a scan changed it: to a private temporary
    /// file next to it, renamed into place (a reader sees the old file or
    /// the new one, never a part). Returns whether it wrote. Errors are for
    /// the caller to ignore or report: the cache is an optimisation.
    pub fn save(&mut self) -> io::Result<bool> {
        let Some(path) = self.path.clone() else {
            return Ok(false);
        };
        if !self.dirty {
            return Ok(false);
        }
        if self.entries.len() > MAX_ENTRIES {
            let touched = &self.touched;
            self.entries.retain(|p, _| touched.contains(p));
        }
        if self.absent.len() > MAX_ENTRIES {
            self.absent = Arc::default();
        }
        let mut entries: Vec<DiskEntryRef<'_>> = self
            .entries
            .iter()
            .map(|(path, e)| DiskEntryRef {
                path: Path::new(path),
                stamp: &e.stamp,
                blake3: &e.blake3,
                facts: &e.facts,
            })
            .collect();
        // Any fixed order will do; bytes compare faster than components.
        entries.sort_unstable_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
        let disk = Disk {
            format: FORMAT,
            scanner: SCANNER_FINGERPRINT.to_owned(),
            entries,
            dirs: &*self.absent,
        };
        // Serialized in one pass straight after room for its BLAKE3 (bincode's
        // `serialize` sizes the whole value first, then copies it again).
        let mut bytes = Vec::with_capacity(32 + disk.entries.len() * ENTRY_BYTES_GUESS);
        bytes.extend_from_slice(&[0; 32]);
        codec()
            .serialize_into(&mut bytes, &disk)
            .map_err(io::Error::other)?;
        let sum = blake3::hash(&bytes[32..]);
        bytes[..32].copy_from_slice(sum.as_bytes());
        write_atomic(&path, &bytes)?;
        self.dirty = false;
        Ok(true)
    }
}

/// The entries of the cache file at `path`, or `None` when it cannot be used.
fn read_entries(path: &Path) -> Option<(FastMap<OsString, CachedFile>, AbsentMap)> {
    let bytes = abicache_fs::read_bounded(path, Follow::No, MAX_FILE_BYTES).ok()?;
    if bytes.len() < 32 {
        return None;
    }
    let (sum, body) = bytes.split_at(32);
    if blake3::hash(body).as_bytes() != sum {
        return None;
    }
    let disk: Disk<DiskEntry, AbsentMap> = codec()
        .with_limit(body.len() as u64 * 4 + 4096)
        .deserialize(body)
        .ok()?;
    if disk.format != FORMAT || disk.scanner != SCANNER_FINGERPRINT {
        return None;
    }
    let entries = disk
        .entries
        .into_iter()
        .map(|e| {
            let entry = CachedFile {
                stamp: e.stamp,
                blake3: e.blake3.into(),
                facts: Arc::new(e.facts),
            };
            (e.path.into_os_string(), entry)
        })
        .collect();
    Some((entries, disk.dirs))
}

/// Writes `bytes` to `path` through a temporary file (mode 0600) in the same
/// directory and a rename; the temporary file is removed on failure.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.{}.{nonce:08x}.tmp", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(path: &Path, stamp: Option<FileStamp>) -> FreshFile {
        FreshFile {
            path: path.to_owned(),
            stamp,
            blake3: "00".repeat(32).into(),
            facts: Arc::new(FileFacts {
                uses_extension_name: true,
                stable_registrations: vec![3, 7],
                ..FileFacts::default()
            }),
        }
    }

    fn stamp() -> FileStamp {
        FileStamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4,
            ctime_ns: 5,
        }
    }

    #[test]
    fn saved_entries_round_trip_and_only_trusted_stamps_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("facts.bin");
        let mut cache = StatCache::open(&file);
        assert!(cache.is_empty());
        cache.remember(fresh(Path::new("/a.h"), Some(stamp())));
        cache.remember(fresh(Path::new("/racy.h"), None));
        assert!(cache.save().unwrap());
        assert!(!cache.save().unwrap(), "nothing changed: nothing written");
        let reopened = StatCache::open(&file);
        assert_eq!(reopened.len(), 1);
        let hit = reopened.get(Path::new("/a.h"), &stamp()).unwrap();
        assert_eq!(hit.facts.stable_registrations, [3, 7]);
        let other = FileStamp {
            ctime_ns: 6,
            ..stamp()
        };
        assert!(reopened.get(Path::new("/a.h"), &other).is_none());
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&file).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_corrupt_truncated_or_foreign_file_is_an_empty_cache() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("facts.bin");
        let mut cache = StatCache::open(&file);
        cache.remember(fresh(Path::new("/a.h"), Some(stamp())));
        cache.save().unwrap();
        let good = fs::read(&file).unwrap();
        for bad in [
            good[..good.len() - 1].to_vec(),
            good[..10].to_vec(),
            Vec::new(),
            {
                let mut b = good.clone();
                let last = b.len() - 1;
                b[last] ^= 1;
                b
            },
        ] {
            fs::write(&file, &bad).unwrap();
            assert!(StatCache::open(&file).is_empty());
        }
        // A well-formed file from another scanner version.
        let (old_stamp, no_facts) = (stamp(), FileFacts::default());
        let disk = Disk::<DiskEntryRef<'_>, AbsentMap> {
            format: FORMAT,
            scanner: "0.0.0-other".into(),
            dirs: AbsentMap::new(),
            entries: vec![DiskEntryRef {
                path: Path::new("/a.h"),
                stamp: &old_stamp,
                blake3: "x",
                facts: &no_facts,
            }],
        };
        let body = codec().serialize(&disk).unwrap();
        let mut bytes = blake3::hash(&body).as_bytes().to_vec();
        bytes.extend_from_slice(&body);
        fs::write(&file, bytes).unwrap();
        assert!(StatCache::open(&file).is_empty());
    }

    #[test]
    fn a_read_only_directory_makes_save_fail_without_leaving_files() {
        let dir = tempfile::tempdir().unwrap();
        let ro = dir.path().join("ro");
        fs::create_dir(&ro).unwrap();
        let mut cache = StatCache::open(ro.join("facts.bin"));
        cache.remember(fresh(Path::new("/a.h"), Some(stamp())));
        let perms = std::os::unix::fs::PermissionsExt::from_mode(0o500);
        fs::set_permissions(&ro, perms).unwrap();
        let result = cache.save();
        fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        if nix_is_root() {
            return; // root writes anyway: nothing to check
        }
        assert!(result.is_err());
        assert_eq!(fs::read_dir(&ro).unwrap().count(), 0);
    }

    fn nix_is_root() -> bool {
        fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap_or(false)
    }
}
