//! The append-only counter log behind [`Store::count`] and how it is folded.
//!
//! - `stats.log` starts with a header line naming the log (`{"log":"<id>"}`,
//!   unique per log file); it is created whole (written under a temporary
//!   name, then hard-linked into place), so every log has its header.
//! - A counter appends its events, one JSON line each, in one `write` to the
//!   file opened `O_APPEND`, holding a shared `flock` on it while writing.
//! - A fold (when the log is past [`FOLD_AT`] bytes) holds `stats.lock`, then
//!   an exclusive `flock` on the log (waiting for writers in flight), writes
//!   `stats.json` with the new totals and `folded = {log, bytes}`, and
//!   unlinks the log. A writer that opened the old log notices the unlink
//!   once it gets its lock and opens the path again, so no event is lost.
//!   A fold that dies after writing `stats.json` but before the unlink
//!   counts nothing twice: readers skip the `folded.bytes` already counted
//!   of the log named `folded.log`.
//! - **Shared mode** (a cache many nodes use): no `O_APPEND` or `flock`
//!   holds across nodes, so each host (hostname and boot id,
//!   [`crate::HostId::file_tag`]) has its own set of files,
//!   `v1/stats/<host>.log`, `.json` and `.lock`, written only by that
//!   host's processes by the rules above; the counters are the sum over
//!   every host's set (and the local-mode files, if any).

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use abicache_fs::{read_bounded, Follow, FsError};
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::lock::FileLock;
use crate::private_file::{open_append, write_atomic};
use crate::stats::{Counters, Event};
use crate::store::Store;

/// A log longer than this is folded into `stats.json` by the process that
/// crossed the mark.
///
/// Restated in Python at `python/abicache/_warm_record.py:count_hit`
/// (which leaves a log past it to the store; the record carries the value),
/// tied by `tests/python/test_warm_reader.py::test_the_counter_log_is_left_to_rust_when_missing_replaced_or_due`.
pub(crate) const FOLD_AT: u64 = 64 * 1024;
/// Longest `stats.json` or `stats.log` read (a fold keeps the log far below).
const MAX_READ: u64 = 64 << 20;

/// The content of `stats.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Totals {
    #[serde(flatten)]
    counters: Counters,
    /// How much of which log is already in `counters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    folded: Option<Folded>,
}

/// The part of a log already counted in `stats.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Folded {
    /// The log's id (its header).
    log: String,
    /// Bytes of it counted, header included.
    bytes: u64,
}

/// The header line of a log.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    log: String,
}

/// The files of one set of counters: the log, its totals and the fold's lock.
#[derive(Clone, Debug)]
pub(crate) struct CounterFiles {
    pub(crate) log: PathBuf,
    pub(crate) totals: PathBuf,
    pub(crate) fold_lock: PathBuf,
}

impl Store {
    /// The counter files this process writes: `v1/stats.log`, `stats.json`
    /// and `stats.lock`; in shared mode this host's under `v1/stats/`.
    pub(crate) fn counter_files(&self) -> CounterFiles {
        let layout = self.layout();
        if self.mode().shared {
            let tag = crate::HostId::current().file_tag();
            let dir = self.host_stats_dir();
            CounterFiles {
                log: dir.join(format!("{tag}.log")),
                totals: dir.join(format!("{tag}.json")),
                fold_lock: dir.join(format!("{tag}.lock")),
            }
        } else {
            CounterFiles {
                log: layout.stats_log_path(),
                totals: layout.stats_path(),
                fold_lock: layout.stats_lock_path(),
            }
        }
    }

    /// `v1/stats/`: one set of counter files per host (shared mode).
    pub(crate) fn host_stats_dir(&self) -> PathBuf {
        self.layout().version_dir().join("stats")
    }

