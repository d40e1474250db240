//! Include resolution (docs/key.md, step 1), with caches: big trees (CUTLASS, torch)
//! resolve the same names from the same directories thousands of times.
//!
//! Order, for `name` included from a file found in directory `dir`:
//! 1. an absolute `name` is used as is when it is a file;
//! 2. `<name>` that is a file under a system root is a system header;
//! 3. then `dir/name`, then `include_path/name` for each extra include path;
//! 4. a quoted `"name"` found nowhere above but under a system root is a
//!    system header (its path never enters a report);
//! 5. a quoted include found nowhere is missing; an angle include found
//!    nowhere is a system header.
//!
//! "Is a file" means `stat` succeeds and says regular file: a dangling
//! symlink or a symlink loop is simply not found. Each directory a name is
//! looked up in is `stat`ed once per scan, its parent first: no name exists
//! in a missing directory, so the many candidates under include paths that
//! lack a subdirectory (`cutlass/…` looked up in every CUDA include dir)
//! cost one `stat` for the whole missing subtree instead of one each.
//! A directory many names are looked up in is listed once, and the rest
//! of its lookups are answered from the listing (`listing.rs` says
//! when that answer is exactly the `lstat`'s).
//!
//! A header's own includes are resolved from the directory it was *found*
//! in (as a compiler does, which matters for symlink forests: a symlinked
//! header's includes are looked up next to the link, not next to its
//! target), held as that directory's canonical path; its identity is its
//! own canonical path.
//!
//! Because every directory is held canonically, leading `..` components of
//! an include name are applied lexically (the parent of a directory with no
//! symlink in its path is its real parent), so a tree that includes
//! `"../d06/x.h"` from `d05` does not grow paths like `d05/../d06/../d07`
//! that would defeat every cache.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abicache_fs::FileStamp;

use crate::absent::{AbsentLookups, DirSlot, Known};
use crate::deps::Recorder;
use crate::fast_hash::{FastMap, FastSet};
use crate::lexer::IncludeKind;
use crate::listing::{Listed, Listings};

/// A directory headers were found in (interned by the [`Resolver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirId(u32);

/// A file by canonical path (interned by the [`Resolver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(u32);

impl FileId {
    /// A dense index (0, 1, …) in order of interning.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where an include led.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// A local file to hash and follow.
    Local {
        /// The directory the file was found in: its own includes are
        /// resolved from there.
        dir: DirId,
        /// The file's identity (its canonical path).
        file: FileId,
    },
    /// A system header: neither hashed nor followed, never named.
    System,
    /// A quoted include found nowhere (recorded as `FILE:name`).
    Missing,
}

/// Resolves include names against fixed include paths and system roots,
/// remembering every answer (and every `realpath`).
#[derive(Debug, Default)]
pub struct Resolver {
    include_paths: Vec<PathBuf>,
    system_roots: Vec<PathBuf>,
    dirs: Interner,
    /// Per directory id: whether its path is plain ([`is_plain_base`]),
    /// worked out once rather than on every join from it.
    plain_dirs: Vec<bool>,
    files: Interner,
    /// Where [`Resolver::file_in`] builds a path before interning it (a
    /// file reached again costs no allocation).
    join_scratch: PathBuf,
    /// Include names, interned: the caches below are keyed by their ids,
    /// so a name's text is hashed once per resolution, not once per cache.
    names: FastMap<Box<str>, u32>,
    /// Per name id: what is known of it whatever the directory.
    name_facts: Vec<NameFacts>,
    /// Answers by (directory, name id, angle).
    answers: FastMap<(u32, u32, bool), Resolution>,
    /// Names [`Resolver::under_system_root`] looked up with a `stat` per
    /// root (not answered by the roots' listings).
    under_system_looked: usize,
    /// [`Resolver::local`]'s answer per candidate path: different names
    /// from different directories (`x.h` from `d`, `d/x.h` via an include
    /// path, `../d/x.h` from a sibling) often lead to the same candidate.
    candidates: FastMap<OsString, Option<Resolution>>,
    /// Per directory as written, the id of its `realpath`.
    canonical_dirs: FastMap<OsString, Option<DirId>>,
    /// Directories names were looked up in, and their ancestors, by path
    /// as written: each `stat`ed once, before any lookup in it.
    lookup_dirs: FastMap<OsString, LookupDir>,
    /// Per system root, the names of its top-level entries, read once the
    /// tree has many system-looking names: most angle includes (`<vector>`)
    /// start with a name no root has and are then answered without a
    /// `stat` per root.
    system_tops: Option<Vec<FastSet<OsString>>>,
    /// The listings of directories many names were looked up in.
    listings: Listings,
    /// Failed lookups remembered by directory stamp (scans through a stat
    /// cache only): a candidate known absent costs no `stat`.
    absent: Option<AbsentLookups>,
    /// What the answers depended on ([`crate::scan_recorded`] only).
    recorder: Option<Recorder>,
}

