//! The scan itself: an iterative depth-first walk over each source's
//! local includes, reading, hashing and lexing every file once.

use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::SystemTime;

use abicache_fs::FileStamp;

use crate::absent::AbsentLookups;
use crate::deps::{Dependencies, Recorder};
use crate::error::ScanError;
use crate::fast_hash::{FastMap, FastSet};
use crate::lexer::{lex_reusing, FileFacts, Include, IncludeKind, LexScratch};
use crate::macros::{Expansion, MacroDef, MacroTable};
use crate::report::{Location, PythonMarker, ScanReport, TorchInclude};
use crate::resolve::{DirId, FileId, Resolution, Resolver};
use crate::stat_cache::{FreshFile, StatCache};

mod sources;

/// Where to look for headers and how to name files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanConfig {
    /// The fingerprint root: files under it are named relative to it.
    pub root: PathBuf,
    /// Extra include paths (`-I`), tried in order after the including
    /// file's directory.
    pub include_paths: Vec<PathBuf>,
    /// System include roots (torch, Python, CUDA): headers found there are
    /// neither hashed, followed nor named.
    pub system_roots: Vec<PathBuf>,
    /// Macros defined on the command line (`-D`): with those of the visited
    /// files, what computed includes are expanded with.
    pub defines: Vec<MacroDef>,
}

impl ScanConfig {
    /// A configuration with the given root and no include paths or system roots.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ScanConfig {
            root: root.into(),
            include_paths: Vec::new(),
            system_roots: Vec::new(),
            defines: Vec::new(),
        }
    }

    /// Adds the `-D` definitions found in compiler `flags` (`-DNAME[=V]`,
    /// `-D NAME[=V]`); other flags are ignored.
    pub fn defines_from_flags(mut self, flags: &[String]) -> Self {
        self.defines.extend(crate::macros::defines_in_flags(flags));
        self
    }

    /// Appends an extra include path (tried after earlier ones).
    pub fn include_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.include_paths.push(path.into());
        self
    }

    /// Appends a system include root.
    pub fn system_root(mut self, path: impl Into<PathBuf>) -> Self {
        self.system_roots.push(path.into());
        self
    }
}

/// Scans `sources` (in order) and every local header they reach (docs/key.md, steps 1–2).
///
/// A computed include (`#include MACRO`) is expanded with every macro
/// defined in the files the extension reaches and in `config.defines` (all
/// alternatives of each name, see [`crate::macros`]); the headers it names
/// are resolved like any other include, and it is reported in
/// [`crate::report::SourceReport::computed_includes`] (and as a
/// Python-ABI marker) only when some alternative cannot be resolved.
///
/// Guarantees: each file is read, hashed and lexed once per call; each
/// source lists each file it reaches once, depth-first in include order
/// (preorder, the source first); the walk is iterative, so neither depth
/// nor cycles matter; the report is identical for the same tree under
/// another root. Relative sources are relative to the current directory.
/// Files are read, hashed and lexed on two threads; the report does not
/// depend on scheduling.
///
/// # Errors
/// [`ScanError::MissingSource`] when a source does not exist (all sources
/// are checked before any header is read),
/// [`ScanError::Unreadable`] when a source or a resolved header cannot be
/// read, [`ScanError::InvalidRoot`] when `config.root` is not a directory.
pub fn scan(sources: &[PathBuf], config: &ScanConfig) -> Result<ScanReport, ScanError> {
    walk(sources, config, None, false).map(|walked| walked.report)
}

/// [`scan`] through a [`StatCache`]: a file whose stat stamp matches its
/// cache entry is not read, hashed nor lexed; every other file is, and is
/// remembered in `cache` when its stamp can be trusted (the racy rule, see
/// [`crate::stat_cache`]).
///
/// Guarantees: the report is exactly the one [`scan`] returns for the same
/// files at the same moment, whatever the cache holds. Save the cache
/// afterwards with [`StatCache::save`].
///
/// # Errors
/// As [`scan`]; on an error nothing is remembered.
pub fn scan_cached(
    sources: &[PathBuf],
    config: &ScanConfig,
    cache: &mut StatCache,
) -> Result<ScanReport, ScanError> {
    let walked = walk(sources, config, Some(cache), false)?;
    walked.learnt.into_cache(cache);
    Ok(walked.report)
}