    /// Every set of counter files in the store: the local-mode set and,
    /// in shared mode, each host's.
    pub(crate) fn all_counter_files(&self) -> Vec<CounterFiles> {
        let layout = self.layout();
        let mut all = vec![CounterFiles {
            log: layout.stats_log_path(),
            totals: layout.stats_path(),
            fold_lock: layout.stats_lock_path(),
        }];
        if let Ok(rd) = std::fs::read_dir(self.host_stats_dir()) {
            let mut tags: Vec<String> = rd
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let tag = name
                        .strip_suffix(".log")
                        .or_else(|| name.strip_suffix(".json"))?;
                    Some(tag.to_owned())
                })
                .collect();
            tags.sort();
            tags.dedup();
            let dir = self.host_stats_dir();
            all.extend(tags.into_iter().map(|tag| CounterFiles {
                log: dir.join(format!("{tag}.log")),
                totals: dir.join(format!("{tag}.json")),
                fold_lock: dir.join(format!("{tag}.lock")),
            }));
        }
        all
    }

    /// Appends `events` to `stats.log`, then folds it when it is long.
    ///
    /// Restated in Python at `python/abicache/_warm_record.py:count_hit`
    /// (one hit's line, appended the same way), tied by
    /// `tests/python/test_warm_reader.py::test_a_hit_appended_by_the_reader_is_counted_by_rust`,
    /// `tests/python/test_warm_reader.py::test_the_counter_log_is_left_to_rust_when_missing_replaced_or_due`
    /// and `tests/python/test_warm_record.py::test_a_warm_load_takes_no_native_call_and_counts_its_hit`.
    pub(crate) fn append_events(&self, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut lines = Vec::new();
        for event in events {
            serde_json::to_writer(&mut lines, event).expect("an event always serializes");
            lines.push(b'\n');
        }
        let files = self.counter_files();
        let path = files.log.clone();
        let length = loop {
            let mut file = match open_append(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if self.mode().shared {
                        let dir = self.host_stats_dir();
                        if !dir.is_dir() {
                            crate::layout::create_dir_0700(&dir)?;
                        }
                    }
                    self.create_log(&path)?;
                    continue;
                }
                Err(e) => return Err(StoreError::opening("append to", &path, e)),
            };
            let meta = file
                .metadata()
                .map_err(StoreError::io_at("inspect", &path))?;
            if !meta.is_file() {
                return Err(squatter(&path, &meta));
            }
            file.lock_shared()
                .map_err(StoreError::io_at("lock", &path))?;
            if !same_file(&path, &meta) {
                continue; // folded and unlinked meanwhile: append to the new log
            }
            file.write_all(&lines)
                .map_err(StoreError::io_at("append to", &path))?;
            break meta.len() + lines.len() as u64;
        };
        if length > FOLD_AT {
            self.fold_log_of(&files)?;
        }
        Ok(())
    }

    /// Creates `stats.log` with its header, unless another process just did.
    fn create_log(&self, path: &Path) -> Result<()> {
        let tmp_dir = self.layout().tmp_dir();
        let staged = tmp_dir.join(format!(".stats-log-{}", unique_id()));
        let header =
            serde_json::to_vec(&Header { log: unique_id() }).expect("a header always serializes");
        write_atomic(&staged, &[header.as_slice(), b"\n"].concat(), &tmp_dir)
            .map_err(StoreError::io_at("write", &staged))?;
        let linked = std::fs::hard_link(&staged, path);
        let _ = std::fs::remove_file(&staged);
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(StoreError::opening("create", path, e)),
        }
    }

    /// Folds `files.log` into `files.totals`.
    fn fold_log_of(&self, files: &CounterFiles) -> Result<()> {
        let layout = self.layout();
        let Some(_fold) = FileLock::try_acquire(&files.fold_lock)? else {
            return Ok(());
        };
        let path = files.log.clone();
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::opening("read", &path, e)),
        };
        file.lock().map_err(StoreError::io_at("lock", &path))?;
        let meta = file
            .metadata()
            .map_err(StoreError::io_at("inspect", &path))?;
        if !same_file(&path, &meta) {
            return Ok(()); // another fold got here first
        }
        let mut totals = read_totals(&files.totals)?;
        let log = read(&path)?.unwrap_or_default();
        let (id, length) = apply_log(&mut totals, &log);
        totals.folded = id.map(|log| Folded { log, bytes: length });
        let json = serde_json::to_vec_pretty(&totals).expect("counters always serialize");
        let stats = files.totals.clone();
        write_atomic(&stats, &json, &layout.tmp_dir())
            .map_err(|e| StoreError::opening("write", &stats, e))?;
        std::fs::remove_file(&path).map_err(StoreError::io_at("remove", &path))?;
        Ok(())
    }

    /// `stats.json` plus the unfolded part of `stats.log`; in shared mode
    /// summed over every host's files.
    pub(crate) fn fold_counters(&self) -> Result<Counters> {
        let sets = if self.mode().shared {
            self.all_counter_files()
        } else {
            vec![self.counter_files()]
        };
        let mut sum = serde_json::Value::Null;
        for files in &sets {
            let mut totals = read_totals(&files.totals)?;
            if let Some(log) = read(&files.log)? {
                apply_log(&mut totals, &log);
            }
            let value = serde_json::to_value(&totals.counters).expect("counters always serialize");
            add_json(&mut sum, &value);
        }
        Ok(serde_json::from_value(sum).unwrap_or_default())
    }
}