impl Resolver {
    /// A resolver for the given extra include paths (in order) and system roots.
    pub fn new(include_paths: Vec<PathBuf>, system_roots: Vec<PathBuf>) -> Self {
        Resolver {
            include_paths,
            system_roots,
            ..Resolver::default()
        }
    }

    /// Answers failed lookups from (and records them into) `absent`.
    pub(crate) fn with_absent(mut self, absent: AbsentLookups) -> Self {
        self.absent = Some(absent);
        self
    }

    /// Records every path an answer depends on into `recorder`.
    pub(crate) fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// The recorder, after the scan.
    pub(crate) fn take_recorder(&mut self) -> Option<Recorder> {
        self.recorder.take()
    }

    /// The recorder, when this scan records.
    pub(crate) fn recorder(&mut self) -> Option<&mut Recorder> {
        self.recorder.as_mut()
    }

    /// The failed lookups after the scan, for the stat cache.
    pub(crate) fn take_absent(&mut self) -> Option<AbsentLookups> {
        self.absent.take()
    }

    /// The id of directory `path`, canonicalised (when it exists) so that
    /// every directory has one id and relative includes stay short.
    pub fn dir(&mut self, path: &Path) -> DirId {
        match self.canonical_dir(path) {
            Some(id) => id,
            None => self.dir_id(path),
        }
    }

    fn dir_id(&mut self, path: &Path) -> DirId {
        let id = self.dirs.intern(path);
        if id as usize == self.plain_dirs.len() {
            self.plain_dirs.push(is_plain_base(path));
        }
        DirId(id)
    }

    /// The id of the file whose canonical path is `canonical`.
    pub fn file(&mut self, canonical: &Path) -> FileId {
        FileId(self.files.intern(canonical))
    }

    /// The id of the file `name` (one plain component) in the canonical
    /// directory `dir`: [`Resolver::file`] of `dir`'s path joined with it.
    fn file_in(&mut self, dir: DirId, name: &OsStr) -> FileId {
        let mut path = std::mem::take(&mut self.join_scratch);
        path.as_mut_os_string().clear();
        path.push(self.dirs.path(dir.0));
        path.push(name);
        let file = self.file(&path);
        self.join_scratch = path;
        file
    }

    /// The path of a directory id.
    pub fn dir_path(&self, id: DirId) -> &Path {
        self.dirs.path(id.0)
    }

    /// The canonical path of a file id.
    pub fn file_path(&self, id: FileId) -> &Path {
        self.files.path(id.0)
    }

    /// The canonical path of a file id, shared (no copy).
    pub(crate) fn file_path_shared(&self, id: FileId) -> Arc<OsStr> {
        self.files.shared(id.0)
    }

    /// Resolves `name` of `kind` included from a file found in `dir`.
    /// Computed includes cannot be resolved and are reported as
    /// [`Resolution::System`] (the scan records them separately).
    pub fn resolve(&mut self, dir: DirId, name: &str, kind: IncludeKind) -> Resolution {
        let angle = match kind {
            IncludeKind::Angle => true,
            IncludeKind::Quoted => false,
            IncludeKind::Computed => return Resolution::System,
        };
        let id = self.name_id(name);
        if let Some(&hit) = self.answers.get(&(dir.0, id, angle)) {
            return hit;
        }
        let answer = self.resolve_uncached(dir, name, id, angle);
        self.answers.insert((dir.0, id, angle), answer);
        answer
    }

