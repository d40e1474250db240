//! What a scan's answer depends on in the file system, as a list of stat
//! checks ([`Dependencies`]): while every check still holds, a new scan of
//! the same sources with the same configuration gives exactly the same
//! report, so a caller may remember what it derived from the report (a key:
//! [`crate::KeyMemo`]) and answer again with one `stat` per check.
//!
//! A scan records, while it walks (`Recorder`):
//! - every file it read or took from the stat cache, by canonical path,
//!   with the stamp it had when read ([`Expect::Stamp`]);
//! - every directory, as written, in which it looked a name up (each
//!   candidate's parent, the include paths, the listed system roots) and
//!   every path it followed through a symlink (sources, the root, symlinked
//!   headers): their stamp, following symlinks, or their absence. A
//!   directory's stamp changes whenever an entry is created, removed or
//!   renamed in it, so a header appearing earlier in the include path, a
//!   deleted one or a symlink repointed is seen; for an absent path only
//!   its first missing component is kept ([`Expect::Missing`]);
//! - every ancestor of every canonical path it used, by identity (device
//!   and inode, without following symlinks; [`Expect::Directory`]): a
//!   directory renamed and replaced by a symlink to it would keep the
//!   stamps above but change canonical names.
//!
//! Stamps follow the racy rule against the moment the scan started: a path
//! whose mtime or ctime lies within [`abicache_fs::RACY_WINDOW`] of it is
//! not trusted and the scan records nothing at all (the caller then simply
//! scans again next time), so a change during the scan, or in the same
//! timestamp tick as a stamp, can never be hidden. ctime cannot be set back
//! from user space, so a restored mtime does not hide a write either.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use abicache_fs::FileStamp;
use serde::{Deserialize, Serialize};

use crate::fast_hash::FastSet;

/// What one path must still look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expect {
    /// `stat` (following symlinks) succeeds with this stamp.
    Stamp(FileStamp),
    /// `stat` (following symlinks) fails.
    Missing,
    /// `lstat` finds a directory (not a symlink) with this device and inode.
    Directory {
        /// `st_dev`.
        dev: u64,
        /// `st_ino`.
        ino: u64,
    },
    /// `stat` (following symlinks) finds this device and inode, whatever
    /// its times (the fingerprint root: only its identity names files).
    Same {
        /// `st_dev`.
        dev: u64,
        /// `st_ino`.
        ino: u64,
    },
}

/// One path and what it must look like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Check {
    /// The path's bytes (any path, UTF-8 or not).
    path: Vec<u8>,
    expect: Expect,
}

impl Check {
    fn path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.path))
    }

    fn holds(&self) -> bool {
        match self.expect {
            Expect::Stamp(stamp) => {
                std::fs::metadata(self.path()).is_ok_and(|m| FileStamp::of(&m) == stamp)
            }
            Expect::Missing => std::fs::metadata(self.path()).is_err(),
            Expect::Directory { dev, ino } => std::fs::symlink_metadata(self.path())
                .is_ok_and(|m| m.is_dir() && m.dev() == dev && m.ino() == ino),
            Expect::Same { dev, ino } => {
                std::fs::metadata(self.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino)
            }
        }
    }
}

/// The file-system state one scan's report depends on: see the module
/// documentation. Equal to the state now when [`Dependencies::unchanged`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependencies {
    checks: Vec<Check>,
}

impl Dependencies {
    /// True when every recorded path still looks as it did: then a scan now
    /// would give the recorded scan's report. Costs one `stat` per check;
    /// from 256 checks on, half of them are made on a second thread (a warm
    /// key of a big tree makes thousands, each a kernel path walk), and
    /// either half stops at the other's first change.
    ///
    /// Restated in Python at `python/abicache/_warm_record.py:key_inputs_hold`
    /// (over the rows of a warm-load record: stamps by `stat`, absences,
    /// directory identities by `lstat`, identities by `stat`), tied by
    /// `tests/python/test_warm_reader.py::test_an_edited_source_fails_its_stamp`,
    /// `tests/python/test_warm_reader.py::test_a_header_appearing_earlier_in_the_include_path_fails_missing`,
    /// `tests/python/test_warm_reader.py::test_a_replaced_include_directory_fails_its_identity`
    /// and `tests/python/test_warm_record.py::test_an_edited_source_is_a_new_key_not_the_record`.
    pub fn unchanged(&self) -> bool {
        let checks = &self.checks;
        if checks.len() < CHECK_BESIDE_FROM {
            return checks.iter().all(Check::holds);
        }
        let (first, second) = checks.split_at(checks.len() / 2);
        let changed = AtomicBool::new(false);
        let run = |part: &[Check]| {
            for check in part {
                if changed.load(Ordering::Relaxed) {
                    return;
                }
                if !check.holds() {
                    changed.store(true, Ordering::Relaxed);
                    return;
                }
            }
        };
        crate::join::join(|| run(second), || run(first));
        !changed.load(Ordering::Relaxed)
    }

