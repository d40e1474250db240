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
use std::ffi::OsString;
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
    seen: FastMap<PathBuf, SeenDir>,
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
        if !self.seen.contains_key(dir) {
            let now = SystemTime::now();
            let meta = std::fs::metadata(dir).ok().filter(|m| m.is_dir());
            let stamp = meta.as_ref().map(FileStamp::of);
            let trusted = meta
                .as_ref()
                .and_then(|m| FileStamp::trusted(m, now))
                .is_some();
            let valid = stamp.is_some()
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
            self.seen.insert(dir.to_owned(), entry);
        }
        self.seen.get_mut(dir).expect("inserted above")
    }

    /// True when `path` is known not to exist: its directory's stamp is the
    /// one under which its name was found absent.
    pub(crate) fn known_absent(&mut self, path: &Path) -> bool {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        if !self.seen(dir).valid {
            return false;
        }
        self.known.get(dir).is_some_and(|k| k.names.contains(name))
    }

    /// True when `path` is known to be a regular file (not a symlink): its
    /// directory's stamp is the one under which it was found.
    pub(crate) fn known_file(&mut self, path: &Path) -> bool {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        if !self.seen(dir).valid {
            return false;
        }
        self.known.get(dir).is_some_and(|k| k.files.contains(name))
    }

    /// Records that a lookup of `path` found a regular file (not a symlink).
    pub(crate) fn note_file(&mut self, path: &Path) {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let seen = self.seen(dir);
        if seen.now.is_some() && seen.trusted {
            seen.found_files.push(name.to_owned());
        }
    }

    /// Records that a lookup of `path` found nothing.
    pub(crate) fn note_absent(&mut self, path: &Path) {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let seen = self.seen(dir);
        if seen.now.is_some() && seen.trusted {
            seen.found_absent.push(name.to_owned());
        }
    }

    /// The remembered lookups after this scan: each directory seen gets its
    /// current stamp and the names found absent or found as files under it
    /// (added to the old ones when the stamp did not change), or is
    /// forgotten when its stamp cannot be trusted. `None` when nothing changed.
    pub(crate) fn merged(self) -> Option<AbsentMap> {
        let changed = self.seen.iter().any(|(dir, s)| {
            !s.found_absent.is_empty()
                || !s.found_files.is_empty()
                || (!s.valid && self.known.contains_key(dir))
        });
        if !changed {
            return None;
        }
        let mut map = Arc::unwrap_or_clone(self.known);
        for (dir, seen) in self.seen {
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