    /// The id of include name `name`, interned on first use.
    fn name_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = u32::try_from(self.name_facts.len()).expect("fewer than 2^32 names");
        self.names.insert(name.into(), id);
        self.name_facts.push(NameFacts::default());
        id
    }

    fn resolve_uncached(&mut self, dir: DirId, name: &str, id: u32, angle: bool) -> Resolution {
        let path = Path::new(name);
        if path.is_absolute() {
            return match self.local(path.to_path_buf()) {
                Some(found) => found,
                None if angle => Resolution::System,
                None => Resolution::Missing,
            };
        }
        if angle && self.under_system_root(name, id) {
            return Resolution::System;
        }
        let base_plain = self.plain_dirs[dir.0 as usize];
        let (found, split) = join_normalized(self.dir_path(dir), base_plain, path);
        if let Some(found) = self.local_split(found, split) {
            return found;
        }
        if let Some(found) = self.in_include_paths(name, id) {
            return found;
        }
        if angle || self.under_system_root(name, id) {
            Resolution::System
        } else {
            Resolution::Missing
        }
    }

    /// `name` (interned as `id`) found under an extra include path.
    fn in_include_paths(&mut self, name: &str, id: u32) -> Option<Resolution> {
        if let Some(hit) = self.name_facts[id as usize].via_include_paths {
            return hit;
        }
        let hit = (0..self.include_paths.len())
            .find_map(|k| self.local(self.include_paths[k].join(name)));
        self.name_facts[id as usize].via_include_paths = Some(hit);
        hit
    }

    /// Whether `name` (interned as `id`) is a file under a system root.
    fn under_system_root(&mut self, name: &str, id: u32) -> bool {
        if let Some(hit) = self.name_facts[id as usize].under_system {
            return hit;
        }
        let roots = &self.system_roots;
        // Listing the roots costs about as much as a few dozen `stat`s, so
        // it pays only for trees with many distinct system-looking names.
        if self.system_tops.is_none() && self.under_system_looked >= LIST_SYSTEM_ROOTS_AFTER {
            self.system_tops = Some(roots.iter().map(|r| top_level_names(r)).collect());
            if let Some(recorder) = self.recorder.as_mut() {
                roots.iter().for_each(|r| recorder.followed(r));
            }
        }
        // Only a plain first component can be answered from the listing
        // (what `Path::components` yields first, as `Normal`).
        let first = name
            .split('/')
            .next()
            .filter(|f| !f.is_empty() && *f != "." && *f != "..")
            .map(OsStr::new);
        let listed = |k: usize| match (&self.system_tops, first) {
            (Some(tops), Some(f)) => tops[k].contains(f),
            _ => true,
        };
        if self.system_tops.is_some() && first.is_some() && !(0..roots.len()).any(listed) {
            // No root has its first component: answered by the listing
            // alone (the listing stays, so the answer does too).
            self.name_facts[id as usize].under_system = Some(false);
            return false;
        }
        let candidates: Vec<PathBuf> = (0..roots.len())
            .filter(|&k| listed(k))
            .map(|k| roots[k].join(name))
            .collect();
        let hit = candidates.iter().any(|c| self.is_file_looked_up(c));
        self.under_system_looked += 1;
        self.name_facts[id as usize].under_system = Some(hit);
        hit
    }

    /// `found` as a local header when it is a file (following symlinks).
    /// Canonicalising is the expensive part of resolution (`realpath`
    /// reads every component), so a file that is not itself a symlink is
    /// named by its directory's cached canonical form plus its file name.
    fn local(&mut self, found: PathBuf) -> Option<Resolution> {
        self.local_split(found, None)
    }

    /// [`Resolver::local`] of a `found` whose parent ends at its byte
    /// `split` (a `/`) when that is known ([`join_normalized`] gives it), so
    /// the path is not parsed again.
    fn local_split(&mut self, found: PathBuf, split: Option<usize>) -> Option<Resolution> {
        if let Some(&known) = self.candidates.get(found.as_os_str()) {
            return known;
        }
        // Split once: each use below would otherwise parse the path again.
        let (dir, name) = match split {
            Some(k) => split_at_slash(found.as_os_str().as_bytes(), k),
            None => parent_and_name(&found)?,
        };
        let (slot, at) = match self.enter_dir(dir) {
            // Answered by the directory alone: not worth remembering.
            Entered::Missing => return None,
            Entered::Present(slot, at) => (slot, at),
        };
        let answer = self.look_up(&found, dir, name, slot, at);
        self.candidates.insert(found.into_os_string(), answer);
        answer
    }

    /// [`Resolver::local`] the first time `found` (`name` in the existing
    /// directory `dir`, entered as `slot` and `at`) is asked about.
    fn look_up(
        &mut self,
        found: &Path,
        dir: &Path,
        name: &std::ffi::OsStr,
        slot: Option<DirSlot>,
        at: u32,
    ) -> Option<Resolution> {
        let plain_file = |this: &mut Self| {
            let dir = this.canonical_dir(dir)?;
            let file = this.file_in(dir, name);
            Some(Resolution::Local { dir, file })
        };
        match self.known(slot, name) {
            Known::Absent => return None,
            Known::File => return plain_file(self),
            Known::Unknown => {}
        }
        match self.listings.lookup(at, dir, found, name) {
            Listed::Absent => {
                self.note(slot, name, false);
                return None;
            }
            Listed::File => {
                self.note(slot, name, true);
                return plain_file(self);
            }
            Listed::Other => return None,
            Listed::Look => {}
        }
        let meta = match std::fs::symlink_metadata(found) {
            Ok(meta) => meta,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::NotFound {
                    self.note(slot, name, false);
                }
                return None;
            }
        };
        let parent = self.canonical_dir(dir)?;
        if meta.is_file() {
            self.note(slot, name, true);
            let file = self.file_in(parent, name);
            return Some(Resolution::Local { dir: parent, file });
        }
        if !meta.file_type().is_symlink() {
            return None;
        }
        if let Some(recorder) = self.recorder.as_mut() {
            recorder.followed(found);
        }
        if !is_file(found) {
            return None;
        }
        let file = self.file(&std::fs::canonicalize(found).ok()?);
        Some(Resolution::Local { dir: parent, file })
    }

    /// Whether `path` is a file ([`is_file`]), answered without a lookup
    /// when its directory is missing or the absent lookups know it, and
    /// telling them about a new answer.
    fn is_file_looked_up(&mut self, path: &Path) -> bool {
        let Some((dir, name)) = parent_and_name(path) else {
            return is_file(path);
        };
        let (slot, at) = match self.enter_dir(dir) {
            Entered::Missing => return false,
            Entered::Present(slot, at) => (slot, at),
        };
        match self.known(slot, name) {
            Known::Absent => return false,
            Known::File => return true,
            Known::Unknown => {}
        }
        match self.listings.lookup(at, dir, path, name) {
            Listed::Absent => {
                self.note(slot, name, false);
                return false;
            }
            Listed::File => {
                self.note(slot, name, true);
                return true;
            }
            Listed::Other => return false,
            Listed::Look => {}
        }
        // `lstat` first: one call answers the common cases (no entry, a
        // plain file), as the `stat` of `is_file` does. Only a symlink is
        // followed, and only a true absence is noted: a dangling symlink is
        // an entry, and its target may appear without the directory
        // changing.
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => is_file(path),
            Ok(meta) => {
                if meta.is_file() {
                    self.note(slot, name, true);
                }
                meta.is_file()
            }
            Err(e) => {
                if e.kind() == std::io::ErrorKind::NotFound {
                    self.note(slot, name, false);
                }
                false
            }
        }
    }

    /// What the absent lookups remember about `name` in the directory of
    /// `slot` (nothing without them).
    fn known(&self, slot: Option<DirSlot>, name: &std::ffi::OsStr) -> Known {
        match (self.absent.as_ref(), slot) {
            (Some(absent), Some(slot)) => absent.known(slot, name),
            _ => Known::Unknown,
        }
    }

    /// Tells the absent lookups what a lookup of `name` in the directory
    /// of `slot` found ([`AbsentLookups::note`]).
    fn note(&mut self, slot: Option<DirSlot>, name: &std::ffi::OsStr, file: bool) {
        if let (Some(absent), Some(slot)) = (self.absent.as_mut(), slot) {
            absent.note(slot, name, file);
        }
    }

    /// `dir` as a directory a name is about to be looked up in: on the
    /// first lookup in it, its answer is recorded and it is entered into
    /// the absent lookups. One map lookup after that.
    fn enter_dir(&mut self, dir: &Path) -> Entered {
        if let Some(LookupDir {
            entered: Some(entered),
            ..
        }) = self.lookup_dirs.get(dir.as_os_str())
        {
            return *entered;
        }
        let stamp = self.dir_stamp(dir);
        if let Some(recorder) = self.recorder.as_mut() {
            recorder.followed(dir);
        }
        let entered = match stamp {
            None => Entered::Missing,
            Some(stamp) => Entered::Present(
                self.absent.as_mut().map(|a| a.enter(dir, stamp)),
                self.listings.add(stamp.size),
            ),
        };
        if let Some(looked) = self.lookup_dirs.get_mut(dir.as_os_str()) {
            looked.entered = Some(entered);
        }
        entered
    }

    /// The stamp of directory `dir` (following symlinks) when this scan
    /// first looked at it; `None` when it is missing or not a directory, so
    /// that no name exists in it. Its parent is looked at first (once): a
    /// directory under a missing one is missing without a `stat`.
    fn dir_stamp(&mut self, dir: &Path) -> Option<FileStamp> {
        if let Some(looked) = self.lookup_dirs.get(dir.as_os_str()) {
            return looked.stamp;
        }
        // Lexical parents are sound here: the kernel resolves a path's
        // components in order, so where `a/b` cannot be resolved as a
        // directory, neither can `a/b/c` (nor `a/b/../c`).
        let parent_missing = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .is_some_and(|p| self.dir_stamp(p).is_none());
        let stamp = if parent_missing {
            None
        } else {
            std::fs::metadata(dir)
                .ok()
                .filter(|m| m.is_dir())
                .map(|m| FileStamp::of(&m))
        };
        let looked = LookupDir {
            stamp,
            entered: None,
        };
        self.lookup_dirs.insert(dir.as_os_str().to_owned(), looked);
        stamp
    }

    /// The id of the `realpath` of a directory, cached by the path as written.
    fn canonical_dir(&mut self, dir: &Path) -> Option<DirId> {
        if let Some(&known) = self.canonical_dirs.get(dir.as_os_str()) {
            return known;
        }
        let canonical = std::fs::canonicalize(dir).ok();
        if let Some(recorder) = self.recorder.as_mut() {
            recorder.followed(dir);
            if let Some(canonical) = &canonical {
                recorder.canonical(canonical);
            }
        }
        let id = canonical.map(|c| self.dir_id(&c));
        self.canonical_dirs.insert(dir.as_os_str().to_owned(), id);
        id
    }
}