/// [`scan_cached`], also returning what the report depends on in the file
/// system ([`Dependencies`]): while [`Dependencies::unchanged`] holds, the
/// same call would return the same report. `None` when some dependency
/// could not be trusted (changed within the racy window before the scan,
/// or during it): the report is still exact, it just cannot be remembered.
///
/// # Errors
/// As [`scan`].
pub fn scan_recorded(
    sources: &[PathBuf],
    config: &ScanConfig,
    cache: &mut StatCache,
) -> Result<(ScanReport, Option<Dependencies>), ScanError> {
    let (report, learnt) = scan_learning(sources, config, cache)?;
    Ok((report, learnt.into_cache(cache)))
}

/// [`scan_recorded`] in two halves: the report now, and what the walk
/// learnt ([`ScanLearnt`]), to be stored into the stat cache and turned
/// into [`Dependencies`] later, on any thread. Storing is most of what a
/// first scan adds to the plain [`scan`] (stamping the directories looked
/// in, merging the lookups, building the cache's entries), so a caller
/// that needs the report first can do it after, or beside, its own work.
///
/// Guarantees: `learnt.into_cache(cache)`, called with the `cache` given
/// here, leaves `cache` and returns exactly what [`scan_recorded`] would
/// have; called later, it still records nothing that changed since the
/// scan started (the racy rule's reference is the scan's start).
///
/// # Errors
/// As [`scan`].
pub fn scan_learning(
    sources: &[PathBuf],
    config: &ScanConfig,
    cache: &StatCache,
) -> Result<(ScanReport, ScanLearnt), ScanError> {
    let walked = walk(sources, config, Some(cache), true)?;
    Ok((walked.report, walked.learnt))
}

/// What a scan through a stat cache learnt besides its report: every file
/// it loaded (read, or taken from the cache), the name lookups it made
/// and, when recording, the paths its answers depended on. Owns all of it,
/// so it can move to another thread ([`scan_learning`]).
#[derive(Debug)]
pub struct ScanLearnt {
    seen: Vec<Origin>,
    absent: Option<AbsentLookups>,
    /// `Some` when recording; `None` inside when a read failed.
    recorder: Option<Option<Recorder>>,
    /// The walk's resolver, with its caches: freed when what was learnt is
    /// stored (after the key, off the caller's thread), not before the
    /// report is returned.
    resolver: Resolver,
}

impl ScanLearnt {
    /// Stores what the walk learnt into `cache` (save it afterwards with
    /// [`StatCache::save`]) and returns, when recording and everything
    /// could be trusted, the scan's [`Dependencies`].
    pub fn into_cache(self, cache: &mut StatCache) -> Option<Dependencies> {
        self.into_cache_then(cache, |_| ()).0
    }

    /// [`ScanLearnt::into_cache`], then `then` on the filled `cache` (e.g.
    /// [`StatCache::save`]); for a scan of many files the dependencies are
    /// worked out meanwhile on a second thread (they `stat` what the scan
    /// followed and share nothing with the cache), so the two costs overlap.
    /// The result is the same either way.
    pub fn into_cache_then<T>(
        self,
        cache: &mut StatCache,
        then: impl FnOnce(&mut StatCache) -> T,
    ) -> (Option<Dependencies>, T) {
        let ScanLearnt {
            seen,
            absent,
            recorder,
            resolver,
        } = self;
        let stamped = recorder.flatten().and_then(|recorder| {
            let files = seen
                .iter()
                .map(Origin::stamped)
                .collect::<Option<Vec<_>>>()?;
            Some((recorder, files))
        });
        let beside = seen.len() >= STORE_BESIDE_FROM;
        // The resolver goes with the dependencies: freed on their thread.
        let record = move || {
            let deps = stamped.and_then(|(recorder, files)| recorder.finish(files));
            drop(resolver);
            deps
        };
        let store = move |cache: &mut StatCache| {
            if let Some(absent) = absent.and_then(AbsentLookups::merged) {
                cache.set_absent(absent);
            }
            for origin in seen {
                match origin {
                    Origin::Cached(path, _) => cache.touch(&path),
                    Origin::Read(fresh) => cache.remember(fresh),
                    Origin::Untracked => {}
                }
            }
            then(cache)
        };
        if !beside {
            return (record(), store(cache));
        }
        crate::join::join(record, || store(cache))
    }
}

/// What a walk produced: the report and what it learnt.
struct Walked {
    report: ScanReport,
    learnt: ScanLearnt,
}

