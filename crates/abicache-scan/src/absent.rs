//! Lookups remembered by directory stamp: "`dir/name` does not exist" and
//! "`dir/name` is a regular file" are answered without a `stat` while
//! `dir`'s own stamp is unchanged (the file's contents are still checked by
//! its own stamp when it is read).
//!
//! Resolution tries candidates in order (`dir/name`, then each include path),
//! so a warm key would otherwise pay one failed `stat` per include per
//! candidate. Creating, removing or renaming an entry in a directory changes
//! the directory's mtime and ctime, hence its [`FileStamp`] (an entry cannot
//! change from file to directory or symlink without being removed and
//! created again); the directory is
//! `stat`ed once per scan (before any lookup in it) and its remembered
//! absent names are used only when that stamp equals the stored one. As with
//! files, a directory stamp is stored only when trusted (the racy rule), so
//! an entry created in the same timestamp tick cannot go unseen.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use abicache_fs::FileStamp;
use serde::{Deserialize, Serialize};

use crate::resolve::FastMap;

/// What is remembered about one directory.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct KnownAbsent {
    /// The directory's stamp when the names were found absent (trusted).
    pub(crate) stamp: Option<FileStamp>,
    /// Names looked up in it and not found.
    pub(crate) names: HashSet<OsString>,
    /// Names looked up in it and found to be regular files (not symlinks).
    #[serde(default)]
    pub(crate) files: HashSet<OsString>,
}

/// Remembered absences, by directory path as looked up.
pub(crate) type AbsentMap = HashMap<PathBuf, KnownAbsent>;

/// What [`AbsentLookups::known`] remembers about one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// It does not exist.
    Absent,
    /// It is a regular file (not a symlink).
    File,
    /// Nothing: look.
    Unknown,
}

/// A directory as seen by this scan.
#[derive(Debug)]
struct SeenDir {
    /// Its stamp now, when it exists (taken before any lookup in it).
    now: Option<FileStamp>,
    /// Whether that stamp may be stored (outside the racy window).
    trusted: bool,
    /// Whether the remembered names are valid (stamps equal).
    valid: bool,
    /// Names found absent by this scan.
    found_absent: Vec<OsString>,
    /// Names found to be regular files by this scan.
    found_files: Vec<OsString>,
}

/// The per-scan view: remembered absences plus what this scan learns.
#[derive(Debug, Default)]
pub(crate) struct AbsentLookups {
    known: Arc<AbsentMap>,
    /// By the directory's bytes (`Path`'s hash walks components: too slow
    /// for a lookup per candidate).
    seen: FastMap<OsString, SeenDir>,
}

impl AbsentLookups {
    /// A view over `known` (from the stat cache).
    pub(crate) fn new(known: Arc<AbsentMap>) -> AbsentLookups {
        AbsentLookups {
            known,
            seen: FastMap::default(),
        }
    }

    fn seen(&mut self, dir: &Path) -> &mut SeenDir {
        let key: &OsStr = dir.as_os_str();
        if !self.seen.contains_key(key) {
            let now = SystemTime::now();
            let meta = std::fs::metadata(dir).ok().filter(|m| m.is_dir());
            let stamp = meta.as_ref().map(FileStamp::of);
            let trusted = meta
                .as_ref()
                .and_then(|m| FileStamp::trusted(m, now))
                .is_some();
            let valid = stamp.is_some()
                && !self.known.is_empty()
                && self
                    .known
                    .get(dir)
                    .is_some_and(|k| k.stamp.is_some() && k.stamp == stamp);
            let entry = SeenDir {
                now: stamp,
                trusted,
                valid,
                found_absent: Vec::new(),
                found_files: Vec::new(),
            };
            self.seen.insert(key.to_owned(), entry);
        }
        self.seen.get_mut(key).expect("inserted above")
    }

    /// What is remembered about `dir/name` under `dir`'s current stamp.
    pub(crate) fn known(&mut self, dir: &Path, name: &OsStr) -> Known {
        if !self.seen(dir).valid {
            return Known::Unknown;
        }
        match self.known.get(dir) {
            Some(k) if k.names.contains(name) => Known::Absent,
            Some(k) if k.files.contains(name) => Known::File,
            _ => Known::Unknown,
        }
    }

    /// Records what a lookup of `dir/name` found: a regular file (not a
    /// symlink) when `file`, else nothing at all.
    pub(crate) fn note(&mut self, dir: &Path, name: &OsStr, file: bool) {
        let seen = self.seen(dir);
        if seen.now.is_none() || !seen.trusted {
            return;
        }
        let names = if file {
            &mut seen.found_files
        } else {
            &mut seen.found_absent
        };
        names.push(name.to_owned());
    }

    /// The remembered lookups after this scan: each directory seen gets its
    /// current stamp and the names found absent or found as files under it
    /// (added to the old ones when the stamp did not change), or is
    /// forgotten when its stamp cannot be trusted. `None` when nothing changed.
    pub(crate) fn merged(self) -> Option<AbsentMap> {
        let changed = self.seen.iter().any(|(dir, s)| {
            !s.found_absent.is_empty()
                || !s.found_files.is_empty()
                || (!s.valid && self.known.contains_key(Path::new(dir)))
        });
        if !changed {
            return None;
        }
        let mut map = Arc::unwrap_or_clone(self.known);
        for (dir, seen) in self.seen {
            let dir = PathBuf::from(dir);
            if seen.valid {
                if let Some(entry) = map.get_mut(&dir) {
                    entry.names.extend(seen.found_absent);
                    entry.files.extend(seen.found_files);
                }
                continue;
            }
            let learnt = !seen.found_absent.is_empty() || !seen.found_files.is_empty();
            match seen.now.filter(|_| seen.trusted && learnt) {
                Some(stamp) => {
                    let known = KnownAbsent {
                        stamp: Some(stamp),
                        names: seen.found_absent.into_iter().collect(),
                        files: seen.found_files.into_iter().collect(),
                    };
                    map.insert(dir, known);
                }
                None => {
                    map.remove(&dir);
                }
            }
        }
        Some(map)
    }
}