/// The totals file at `path` (zero when absent or unparseable).
fn read_totals(path: &Path) -> Result<Totals> {
    Ok(read(path)?
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default())
}

/// Adds `b` into `a` field by field: numbers add (whole numbers stay
/// whole), objects add key by key; `Null` takes `b`.
fn add_json(a: &mut serde_json::Value, b: &serde_json::Value) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                add_json(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            *x = match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x.saturating_add(y).into(),
                _ => serde_json::Number::from_f64(
                    x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0),
                )
                .unwrap_or_else(|| 0.into()),
            };
        }
        (a @ Value::Null, b) => *a = b.clone(),
        _ => {}
    }
}

/// Adds the events of `log` that `totals` does not count yet; returns the
/// log's id (from its header) and its length.
fn apply_log(totals: &mut Totals, log: &[u8]) -> (Option<String>, u64) {
    let mut lines = log.split_inclusive(|&b| b == b'\n');
    let id = lines
        .next()
        .and_then(|first| serde_json::from_slice::<Header>(first).ok())
        .map(|h| h.log);
    let skip = match (&totals.folded, &id) {
        (Some(folded), Some(id)) if folded.log == *id => folded.bytes as usize,
        _ => 0,
    };
    for line in log.get(skip..).unwrap_or_default().split(|&b| b == b'\n') {
        if let Ok(event) = serde_json::from_slice::<Event>(line) {
            totals.counters.apply(event);
        }
    }
    (id, log.len() as u64)
}

/// The bytes of one of the store's own files; `None` when it does not exist.
fn read(path: &Path) -> Result<Option<Vec<u8>>> {
    match read_bounded(path, Follow::No, MAX_READ) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(FsError::NotRegular { kind, .. }) => Err(StoreError::Squatted {
            path: path.to_owned(),
            kind,
        }),
        Err(FsError::Symlink { .. }) => Err(StoreError::Squatted {
            path: path.to_owned(),
            kind: "symbolic link",
        }),
        Err(e) => Err(StoreError::io_at("read", path)(std::io::Error::other(e))),
    }
}

/// True when `path` still names the file whose metadata is `meta`.
fn same_file(path: &Path, meta: &std::fs::Metadata) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev())
}

/// The error for something other than a regular file at `path`.
fn squatter(path: &Path, meta: &std::fs::Metadata) -> StoreError {
    StoreError::Squatted {
        path: path.to_owned(),
        kind: if meta.is_dir() {
            "directory"
        } else {
            "special file"
        },
    }
}

/// An id no other process or call produces: pid, time and a counter.
fn unique_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos}-{n}", std::process::id())
}