/// The walk behind [`scan`], [`scan_cached`] and [`scan_recorded`].
fn walk(
    sources: &[PathBuf],
    config: &ScanConfig,
    cache: Option<&StatCache>,
    record: bool,
) -> Result<Walked, ScanError> {
    // Started before anything is looked at: the racy rule's reference.
    let started = std::time::SystemTime::now();
    let mut recorder = record.then(|| Recorder::new(started));
    if let Some(recorder) = recorder.as_mut() {
        recorder.same(&config.root);
    }
    let root = std::fs::canonicalize(&config.root)
        .map_err(|e| e.to_string())
        .and_then(|r| {
            if r.is_dir() {
                Ok(r)
            } else {
                Err("not a directory".to_owned())
            }
        })
        .map_err(|reason| ScanError::InvalidRoot {
            path: config.root.clone(),
            reason,
        })?;
    let mut resolver = Resolver::new(config.include_paths.clone(), config.system_roots.clone());
    if let Some(cache) = cache {
        resolver = resolver.with_absent(AbsentLookups::new(cache.absent(), started));
    }
    if let Some(mut recorder) = recorder {
        recorder.canonical(&root);
        resolver = resolver.with_recorder(recorder);
    }
    let mut walk = Walk {
        root,
        cache,
        resolver,
        files: Vec::new(),
        macros: Macros::new(&config.defines),
        buf: ReadScratch::default(),
        graph: sources::Graph::default(),
        report: ScanReport {
            sources: Vec::new(),
            python_markers: Vec::new(),
            torch_includes: Vec::new(),
            stable_registrations: Vec::new(),
        },
    };
    let mut starts = Vec::with_capacity(sources.len());
    for source in sources {
        let canonical = std::fs::canonicalize(source).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ScanError::MissingSource {
                path: source.clone(),
            },
            _ => ScanError::Unreadable {
                path: source.clone(),
                source: e,
            },
        })?;
        let file = walk.resolver.file(&canonical);
        // Absolute first: the parent of a bare `x.cpp` is the empty path.
        let absolute = std::path::absolute(source).unwrap_or_else(|_| source.clone());
        if let Some(recorder) = walk.resolver.recorder() {
            recorder.followed(&absolute);
        }
        let dir = walk
            .resolver
            .dir(absolute.parent().unwrap_or(Path::new("/")));
        starts.push((file, dir));
    }
    walk.prefetch(&starts);
    walk.report.sources = walk.sources(&starts).map_err(|file| {
        let source = match std::mem::replace(&mut walk.files[file.index()], Slot::Empty) {
            Slot::Failed(e) => e,
            _ => unreachable!("a walk ends only at a file that failed"),
        };
        ScanError::Unreadable {
            path: walk.resolver.file_path(file).to_path_buf(),
            source,
        }
    })?;
    let absent = walk.resolver.take_absent();
    let failed = walk.files.iter().any(|s| matches!(s, Slot::Failed(_)));
    let recorder = record.then(|| walk.resolver.take_recorder().filter(|_| !failed));
    let seen = walk
        .files
        .into_iter()
        .filter_map(|slot| match slot {
            Slot::Ready(entry) => Some(entry.origin),
            _ => None,
        })
        .collect();
    Ok(Walked {
        report: walk.report,
        learnt: ScanLearnt {
            seen,
            absent,
            recorder,
            resolver: walk.resolver,
        },
    })
}

/// A file's state in the walk.
enum Slot {
    /// Not read yet.
    Empty,
    /// Read, hashed and lexed.
    Ready(FileEntry),
    /// Reading failed; reported when the walk visits the file.
    Failed(io::Error),
}

struct FileEntry {
    display: Arc<str>,
    blake3: Arc<str>,
    facts: Arc<FileFacts>,
    origin: Origin,
}

/// Where a loaded file's facts came from.
#[derive(Debug)]
enum Origin {
    /// The stat cache: the stamp of this path matched, nothing was read.
    Cached(PathBuf, FileStamp),
    /// A full read, with what the stat cache may remember.
    Read(FreshFile),
    /// A full read by a scan without a stat cache.
    Untracked,
}

impl Origin {
    /// The file's canonical path and the stamp it had when loaded, when
    /// trusted; `None` for a scan without a stat cache.
    fn stamped(&self) -> Option<(PathBuf, Option<FileStamp>)> {
        match self {
            Origin::Cached(path, stamp) => Some((path.clone(), Some(*stamp))),
            Origin::Read(fresh) => Some((fresh.path.clone(), fresh.stamp)),
            Origin::Untracked => None,
        }
    }
}

struct Walk<'c> {
    root: PathBuf,
    cache: Option<&'c StatCache>,
    resolver: Resolver,
    /// Indexed by [`FileId::index`].
    files: Vec<Slot>,
    macros: Macros,
    report: ScanReport,
    /// The scratch space of files read on this thread.
    buf: ReadScratch,
    /// The include graph of the pairs reached, as the prefetch resolved them.
    graph: sources::Graph,
}