/// What a [`Resolver`] knows of one include name whatever the directory
/// it is included from (`None`: not asked yet).
#[derive(Debug, Clone, Copy, Default)]
struct NameFacts {
    /// Whether it is a file under a system root.
    under_system: Option<bool>,
    /// What it resolves to under the extra include paths.
    via_include_paths: Option<Option<Resolution>>,
}

/// A directory looked at by [`Resolver::dir_stamp`].
#[derive(Debug, Clone, Copy)]
struct LookupDir {
    /// Its stamp; `None` when missing or not a directory.
    stamp: Option<FileStamp>,
    /// Set once a name was looked up in it ([`Resolver::enter_dir`]).
    entered: Option<Entered>,
}

/// A directory names are looked up in, once entered.
#[derive(Debug, Clone, Copy)]
enum Entered {
    /// Missing or not a directory: no name exists in it.
    Missing,
    /// A directory, with its slot in the absent lookups when the scan has
    /// them, and its index in the listings.
    Present(Option<DirSlot>, u32),
}

/// Distinct names looked up under the system roots one `stat` per root
/// before the roots' top-level entries are listed once instead.
const LIST_SYSTEM_ROOTS_AFTER: usize = 32;

/// `base/name` with the leading `.` and `..` components of `name` applied
/// lexically; exact when `base` is canonical (no symlink in it). With it,
/// where its parent ends (the byte of its last `/`) when the fast form
/// ([`join_plain`]) made it; `base_plain` says whether `base` is plain
/// ([`is_plain_base`]).
fn join_normalized(base: &Path, base_plain: bool, name: &Path) -> (PathBuf, Option<usize>) {
    match join_plain(base, base_plain, name) {
        Some((joined, split)) => (joined, Some(split)),
        None => (join_components(base, name), None),
    }
}