    /// Number of checks (one `stat` each).
    pub fn len(&self) -> usize {
        self.checks.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// The recorded paths and expectations, in path order (for tests and
    /// diagnostics).
    pub fn iter(&self) -> impl Iterator<Item = (&Path, Expect)> {
        self.checks.iter().map(|c| (c.path(), c.expect))
    }
}

/// Checks from which [`Dependencies::unchanged`] makes half of them on a
/// second thread (starting one costs about as much as a few dozen `stat`s).
const CHECK_BESIDE_FROM: usize = 256;

/// Collects what a scan looks at; [`Recorder::finish`] turns it into
/// [`Dependencies`].
#[derive(Debug)]
pub(crate) struct Recorder {
    /// When the scan started: the racy rule's reference.
    started: SystemTime,
    /// Paths whose stamp or absence (following symlinks) decided an answer.
    /// Keyed by bytes: `Path`'s own hash walks components, which made
    /// recording a tenth of a first scan.
    followed: FastSet<OsString>,
    /// Canonical paths whose ancestors must stay the same directories.
    canonical: FastSet<OsString>,
    /// Paths whose identity only (following symlinks) matters.
    same: Vec<PathBuf>,
}

impl Recorder {
    /// A recorder for a scan that started at `started`, before it looked
    /// at anything.
    pub(crate) fn new(started: SystemTime) -> Recorder {
        Recorder {
            started,
            followed: FastSet::default(),
            canonical: FastSet::default(),
            same: Vec::new(),
        }
    }

    /// Only the identity of what `path` leads to matters (the fingerprint
    /// root: its canonical name decides how files are named).
    pub(crate) fn same(&mut self, path: &Path) {
        self.same.push(path.to_path_buf());
    }

    /// `path` was resolved following symlinks: what it leads to matters.
    pub(crate) fn followed(&mut self, path: &Path) {
        if !self.followed.contains(path.as_os_str()) {
            self.followed.insert(path.as_os_str().to_owned());
        }
    }

    /// `path` is a canonical name the report may use.
    pub(crate) fn canonical(&mut self, path: &Path) {
        if !self.canonical.contains(path.as_os_str()) {
            self.canonical.insert(path.as_os_str().to_owned());
        }
    }

    /// The dependencies, given every file the scan loaded with the stamp it
    /// had when read (`None`: not trusted). `None` when anything cannot be
    /// trusted. A file is not stat'ed again: the stamp it had when read is
    /// what is checked later, so a change after the read is a miss then.
    pub(crate) fn finish(
        mut self,
        files: Vec<(PathBuf, Option<FileStamp>)>,
    ) -> Option<Dependencies> {
        let mut checks = Vec::with_capacity(files.len() + self.followed.len());
        for (path, stamp) in files {
            let stamp = stamp?;
            self.followed.remove(path.as_os_str());
            self.canonical(&path);
            checks.push(check(&path, Expect::Stamp(stamp)));
        }
        for path in &self.same {
            let meta = std::fs::metadata(path).ok()?;
            let expect = Expect::Same {
                dev: meta.dev(),
                ino: meta.ino(),
            };
            checks.push(check(path, expect));
        }
        let mut missing: FastSet<PathBuf> = FastSet::default();
        for path in self.followed.iter().map(Path::new) {
            match std::fs::metadata(path) {
                Ok(meta) => {
                    let stamp = FileStamp::trusted(&meta, self.started)?;
                    checks.push(check(path, Expect::Stamp(stamp)));
                }
                Err(_) => {
                    missing.insert(first_missing(path).to_path_buf());
                }
            }
        }
        for path in &missing {
            let covered = path.ancestors().skip(1).any(|a| missing.contains(a));
            if !covered {
                checks.push(check(path, Expect::Missing));
            }
        }
        let mut ancestors: FastSet<&Path> = FastSet::default();
        for path in self.canonical.iter().map(Path::new) {
            for a in path.ancestors().skip(1) {
                if !ancestors.insert(a) {
                    break; // its own ancestors are in already
                }
            }
        }
        for dir in ancestors {
            let meta = std::fs::symlink_metadata(dir).ok().filter(|m| m.is_dir())?;
            let expect = Expect::Directory {
                dev: meta.dev(),
                ino: meta.ino(),
            };
            checks.push(check(dir, expect));
        }
        checks.sort_by(|a, b| a.path.cmp(&b.path));
        Some(Dependencies { checks })
    }
}

fn check(path: &Path, expect: Expect) -> Check {
    Check {
        path: path.as_os_str().as_bytes().to_vec(),
        expect,
    }
}

/// The shortest ancestor of the missing `path` that is missing too: while
/// it stays missing, so does `path`.
fn first_missing(path: &Path) -> &Path {
    let mut first = path;
    while let Some(parent) = first.parent() {
        if parent.as_os_str().is_empty() || std::fs::metadata(parent).is_ok() {
            break;
        }
        first = parent;
    }
    first
}