/// The macro table of the extension, filled from the files read so far
/// only once a computed include needs it, and the expansions made with it.
struct Macros {
    table: MacroTable,
    /// Indexed by [`FileId::index`]: whether the file's defines are in `table`.
    added: Vec<bool>,
    /// Whether a file was read since the table was last filled.
    stale: bool,
    /// Expansions by operand, valid for `generation`.
    expansions: FastMap<String, Arc<Expansion>>,
    generation: u64,
}

impl Macros {
    fn new(flag_defines: &[MacroDef]) -> Self {
        let mut table = MacroTable::default();
        for def in flag_defines {
            table.add(def);
        }
        let generation = table.generation();
        Macros {
            table,
            added: Vec::new(),
            stale: true,
            expansions: FastMap::default(),
            generation,
        }
    }

    /// What `operand` expands to with the macros of every file of `files`
    /// read so far (and the `-D` flags), cached until a new definition arrives.
    fn expansion(&mut self, files: &[Slot], operand: &str) -> Arc<Expansion> {
        let m = self;
        if m.stale {
            m.added.resize(files.len(), false);
            for (k, slot) in files.iter().enumerate() {
                if let (Slot::Ready(entry), false) = (slot, m.added[k]) {
                    for def in entry.facts.defines.iter() {
                        m.table.add_owned(def);
                    }
                    m.added[k] = true;
                }
            }
            m.stale = false;
        }
        if m.table.generation() != m.generation {
            m.expansions.clear();
            m.generation = m.table.generation();
        }
        if let Some(e) = m.expansions.get(operand) {
            return Arc::clone(e);
        }
        let e = Arc::new(m.table.expand(operand));
        m.expansions.insert(operand.to_owned(), Arc::clone(&e));
        e
    }
}