/// Whether `base` is `/` or a plain absolute path ([`split_plain`]): what
/// [`join_plain`] needs of it.
fn is_plain_base(base: &Path) -> bool {
    let bytes = base.as_os_str().as_bytes();
    bytes == b"/" || split_plain(bytes).is_some()
}

/// [`join_normalized`] component by component, for any `base` and `name`.
fn join_components(base: &Path, name: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = base.to_path_buf();
    let mut rest = name.components().peekable();
    while let Some(c) = rest.peek() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if out.parent().is_some() => {
                out.pop();
            }
            _ => break,
        }
        rest.next();
    }
    out.extend(rest);
    out
}

/// [`join_normalized`] by byte operations, for the common case: `base` a
/// plain absolute path (see [`split_plain`]) or `/` (`base_plain`, known
/// to the caller), and `name` some `../` followed by plain components.
/// `None` for anything else (the general form then gives the answer).
/// Gives exactly the path the general form does (a plain path's text is
/// its components joined by `/`), and where its parent ends: the byte of
/// its last `/`, where [`split_plain`] of it would split it.
fn join_plain(base: &Path, base_plain: bool, name: &Path) -> Option<(PathBuf, usize)> {
    let base = base.as_os_str().as_bytes();
    let mut rest = name.as_os_str().as_bytes();
    if !base_plain {
        return None;
    }
    let mut end = base.len();
    // `..` of `/a/b` is `/a`, of `/a` it is `/`; at `/` the general form
    // keeps the `..` (answered there).
    while let Some(after) = rest.strip_prefix(b"../").filter(|_| end > 1) {
        let slash = memchr::memrchr(b'/', &base[..end]).unwrap_or(0);
        end = slash.max(1);
        rest = after;
    }
    if !is_plain_bytes(rest) {
        return None;
    }
    let kept = &base[..end];
    let mut out = Vec::with_capacity(kept.len() + 1 + rest.len());
    out.extend_from_slice(kept);
    if kept != b"/" {
        out.push(b'/');
    }
    let rest_at = out.len();
    out.extend_from_slice(rest);
    let split = match memchr::memrchr(b'/', rest) {
        Some(k) => rest_at + k,
        None => rest_at - 1,
    };
    Some((PathBuf::from(OsString::from_vec(out)), split))
}

