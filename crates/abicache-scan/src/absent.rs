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
//! created again); the directory is `stat`ed once per scan, before any
//! lookup in it (by the [`crate::Resolver`], which also answers every name
//! in a missing directory without a lookup), and its remembered names are
//! used only when that stamp equals the stored one. As with files, a
//! directory stamp is stored only when trusted (the racy rule, against the
//! moment the scan started), so an entry created in the same timestamp tick
//! or during the scan cannot go unseen.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use abicache_fs::FileStamp;
use serde::{Deserialize, Serialize};

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

/// A directory entered by [`AbsentLookups::enter`] (an index into this
/// scan's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirSlot(u32);

/// A directory as seen by this scan.
#[derive(Debug)]
struct SeenDir {
    /// The directory as looked up.
    path: PathBuf,
    /// Its stamp, taken before any lookup in it.
    now: FileStamp,
    /// Whether that stamp may be stored (outside the racy window of the
    /// scan's start).
    trusted: bool,
    /// Whether the remembered names are valid (stamps equal).
    valid: bool,
    /// Names found absent by this scan.
    found_absent: Vec<OsString>,
    /// Names found to be regular files by this scan.
    found_files: Vec<OsString>,
}

/// The per-scan view: remembered absences plus what this scan learns.
#[derive(Debug)]
pub(crate) struct AbsentLookups {
    known: Arc<AbsentMap>,
    /// When the scan started: the racy rule's reference for every stamp.
    started: SystemTime,
    /// Every directory entered, in order ([`DirSlot`] indexes it).
    seen: Vec<SeenDir>,
}

impl AbsentLookups {
    /// A view over `known` (from the stat cache) for a scan that started
    /// at `started` (before any directory was `stat`ed).
    pub(crate) fn new(known: Arc<AbsentMap>, started: SystemTime) -> AbsentLookups {
        AbsentLookups {
            known,
            started,
            seen: Vec::new(),
        }
    }

    /// Enters the existing directory `dir` (once per scan), whose stamp
    /// `stamp` (following symlinks) was taken before any lookup in it.
    pub(crate) fn enter(&mut self, dir: &Path, stamp: FileStamp) -> DirSlot {
        let valid =
            !self.known.is_empty() && self.known.get(dir).is_some_and(|k| k.stamp == Some(stamp));
        let slot = DirSlot(u32::try_from(self.seen.len()).expect("fewer than 2^32 directories"));
        self.seen.push(SeenDir {
            path: dir.to_path_buf(),
            now: stamp,
            trusted: stamp.trusted_at(self.started).is_some(),
            valid,
            found_absent: Vec::new(),
            found_files: Vec::new(),
        });
        slot
    }

    /// What is remembered about `name` in the directory of `slot` under
    /// its current stamp.
    pub(crate) fn known(&self, slot: DirSlot, name: &OsStr) -> Known {
        let seen = &self.seen[slot.0 as usize];
        if !seen.valid {
            return Known::Unknown;
        }
        match self.known.get(&seen.path) {
            Some(k) if k.names.contains(name) => Known::Absent,
            Some(k) if k.files.contains(name) => Known::File,
            _ => Known::Unknown,
        }
    }

    /// Records what a lookup of `name` in the directory of `slot` found: a
    /// regular file (not a symlink) when `file`, else nothing at all.
    pub(crate) fn note(&mut self, slot: DirSlot, name: &OsStr, file: bool) {
        let seen = &mut self.seen[slot.0 as usize];
        if !seen.trusted {
            return;
        }
        let names = if file {
            &mut seen.found_files
        } else {
            &mut seen.found_absent
        };
        names.push(name.to_owned());
    }

    /// The remembered lookups after this scan: each directory entered gets
    /// its current stamp and the names found absent or found as files under
    /// it (added to the old ones when the stamp did not change), or is
    /// forgotten when its stamp cannot be trusted. `None` when nothing
    /// changed.
    pub(crate) fn merged(self) -> Option<AbsentMap> {
        let changed = self.seen.iter().any(|s| {
            !s.found_absent.is_empty()
                || !s.found_files.is_empty()
                || (!s.valid && self.known.contains_key(&s.path))
        });
        if !changed {
            return None;
        }
        let mut map = Arc::unwrap_or_clone(self.known);
        for seen in self.seen {
            if seen.valid {
                if let Some(entry) = map.get_mut(&seen.path) {
                    entry.names.extend(seen.found_absent);
                    entry.files.extend(seen.found_files);
                }
                continue;
            }
            let learnt = !seen.found_absent.is_empty() || !seen.found_files.is_empty();
            if seen.trusted && learnt {
                let known = KnownAbsent {
                    stamp: Some(seen.now),
                    names: seen.found_absent.into_iter().collect(),
                    files: seen.found_files.into_iter().collect(),
                };
                map.insert(seen.path, known);
            } else {
                map.remove(&seen.path);
            }
        }
        Some(map)
    }
}