impl Walk<'_> {
    /// Reads, hashes and lexes every file reachable from `starts`. Files
    /// are read on two worker threads while this thread resolves the
    /// includes of each file as soon as it arrives, so resolution (a
    /// `stat` per candidate) overlaps the reading instead of leaving a core
    /// idle between levels; with nothing to resolve, this thread reads a
    /// few waiting files itself rather than sleep until the workers'
    /// arrive. A walk that reaches fewer than [`PARALLEL_FROM`] files at
    /// once reads them here, without threads.
    /// Only speeds up the walk: results are stored by file id, and read
    /// errors wait until the walk visits the file.
    ///
    /// It also reaches the headers of computed includes: when nothing is
    /// left to read or resolve, every computed include met so far is
    /// expanded with the macros of every file read so far, and what it
    /// names joins the walk; this repeats until nothing new is reached, so
    /// the macro table the walk then uses holds every definition of every
    /// reachable file.
    fn prefetch(&mut self, starts: &[(FileId, DirId)]) {
        let mut p = Frontier::default();
        for &pair in starts {
            self.reach(&mut p, pair);
        }
        let queue = JobQueue::default();
        let (root, cache) = (self.root.clone(), self.cache);
        std::thread::scope(|s| {
            // Closed however this thread leaves the scope, so no worker waits forever.
            let _close = CloseOnDrop(&queue);
            let (done, arrivals) = mpsc::channel::<Vec<(FileId, std::thread::Result<Slot>)>>();
            let mut done = Some(done);
            let mut outstanding = 0usize;
            loop {
                while let Some((file, dir)) = p.ready.pop() {
                    self.resolve_includes(&mut p, file, dir);
                }
                if !p.to_read.is_empty() {
                    if let Some(done) =
                        done.take_if(|_| outstanding + p.to_read.len() >= PARALLEL_FROM)
                    {
                        for _ in 0..READ_THREADS {
                            let (queue, done, root) = (&queue, done.clone(), &root);
                            s.spawn(move || {
                                let mut buf = ReadScratch::default();
                                while let Some(jobs) = queue.pop_some() {
                                    let read = jobs.into_iter().map(|(file, path)| {
                                        let entry = std::panic::AssertUnwindSafe(|| {
                                            read_entry(root, Path::new(&*path), cache, &mut buf)
                                        });
                                        (file, std::panic::catch_unwind(entry))
                                    });
                                    let _ = done.send(read.collect());
                                }
                            });
                        }
                    }
                    let to_read = std::mem::take(&mut p.to_read);
                    if done.is_some() {
                        // No workers yet: few files, read here.
                        for file in to_read {
                            let path = self.resolver.file_path(file);
                            let slot = read_entry(&root, path, cache, &mut self.buf);
                            self.arrived(&mut p, file, slot);
                        }
                    } else {
                        outstanding += to_read.len();
                        queue.push_all(
                            to_read
                                .into_iter()
                                .map(|file| (file, self.resolver.file_path_shared(file))),
                        );
                    }
                    continue;
                }
                if outstanding > 0 {
                    // Nothing to resolve: read a few waiting files here rather
                    // than sleep until a worker's arrive.
                    if let Some(jobs) = queue.try_pop(MAIN_JOBS_AT_ONCE) {
                        for (file, path) in jobs {
                            outstanding -= 1;
                            let slot = read_entry(&root, Path::new(&*path), cache, &mut self.buf);
                            self.arrived(&mut p, file, slot);
                        }
                        for (file, read) in arrivals.try_iter().flatten() {
                            outstanding -= 1;
                            match read {
                                Ok(slot) => self.arrived(&mut p, file, slot),
                                Err(panic) => std::panic::resume_unwind(panic),
                            }
                        }
                        continue;
                    }
                    // Everything that arrived meanwhile, waiting only when nothing has.
                    let first = arrivals.recv().expect("every job is answered");
                    for (file, read) in std::iter::once(first).chain(arrivals.try_iter()).flatten()
                    {
                        outstanding -= 1;
                        match read {
                            Ok(slot) => self.arrived(&mut p, file, slot),
                            Err(panic) => std::panic::resume_unwind(panic),
                        }
                    }
                    continue;
                }
                if !self.expand_computed(&mut p) {
                    return;
                }
            }
        });
    }

    /// Adds `(file, dir)` to the walk once: resolved now when `file` is
    /// loaded, else when it arrives (asked for once). Returns its pair id.
    fn reach(&mut self, p: &mut Frontier, pair: (FileId, DirId)) -> u32 {
        let (id, new) = self.graph.id(pair);
        if !new {
            return id;
        }
        let (file, dir) = pair;
        if !matches!(self.slot(file), Slot::Empty) {
            p.ready.push(pair);
            return id;
        }
        // A file not loaded yet is asked for by the first pair waiting on it.
        match p.waiting.entry(file) {
            Entry::Vacant(first) => {
                first.insert((dir, Vec::new()));
                p.to_read.push(file);
            }
            Entry::Occupied(mut more) => more.get_mut().1.push(dir),
        }
        id
    }

    /// Stores what reading `file` gave and releases the pairs waiting on it.
    fn arrived(&mut self, p: &mut Frontier, file: FileId, slot: Slot) {
        self.files[file.index()] = slot;
        self.macros.stale = true;
        if let Some((first, more)) = p.waiting.remove(&file) {
            p.ready.push((file, first));
            p.ready.extend(more.into_iter().map(|dir| (file, dir)));
        }
    }

    /// Resolves the includes of loaded `file` found in `dir`, reaching the
    /// local headers and remembering computed includes for later; records
    /// the pair's children in the graph.
    fn resolve_includes(&mut self, p: &mut Frontier, file: FileId, dir: DirId) {
        let Slot::Ready(entry) = self.slot(file) else {
            return;
        };
        let (facts, display) = (Arc::clone(&entry.facts), Arc::clone(&entry.display));
        let id = self.graph.id((file, dir)).0;
        let start = self.graph.run_start();
        let (mut extras, mut computed) = (sources::Extras::default(), false);
        for inc in &facts.includes {
            if inc.kind == IncludeKind::Computed {
                if p.computed_seen.insert((dir, inc.name.clone())) {
                    p.computed.push((dir, inc.name.clone()));
                }
                computed = true;
                continue;
            }
            match self.resolver.resolve(dir, &inc.name, inc.kind) {
                Resolution::Local { dir, file } => {
                    let child = self.reach(p, (file, dir));
                    self.graph.child(child);
                }
                Resolution::Missing => extras.missing(&display, &inc.name),
                Resolution::System => {}
            }
        }
        self.graph.resolved(id, start, extras, computed);
    }

    /// Expands every computed include met so far with the macros read so
    /// far; true when that reached anything new.
    fn expand_computed(&mut self, p: &mut Frontier) -> bool {
        let computed = std::mem::take(&mut p.computed);
        for (dir, text) in &computed {
            for (angle, name) in &self.expansion(text).headers {
                let kind = if *angle {
                    IncludeKind::Angle
                } else {
                    IncludeKind::Quoted
                };
                if let Resolution::Local { dir, file } = self.resolver.resolve(*dir, name, kind) {
                    self.reach(p, (file, dir));
                }
            }
        }
        p.computed = computed;
        !p.ready.is_empty() || !p.to_read.is_empty()
    }

    /// What `operand` expands to with the macros of every file read so far
    /// (and the `-D` flags), cached until a new definition arrives.
    fn expansion(&mut self, operand: &str) -> Arc<Expansion> {
        self.macros.expansion(&self.files, operand)
    }

    /// The slot of `id`, growing the tables as needed.
    fn slot(&mut self, id: FileId) -> &Slot {
        let k = id.index();
        if self.files.len() <= k {
            self.files.resize_with(k + 1, || Slot::Empty);
        }
        &self.files[k]
    }
}