/// Whether `bytes` is a relative path of plain components only (no empty
/// one, no `.` nor `..`).
fn is_plain_bytes(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// `path` split into its parent and file name, when `path` is absolute and
/// every component after the root is plain (no empty one, no `.` nor
/// `..`, no trailing `/`): then its text is the parent's, a `/` and the
/// file name, which is exactly what [`Path::parent`] and
/// [`Path::file_name`] give (without parsing components). `None` for any
/// other path, `/` included.
fn split_plain(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = path.strip_prefix(b"/")?;
    if !is_plain_bytes(rest) {
        return None;
    }
    let slash = memchr::memrchr(b'/', path)?;
    let parent = if slash == 0 {
        &path[..1]
    } else {
        &path[..slash]
    };
    Some((parent, &path[slash + 1..]))
}

/// `path` split at its byte `slash` (a `/`) into parent and name, as
/// [`split_plain`] splits a plain path at its last `/`.
fn split_at_slash(path: &[u8], slash: usize) -> (&Path, &std::ffi::OsStr) {
    let parent = if slash == 0 {
        &path[..1]
    } else {
        &path[..slash]
    };
    (
        Path::new(OsStr::from_bytes(parent)),
        OsStr::from_bytes(&path[slash + 1..]),
    )
}

/// [`Path::parent`] and [`Path::file_name`] of `path`, both `Some`, or
/// `None` when either is; by [`split_plain`] when `path` is plain.
fn parent_and_name(path: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    match split_plain(path.as_os_str().as_bytes()) {
        Some((parent, name)) => Some((
            Path::new(OsStr::from_bytes(parent)),
            OsStr::from_bytes(name),
        )),
        None => path.parent().zip(path.file_name()),
    }
}

/// The names of `dir`'s entries (empty when it cannot be read).
fn top_level_names(dir: &Path) -> FastSet<OsString> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.file_name()))
                .collect()
        })
        .unwrap_or_default()
}

fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Paths interned to dense ids, hashed as raw bytes; each path is
/// allocated once, shared by the map and the list.
#[derive(Debug, Default)]
struct Interner {
    ids: FastMap<Arc<OsStr>, u32>,
    paths: Vec<Arc<OsStr>>,
}

impl Interner {
    fn intern(&mut self, path: &Path) -> u32 {
        if let Some(&id) = self.ids.get(path.as_os_str()) {
            return id;
        }
        let id = u32::try_from(self.paths.len()).expect("fewer than 2^32 paths");
        let shared: Arc<OsStr> = Arc::from(path.as_os_str());
        self.ids.insert(Arc::clone(&shared), id);
        self.paths.push(shared);
        id
    }

    fn path(&self, id: u32) -> &Path {
        Path::new(&*self.paths[id as usize])
    }

    fn shared(&self, id: u32) -> Arc<OsStr> {
        Arc::clone(&self.paths[id as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_forms_agree_with_the_component_forms() {
        let bases = [
            "/", "/a", "/a/b", "/a/b/c", "/a//b", "/a/./b", "/a/b/", "/a/../b", "a/b", "",
        ];
        let names = [
            "x.h",
            "d/x.h",
            "../x.h",
            "../../x.h",
            "../../../../x.h",
            "./x.h",
            "d//x.h",
            "d/./x.h",
            "d/../x.h",
            "x.h/",
            "..",
            "../",
            "../..",
            ".",
            "",
            "..//x.h",
            "../d/x.h",
            "./../x.h",
            "/abs/x.h",
        ];
        for base in bases {
            for name in names {
                let (base, name) = (Path::new(base), Path::new(name));
                let plain = is_plain_base(base);
                let general = join_components(base, name);
                let (joined, split) = join_normalized(base, plain, name);
                assert_eq!(joined, general, "{base:?} + {name:?}");
                if let Some((fast, split_fast)) = join_plain(base, plain, name) {
                    assert_eq!((fast, Some(split_fast)), (general.clone(), split));
                    let parts = split_at_slash(general.as_os_str().as_bytes(), split_fast);
                    assert_eq!(
                        Some(parts),
                        parent_and_name(&general),
                        "{base:?} + {name:?}"
                    );
                }
            }
        }
        for path in [
            "/", "/a", "/a/b.h", "/a//b.h", "/a/./b.h", "/a/b/", "/a/..", "a/b", "", "/a/b/.",
        ] {
            let p = Path::new(path);
            let general = p.parent().zip(p.file_name());
            assert_eq!(parent_and_name(p), general, "{path:?}");
            if let Some((parent, name)) = split_plain(path.as_bytes()) {
                let fast = (
                    Path::new(OsStr::from_bytes(parent)),
                    OsStr::from_bytes(name),
                );
                assert_eq!(Some(fast), general, "{path:?}");
            }
        }
        assert!(join_plain(Path::new("/a/b"), true, Path::new("../c/x.h")).is_some());
        assert!(!is_plain_base(Path::new("/a//b")) && is_plain_base(Path::new("/")));
        assert!(split_plain(b"/a/b.h").is_some());
    }
}
