//! The key memo, in the spirit of ccache's direct mode: per
//! digest of everything a key is computed from besides the files (spec,
//! environment, flags, root, code version: the caller's business), the key
//! itself plus the [`Dependencies`] of the scan it came from. A warm key is
//! then one small file read and one `stat` per dependency, instead of a
//! scan.
//!
//! Guarantees:
//! - **Exactly the key a full scan gives.** A memo is answered only when
//!   every dependency still holds ([`Dependencies::unchanged`]); any edit,
//!   replacement, new or deleted header, or change in a directory the
//!   scan looked in makes it a miss, and the caller scans (through the stat
//!   cache) and stores a new memo.
//! - **Never a wrong answer from a damaged file.** Each memo file carries a
//!   BLAKE3 of its body, the scanner's fingerprint, a format number and the
//!   digest it answers; anything else is a miss.
//! - **Never a failure.** Reading or writing a memo is best effort: an
//!   unreadable, read-only or full cache only loses the speed-up. Files are
//!   written privately (0600) and renamed into place.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use abicache_fs::Follow;
use bincode::Options;
use serde::{Deserialize, Serialize};

use crate::deps::Dependencies;
use crate::stat_cache::write_atomic;
use crate::SCANNER_FINGERPRINT;

/// Bumped whenever the memo file's layout changes.
const FORMAT: u32 = 1;

/// A memo file larger than this is not read.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The memos of one cache, one file per input digest in a directory.
#[derive(Debug, Clone)]
pub struct KeyMemo {
    dir: PathBuf,
}

/// The on-disk body (after a BLAKE3 of it); `D` is [`Dependencies`] or a
/// reference to it.
#[derive(Serialize, Deserialize)]
struct Disk<'a, D> {
    format: u32,
    #[serde(borrow)]
    scanner: &'a str,
    inputs: [u8; 32],
    #[serde(borrow)]
    value: &'a str,
    deps: D,
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
}

impl KeyMemo {
    /// The memos kept in `dir` (created on the first [`KeyMemo::put`]).
    pub fn new(dir: impl Into<PathBuf>) -> KeyMemo {
        KeyMemo { dir: dir.into() }
    }

    /// Where the memo for `inputs` lives.
    fn file(&self, inputs: &[u8; 32]) -> PathBuf {
        let mut name = String::with_capacity(64);
        for b in inputs {
            name.push_str(&format!("{b:02x}"));
        }
        self.dir.join(name)
    }

    /// The value stored for `inputs`, when its memo is intact and every
    /// dependency of the scan behind it still holds; else `None`.
    pub fn get(&self, inputs: &[u8; 32]) -> Option<String> {
        self.get_with_deps(inputs).map(|(value, _)| value)
    }

    /// [`KeyMemo::get`], with the dependencies that were checked (for a
    /// caller that hands the same checks on, e.g. to a warm-load record).
    pub fn get_with_deps(&self, inputs: &[u8; 32]) -> Option<(String, Dependencies)> {
        let bytes =
            abicache_fs::read_bounded(&self.file(inputs), Follow::No, MAX_FILE_BYTES).ok()?;
        let (sum, body) = bytes.split_at_checked(32)?;
        if blake3::hash(body).as_bytes() != sum {
            return None;
        }
        let disk: Disk<'_, Dependencies> = codec()
            .with_limit(body.len() as u64 * 4 + 4096)
            .deserialize(body)
            .ok()?;
        let current =
            disk.format == FORMAT && disk.scanner == SCANNER_FINGERPRINT && disk.inputs == *inputs;
        (current && disk.deps.unchanged()).then(|| (disk.value.to_owned(), disk.deps))
    }

    /// Remembers `value` for `inputs`, valid while `deps` hold. Best effort:
    /// the error is for the caller to ignore or report.
    pub fn put(&self, inputs: &[u8; 32], value: &str, deps: &Dependencies) -> io::Result<()> {
        let disk = Disk {
            format: FORMAT,
            scanner: SCANNER_FINGERPRINT,
            inputs: *inputs,
            value,
            deps,
        };
        let body = codec().serialize(&disk).map_err(io::Error::other)?;
        let mut bytes = Vec::with_capacity(32 + body.len());
        bytes.extend_from_slice(blake3::hash(&body).as_bytes());
        bytes.extend_from_slice(&body);
        if !self.dir.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.dir)?;
        }
        write_atomic(&self.file(inputs), &bytes)
    }

    /// The directory the memos live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the memos that cannot answer now, once last written more
    /// than `grace` ago: unreadable or damaged files, memos of another
    /// scanner or format, and memos whose dependencies no longer hold (an
    /// edited, replaced or new file changed a stamp; such a memo is a miss
    /// until its inputs are keyed again, which rewrites it). A memo is
    /// renamed into place whole, so none is ever half-written; the grace
    /// spares one whose dependencies are changing right now. Removing a
    /// memo is always safe: the next key of its inputs scans. Best effort;
    /// returns how many were removed.
    pub fn remove_stale(&self, grace: std::time::Duration) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            let recent = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_none_or(|age| age < grace);
            if recent || (meta.is_file() && self.answers(&path)) {
                continue;
            }
            if fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// Whether the memo file at `path` would answer now (its name is the
    /// digest it stores).
    fn answers(&self, path: &Path) -> bool {
        let inputs = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.len() == 64)
            .and_then(|n| {
                let mut out = [0u8; 32];
                for (k, byte) in out.iter_mut().enumerate() {
                    *byte = u8::from_str_radix(n.get(2 * k..2 * k + 2)?, 16).ok()?;
                }
                Some(out)
            });
        inputs.is_some_and(|inputs| self.file(&inputs) == path && self.get(&inputs).is_some())
    }
}