/// Records a file's markers, torch includes and registrations (once per
/// file) into `report`. A computed include counts by the headers it resolves to (a
/// marker header as `#include <Python.h> (via #include MACRO)`, a torch
/// header by its resolved name), and is itself a marker when it cannot
/// be resolved.
fn collect_facts(
    macros: &mut Macros,
    files: &[Slot],
    report: &mut ScanReport,
    display: &str,
    facts: &FileFacts,
) {
    let mut markers: Vec<(u32, String)> = facts.python_markers.clone();
    let mut torch = Vec::new();
    for inc in &facts.includes {
        if inc.kind != IncludeKind::Computed {
            if is_torch_header(&inc.name) {
                torch.push((inc.line, inc.name.clone()));
            }
            continue;
        }
        let expansion = macros.expansion(files, &inc.name);
        if expansion.unresolved.is_some() {
            markers.push((inc.line, inc.directive()));
        }
        for target in resolved_includes(inc, &expansion) {
            if target.is_python_marker() {
                let via = format!("{} (via {})", target.directive(), inc.directive());
                markers.push((inc.line, via));
            }
            if is_torch_header(&target.name) {
                torch.push((inc.line, target.name));
            }
        }
    }
    // Lexer markers are in line order; computed ones join them there.
    markers.sort_by_key(|(line, _)| *line);
    let r = report;
    r.python_markers
        .extend(markers.into_iter().map(|(line, marker)| PythonMarker {
            file: display.to_owned(),
            line,
            marker,
        }));
    r.stable_registrations
        .extend(facts.stable_registrations.iter().map(|&line| Location {
            file: display.to_owned(),
            line,
        }));
    for (line, name) in torch {
        r.torch_includes.push(TorchInclude {
            file: display.to_owned(),
            line,
            stable: is_stable_header(&name),
            include: name,
        });
    }
}

/// The includes a computed include `inc` resolves to: one per header name
/// of its expansion, on the same line.
fn resolved_includes(inc: &Include, expansion: &Expansion) -> Vec<Include> {
    expansion
        .headers
        .iter()
        .map(|(angle, name)| Include {
            name: name.clone(),
            kind: if *angle {
                IncludeKind::Angle
            } else {
                IncludeKind::Quoted
            },
            line: inc.line,
            next: inc.next,
        })
        .collect()
}

/// Reads, hashes and lexes one file, unless `cache` has an entry whose
/// stamp matches the file's current one (then only a `stat` is made).
/// `scratch` is reused from file to file.
fn read_entry(
    root: &Path,
    path: &Path,
    cache: Option<&StatCache>,
    scratch: &mut ReadScratch,
) -> Slot {
    let display = display_path(root, path);
    if let Some(cache) = cache.filter(|c| c.knows(path)) {
        if let Ok(meta) = std::fs::metadata(path) {
            let stamp = FileStamp::of(&meta);
            if let Some(hit) = cache.get(path, &stamp) {
                return Slot::Ready(FileEntry {
                    display,
                    blake3: Arc::clone(&hit.blake3),
                    facts: Arc::clone(&hit.facts),
                    origin: Origin::Cached(path.to_path_buf(), stamp),
                });
            }
        }
    }
    // The clock is read before the file is opened, so a stamp counts as
    // trusted only when the file's last change lies a racy window before
    // the read: a later write in the same timestamp tick cannot exist.
    let now = SystemTime::now();
    // A FIFO, device or directory is refused, never read (no hang, no
    // unbounded read through a symlink to `/dev/zero`).
    let read = |buf: &mut Vec<u8>,
                dirs: &mut abicache_fs::DirHandles|
     -> io::Result<(usize, std::fs::Metadata)> {
        let (file, meta) = dirs.open_regular(path)?;
        if meta.len() > MAX_SOURCE_SIZE {
            return Err(abicache_fs::FsError::TooLarge {
                path: path.to_owned(),
                size: meta.len(),
                cap: MAX_SOURCE_SIZE,
            }
            .into());
        }
        let filled = read_whole(file, meta.len(), buf)?;
        Ok((filled, meta))
    };
    match read(&mut scratch.bytes, &mut scratch.dirs) {
        Ok((filled, meta)) => {
            let bytes = &scratch.bytes[..filled];
            let blake3: Arc<str> = blake3::hash(bytes).to_hex().as_str().into();
            let facts = Arc::new(lex_reusing(bytes, &mut scratch.lex));
            let origin = match cache {
                Some(cache) => {
                    cache.count_read();
                    Origin::Read(FreshFile {
                        path: path.to_path_buf(),
                        stamp: FileStamp::trusted(&meta, now),
                        blake3: Arc::clone(&blake3),
                        facts: Arc::clone(&facts),
                    })
                }
                None => Origin::Untracked,
            };
            Slot::Ready(FileEntry {
                display,
                blake3,
                facts,
                origin,
            })
        }
        Err(e) => Slot::Failed(e),
    }
}

/// What a thread that reads files reuses from one file to the next.
#[derive(Default)]
struct ReadScratch {
    /// The file's bytes.
    bytes: Vec<u8>,
    /// The lexer's.
    lex: LexScratch,
    /// The handles of the directories files were read from.
    dirs: abicache_fs::DirHandles,
}

/// Reads `file` (whose `stat` said `size` bytes) to its end, at most
/// [`MAX_SOURCE_SIZE`] + 1 bytes, into the front of `buf`; returns how many
/// bytes were read. Usually one `read`: it asks for one byte more than
/// `size`, and a regular file that returns fewer bytes than asked for, and
/// at least `size`, is at its end (else it reads on until a `read` returns
/// nothing, as `read_to_end` does).
fn read_whole(mut file: std::fs::File, size: u64, buf: &mut Vec<u8>) -> io::Result<usize> {
    let limit = usize::try_from(MAX_SOURCE_SIZE + 1).unwrap_or(usize::MAX);
    let mut filled = 0usize;
    let mut want = usize::try_from(size).map_or(limit, |s| s.saturating_add(1).min(limit));
    while want > 0 {
        if buf.len() < filled + want {
            buf.resize(filled + want, 0);
        }
        let n = match file.read(&mut buf[filled..filled + want]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled += n;
        if n == 0 || (n < want && filled as u64 >= size) {
            break;
        }
        want = if n < want {
            want - n
        } else {
            filled.max(READ_CHUNK).min(limit - filled)
        };
    }
    Ok(filled)
}

/// What [`read_whole`] asks for at least once a file turned out larger
/// than its `stat` said.
const READ_CHUNK: usize = 8192;

/// The largest source or header read (generated headers reach tens of MiB).
const MAX_SOURCE_SIZE: u64 = 1 << 30;

/// Files read at once from which [`Walk::prefetch`] reads on worker threads.
const PARALLEL_FROM: usize = 8;

/// Worker threads [`Walk::prefetch`] reads on.
const READ_THREADS: usize = 2;

/// Files loaded from which [`ScanLearnt::into_cache_then`] works out the
/// dependencies on a thread of their own.
const STORE_BESIDE_FROM: usize = 128;

/// The most files the walking thread reads at once while it has nothing
/// to resolve (few, so that what the workers read is not kept waiting).
const MAIN_JOBS_AT_ONCE: usize = 2;

/// The most files a worker takes from the queue at once.
const JOBS_AT_ONCE: usize = 16;

/// What [`Walk::prefetch`] has still to do.
#[derive(Default)]
struct Frontier {
    /// Pairs whose file is loaded: their includes are next.
    ready: Vec<(FileId, DirId)>,
    /// Pairs whose file is asked for and not loaded yet, by file: the first
    /// pair's directory (nearly every file has only one), held without an
    /// allocation, then any others in order.
    waiting: FastMap<FileId, (DirId, Vec<DirId>)>,
    /// Files to hand out for reading.
    to_read: Vec<FileId>,
    /// Computed includes met so far, each once per directory.
    computed: Vec<(DirId, String)>,
    computed_seen: FastSet<(DirId, String)>,
}

/// A file to read: its id and canonical path (shared with the resolver's).
type Job = (FileId, Arc<OsStr>);

/// Files waiting for a worker ([`Walk::prefetch`]); `pop_some` waits for
/// some and answers `None` once the queue is closed.
#[derive(Default)]
struct JobQueue {
    state: Mutex<(VecDeque<Job>, bool)>,
    more: Condvar,
}

impl JobQueue {
    fn push_all(&self, jobs: impl Iterator<Item = Job>) {
        self.lock().0.extend(jobs);
        self.more.notify_all();
    }

    /// A share of the waiting jobs: one when few wait (so every worker has
    /// some), up to [`JOBS_AT_ONCE`] from a long queue (one wake-up and one
    /// message per batch rather than per file: a tree of small headers
    /// otherwise spends more on futexes than on reading).
    fn pop_some(&self) -> Option<Vec<Job>> {
        let mut state = self.lock();
        loop {
            if !state.0.is_empty() {
                let take = (state.0.len() / (2 * READ_THREADS)).clamp(1, JOBS_AT_ONCE);
                return Some(state.0.drain(..take).collect());
            }
            if state.1 {
                return None;
            }
            state = self.more.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Up to `most` waiting jobs, without waiting; `None` when none wait.
    fn try_pop(&self, most: usize) -> Option<Vec<Job>> {
        let mut state = self.lock();
        if state.0.is_empty() {
            return None;
        }
        let take = state.0.len().min(most);
        Some(state.0.drain(..take).collect())
    }

    fn close(&self) {
        self.lock().1 = true;
        self.more.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (VecDeque<Job>, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Closes a [`JobQueue`] when dropped (also when unwinding).
struct CloseOnDrop<'q>(&'q JobQueue);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// True for an include name of a torch header (`torch/`, `ATen/`, `c10/`, `caffe2/`).
pub fn is_torch_header(name: &str) -> bool {
    ["torch/", "ATen/", "c10/", "caffe2/"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// True for a torch header of the libtorch stable ABI
/// (`torch/csrc/stable/…` or `torch/headeronly/…`).
pub fn is_stable_header(name: &str) -> bool {
    name.starts_with("torch/csrc/stable/") || name.starts_with("torch/headeronly/")
}

/// Whether `text` is a relative path of plain components only (no empty
/// one, no `.` nor `..`): the same text as its components joined by `/`.
fn is_plain_relative(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// `canonical` relative to `root` as POSIX text when under it, else the
/// absolute canonical path.
fn display_path(root: &Path, canonical: &Path) -> Arc<str> {
    // The common case by bytes: `root/rest` with `rest` plain UTF-8 text
    // (what `strip_prefix` and the check below would give, without
    // parsing components).
    let (root_bytes, bytes) = (
        root.as_os_str().as_bytes(),
        canonical.as_os_str().as_bytes(),
    );
    if let Some(rest) = bytes
        .strip_prefix(root_bytes)
        .and_then(|r| r.strip_prefix(b"/"))
        .filter(|_| root_bytes.len() > 1 && !root_bytes.ends_with(b"/"))
        .and_then(|r| std::str::from_utf8(r).ok())
        .filter(|r| is_plain_relative(r))
    {
        return Arc::from(rest);
    }
    match canonical.strip_prefix(root) {
        // A canonical path has no `.`, `..` nor repeated `/`: its text is
        // already the POSIX form.
        Ok(rel) if rel.to_str().is_some_and(is_plain_relative) => {
            Arc::from(rel.to_str().unwrap_or_default())
        }
        Ok(rel) => rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => Some(part.to_string_lossy()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("/")
            .into(),
        Err(_) => canonical.to_string_lossy().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_whole` of a file whose `stat` said `said` bytes.
    fn read_said(bytes: &[u8], said: u64, buf: &mut Vec<u8>) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        let n = read_whole(std::fs::File::open(&path).unwrap(), said, buf).unwrap();
        buf[..n].to_vec()
    }

    #[test]
    fn display_paths_by_bytes_are_those_by_components() {
        for (root, path, shown) in [
            ("/r/t", "/r/t/a/b.h", "a/b.h"),
            ("/r/t", "/r/tt/b.h", "/r/tt/b.h"),
            ("/r/t", "/r/t/b.h", "b.h"),
            ("/r/t", "/elsewhere/b.h", "/elsewhere/b.h"),
            ("/r/t", "/r/t//a/b.h", "a/b.h"),
            ("/", "/a/b.h", "a/b.h"),
            ("/r/t/", "/r/t/a.h", "a.h"),
        ] {
            assert_eq!(
                &*display_path(Path::new(root), Path::new(path)),
                shown,
                "{root} {path}"
            );
        }
    }

    #[test]
    fn a_whole_file_is_read_whatever_its_stat_said_and_whatever_the_buffer_held() {
        let big: Vec<u8> = (0..100_000u32).map(|k| (k % 251) as u8).collect();
        let mut buf = vec![7u8; 50];
        for (bytes, said) in [
            (&big[..], big.len() as u64),
            // Grown since its `stat`, shrunk since, empty.
            (&big[..], 3),
            (&big[..1000], 5000),
            (&big[..0], 0),
            (&big[..0], 10),
            (&big[..17], 17),
        ] {
            assert_eq!(read_said(bytes, said, &mut buf), bytes, "said {said}");
        }
    }
}
