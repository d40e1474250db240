//! Least-recently-used eviction and cleanup of leftovers from dead processes.

use std::ffi::OsStr;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::env;
use crate::error::Result;
use crate::error::StoreError;
use crate::key_claim::GC_LEASE;
use crate::last_used;
use crate::layout::{validate_key, MATRIX_RUN_LOCK};
use crate::lease::{Attempt, Lease, ObservedLease, CLOCK_SKEW_ALLOWANCE};
use crate::lock::FileLock;
use crate::objects::scan_objects;
use crate::stats::Event;
use crate::store::Store;

/// Temporary directories whose name does not lead to a lock are removed once this old.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// How long after its last use an entry or object is never evicted, when
/// `ABICACHE_GC_GRACE` is not set: long enough for a caller to load the
/// path a hit returned, or for a build to link the objects it counted.
pub use abicache_settings::DEFAULT_GC_GRACE;

/// Parses a gc grace in seconds (`60`, `0.5`); `None` or empty gives
/// [`DEFAULT_GC_GRACE`]; `0` spares nothing for its recency. The rule of
/// `abicache_settings::StoreSettings::gc_grace`.
pub fn parse_gc_grace(value: Option<&OsStr>) -> Result<Duration> {
    Ok(abicache_settings::parse_seconds(
        env::ABICACHE_GC_GRACE,
        value,
        DEFAULT_GC_GRACE,
    )?)
}

/// One evicted entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evicted {
    /// Its key.
    pub key: String,
    /// Its extension name.
    pub name: String,
    /// Bytes freed.
    pub size: u64,
}

/// What [`Store::gc`] did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GcReport {
    /// Entries evicted, least recently used first.
    pub evicted: Vec<Evicted>,
    /// Compiled objects evicted from the object cache (oldest first).
    pub objects_evicted: usize,
    /// Bytes those objects held.
    pub object_bytes_freed: u64,
    /// True when objects were left alone because a build was running
    /// (it may be about to link them).
    pub objects_skipped_busy: bool,
    /// Keys that would have been evicted but whose lock was held (in use).
    pub skipped_locked: Vec<String>,
    /// Entries and objects that would have been evicted but were used
    /// within the grace period (`ABICACHE_GC_GRACE`).
    pub skipped_recent: usize,
    /// Total bytes of entries and objects before.
    pub bytes_before: u64,
    /// Total bytes after (above the maximum only when entries were locked or
    /// a build was running).
    pub bytes_after: u64,
    /// Leftover temporary directories removed.
    pub temp_dirs_removed: usize,
    /// Generated-source sets (`v1/sources/`) no entry was built from, unused
    /// within the grace period, removed.
    pub sources_removed: usize,
    /// PCH demand records (`v1/pch-demand/`) no build added to within
    /// [`crate::PCH_DEMAND_MAX_AGE`], and leftovers of interrupted writes there, removed.
    pub pch_demand_removed: usize,
    /// `v1/matrix-envs/run.*` directories of `prebuild --matrix` runs that
    /// died (their lock is free), removed.
    pub matrix_runs_removed: usize,
    /// Bytes those directories held (their Python environments).
    pub matrix_bytes_freed: u64,
    /// Entry directories without a manifest (garbage) removed.
    pub incomplete_removed: usize,
    /// Problems that did not stop the collection.
    pub errors: Vec<String>,
}

impl Store {
    /// Shrinks the cache to at most `max_bytes` of entries and compiled
    /// objects together: first the objects under `objects/` (intermediate
    /// build products, least recently used first; a build marks the objects
    /// it reuses), and only while no build holds a key lock, since a running
    /// build may be about to link them; then least-recently-used entries,
    /// skipping entries whose lock is held. Nothing used within
    /// [`Store::gc_grace`] is evicted: the last use is read again just
    /// before each removal (for an entry, under its key lock and with its
    /// `last-used` locked until the removal), so a path a hit
    /// just returned stays loadable and objects a starting build counted
    /// stay linkable. Also removes leftover temporary
    /// directories and objects, and entry directories without a manifest.
    /// Counts evictions in the stats.
    pub fn gc(&self, max_bytes: u64) -> Result<GcReport> {
        self.gc_impl(max_bytes, None)
    }

    /// [`Store::gc`] that never evicts `spare`, and reports failures in
    /// [`GcReport::errors`] instead of failing (used after a publish).
    pub(crate) fn gc_sparing(&self, max_bytes: u64, spare: Option<&str>) -> GcReport {
        self.gc_impl(max_bytes, spare).unwrap_or_else(|e| GcReport {
            errors: vec![e.to_string()],
            ..GcReport::default()
        })
    }

    fn gc_impl(&self, max_bytes: u64, spare: Option<&str>) -> Result<GcReport> {
        // Shared mode: one collection at a time across every node.
        let _gc_lease = if self.mode().shared {
            let path = self.leases_dir()?.join(GC_LEASE);
            match Lease::try_acquire(&path, self.lease_timeout())? {
                Attempt::Taken(lease) => Some(lease),
                Attempt::Held(holder) => {
                    return Err(StoreError::GcBusy {
                        path,
                        holder: holder.describe(),
                    })
                }
            }
        } else {
            None
        };
        if let Ok(dir) = self.leases_dir() {
            crate::lease::sweep_markers(&dir, self.lease_timeout());
        }
        let mut report = GcReport {
            temp_dirs_removed: self.clean_stale_temp_dirs(),
            ..GcReport::default()
        };
        (report.matrix_runs_removed, report.matrix_bytes_freed) = self.clean_dead_matrix_runs();
        let mut entries = Vec::new();
        for (key, dir) in self.entry_dirs()? {
            match self.entry_info(key.clone(), dir) {
                Some(info) => entries.push(info),
                None => {
                    // No readable manifest: not an entry, just garbage (unless a lookup holds it).
                    // Shared mode: it may be half-visible here; garbage only once old.
                    let settled = !self.mode().shared
                        || std::fs::symlink_metadata(self.layout().entry_dir(&key))
                            .and_then(|m| m.modified())
                            .is_ok_and(|t| !self.is_recent(t));
                    if !settled {
                        continue;
                    }
                    if let Some(lock) = self.try_claim_key(&key)? {
                        if self
                            .entry_info(key.clone(), self.layout().entry_dir(&key))
                            .is_none()
                        {
                            self.discard_entry(&key)?;
                            report.incomplete_removed += 1;
                        }
                        drop(lock);
                    }
                }
            }
        }
        entries.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.key.cmp(&b.key)));
        let payloads: Vec<&str> = entries
            .iter()
            .map(|e| e.manifest.payload.as_str())
            .collect();
        report.sources_removed = self.gc_sources(&payloads).0;
        report.pch_demand_removed = self.gc_pch_demand();
        self.gc_warm_records(&entries.iter().map(|e| e.key.as_str()).collect());
        let entry_bytes: u64 = entries.iter().map(|e| e.size).sum();
        let objects = self.objects_oldest_first();
        // Precompiled headers are evicted after the objects: rebuilt in the background on demand.
        let pch_dirs = self.pch_dirs_oldest_first();
        let object_bytes: u64 =
            objects.iter().map(|o| o.size).sum::<u64>() + pch_dirs.iter().map(|p| p.1).sum::<u64>();
        report.bytes_before = entry_bytes + object_bytes;
        let mut total = report.bytes_before;
        if total > max_bytes && !(objects.is_empty() && pch_dirs.is_empty()) {
            if self.any_build_running(spare)? {
                report.objects_skipped_busy = true;
            } else {
                for files in objects {
                    if total <= max_bytes {
                        break;
                    }
                    if self.is_recent(files.last_used_now()) {
                        report.skipped_recent += 1;
                        continue;
                    }
                    // The object first: a record without its object is a
                    // plain miss, an object without its record a corrupt one.
                    let removed = std::fs::remove_file(&files.object).is_ok();
                    let _ = std::fs::remove_file(&files.record);
                    if removed {
                        total -= files.size;
                        report.objects_evicted += 1;
                        report.object_bytes_freed += files.size;
                    }
                }
                for (dir, size, last_used) in pch_dirs {
                    if total <= max_bytes {
                        break;
                    }
                    if self.is_recent(last_used) {
                        report.skipped_recent += 1;
                        continue;
                    }
                    if std::fs::remove_dir_all(&dir).is_ok() {
                        total -= size;
                        report.objects_evicted += 1;
                        report.object_bytes_freed += size;
                    }
                }
            }
        }
        for e in entries {
            if total <= max_bytes {
                break;
            }
            if Some(e.key.as_str()) == spare {
                continue;
            }
            if self.is_recent(e.last_used) {
                report.skipped_recent += 1;
                continue;
            }
            let Some(lock) = self.try_claim_key(&e.key)? else {
                report.skipped_locked.push(e.key);
                continue;
            };
            let removed = if self.mode().shared {
                // No lock holds across nodes: re-read the last use through a
                // fresh descriptor, move the entry aside, and put it back if
                // a touch landed meanwhile (see `evict_shared`).
                if !self.evict_shared(&e.key, &e.dir) {
                    report.skipped_recent += 1;
                    continue;
                }
                Ok(())
            } else {
                // A lookup touches `last-used` before it verifies: re-read it
                // now that no builder can replace the entry, and hold it until
                // the entry is gone, so no touch falls between the two.
                let (last_used, _touches_held) = last_used::lock_for_removal(&e.dir);
                if last_used.is_none_or(|t| self.is_recent(t)) {
                    report.skipped_recent += 1;
                    continue;
                }
                self.discard_entry(&e.key)
            };
            match removed {
                Ok(()) => {
                    total -= e.size;
                    report.evicted.push(Evicted {
                        key: e.key,
                        name: e.name,
                        size: e.size,
                    });
                    lock.release_and_clean();
                }
                Err(err) => report.errors.push(err.to_string()),
            }
        }
        report.bytes_after = total;
        // The arch-free index names only candidates: lines of evicted
        // entries are misses already; this only keeps it small.
        self.sweep_arch_index();
        if !report.evicted.is_empty() {
            if let Err(err) = self.record(Event::Evicted(report.evicted.len() as u64)) {
                report.errors.push(err.to_string());
            }
        }
        Ok(report)
    }

    /// The object cache's objects (with their records), least recently
    /// used first. Temporary objects (`.KEY.PID-N.tmp.o`) left by a killed
    /// compile are removed once older than [`STALE_TEMP_AGE`] instead.
    fn objects_oldest_first(&self) -> Vec<crate::objects::ObjectFiles> {
        let (mut objects, temps) = scan_objects(&self.layout().objects_dir());
        for (path, modified) in temps {
            let age = SystemTime::now()
                .duration_since(modified)
                .unwrap_or_default();
            if age > STALE_TEMP_AGE {
                let _ = std::fs::remove_file(path);
            }
        }
        objects.sort_by(|a, b| {
            a.last_used
                .cmp(&b.last_used)
                .then_with(|| a.object.cmp(&b.object))
        });
        objects
    }

    /// True when `last_used` lies within the grace of now (or in the
    /// future): [`Store::gc_grace`]; in shared mode at least the lease
    /// timeout plus [`CLOCK_SKEW_ALLOWANCE`], since another node's clock
    /// may set it.
    pub(crate) fn is_recent(&self, last_used: SystemTime) -> bool {
        SystemTime::now()
            .duration_since(last_used)
            .map_or(true, |age| age < self.effective_gc_grace())
    }

    /// The grace [`Store::is_recent`] applies.
    pub(crate) fn effective_gc_grace(&self) -> Duration {
        if self.mode().shared {
            self.gc_grace()
                .max(self.lease_timeout() + CLOCK_SKEW_ALLOWANCE)
        } else {
            self.gc_grace()
        }
    }

    /// Evicts `key`'s entry from a shared cache, holding its lease; false
    /// when it was used within the grace and is left in place. The rule
    /// (no lock holds across nodes, so gc relies on time): every lookup on
    /// any node touches `last-used` before it verifies; gc re-reads that
    /// time through a fresh descriptor (NFS revalidates on open), renames
    /// the entry into `tmp/`, then reads the time again there: a touch that
    /// landed between the two reads puts the entry back. So a path a hit
    /// returned vanishes only when its lookup began in the instant between
    /// gc's last read and its rename *and* its load came after the rename;
    /// an entry any node used within the grace is never collected.
    fn evict_shared(&self, key: &str, dir: &std::path::Path) -> bool {
        let used = |dir: &std::path::Path| {
            last_used::open_read(dir)
                .and_then(|f| f.metadata())
                .and_then(|m| m.modified())
                .ok()
        };
        if used(dir).is_none_or(|t| self.is_recent(t)) {
            return false;
        }
        let trash = self.trash_path(key);
        if std::fs::rename(dir, &trash).is_err() {
            return false;
        }
        let touched_meanwhile = used(&trash).is_none_or(|t| self.is_recent(t));
        if touched_meanwhile && std::fs::rename(&trash, dir).is_ok() {
            return false; // put back: a lookup is using it
        }
        // Not touched, or something took its place meanwhile: gone.
        let _ = std::fs::remove_dir_all(&trash);
        true
    }

    /// True when some process holds a key's lock, i.e. is building; the
    /// lock of `spare` (the entry this process just published, still
    /// holding its lock) does not count.
    fn any_build_running(&self, spare: Option<&str>) -> Result<bool> {
        if self.mode().shared {
            return Ok(self.any_fresh_lease(spare));
        }
        let own = spare.map(|key| self.layout().lock_path(key));
        let Ok(rd) = std::fs::read_dir(self.layout().locks_dir()) else {
            return Ok(false);
        };
        for entry in rd.flatten() {
            let path = entry.path();
            if own.as_ref() == Some(&path) {
                continue;
            }
            if path.extension().is_some_and(|e| e == "lock")
                && FileLock::try_acquire(&path)?.is_none()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Shared mode: true when some key's lease (not `spare`'s, not gc's)
    /// is fresh, i.e. a process on some node is building.
    fn any_fresh_lease(&self, spare: Option<&str>) -> bool {
        let own = spare.map(|key| self.lease_path(key));
        let Ok(rd) = std::fs::read_dir(self.layout().version_dir().join("leases")) else {
            return false;
        };
        rd.flatten().any(|entry| {
            let path = entry.path();
            let name = entry.file_name();
            name.to_string_lossy().ends_with(".lease")
                && name != GC_LEASE
                && own.as_ref() != Some(&path)
                && ObservedLease::read(&path)
                    .ok()
                    .flatten()
                    .is_some_and(|seen| !seen.is_stale(self.lease_timeout()))
        })
    }

    /// Removes directories under `tmp/` left by processes that died: those
    /// named `<key>.…` whose key lock is free (no live process is building
    /// that key), and unrecognised ones older than [`STALE_TEMP_AGE`]. Never
    /// touches a directory whose key lock is held. Best effort; returns how
    /// many were removed.
    pub fn clean_stale_temp_dirs(&self) -> usize {
        let Ok(rd) = std::fs::read_dir(self.layout().tmp_dir()) else {
            return 0;
        };
        let mut removed = 0;
        for entry in rd.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let key = name.split('.').next().unwrap_or_default();
            let stale = if validate_key(key).is_ok() && name.len() > key.len() {
                match self.try_claim_key(key) {
                    Ok(Some(lock)) => {
                        let ok = remove_any(&path);
                        drop(lock);
                        removed += usize::from(ok);
                        continue;
                    }
                    _ => false,
                }
            } else {
                entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| {
                    SystemTime::now().duration_since(t).unwrap_or_default() > STALE_TEMP_AGE
                })
            };
            if stale && remove_any(&path) {
                removed += 1;
            }
        }
        removed
    }
}

impl Store {
    /// Removes the `v1/matrix-envs/run.*` directories whose run is gone: their
    /// [`MATRIX_RUN_LOCK`] is free (a killed run releases it) and they were not
    /// changed within the grace period (a run takes its lock just after it
    /// creates the directory). Each is renamed into `tmp/` first, so it
    /// vanishes at once. Best effort; returns how many and their bytes.
    fn clean_dead_matrix_runs(&self) -> (usize, u64) {
        let Ok(rd) = std::fs::read_dir(self.layout().matrix_envs_dir()) else {
            return (0, 0);
        };
        let (mut removed, mut bytes) = (0, 0);
        for entry in rd.flatten() {
            let dir = entry.path();
            let is_run = entry.file_name().to_string_lossy().starts_with("run.")
                && entry.file_type().is_ok_and(|t| t.is_dir());
            let changed = entry.metadata().and_then(|m| m.modified());
            if !is_run || changed.map_or(true, |t| self.is_recent(t)) {
                continue;
            }
            let Ok(Some(lock)) = FileLock::try_acquire(&dir.join(MATRIX_RUN_LOCK)) else {
                continue;
            };
            let size = crate::store::dir_size(&dir);
            let trash = self.trash_path("matrix-run");
            let moved = std::fs::rename(&dir, &trash).is_ok();
            drop(lock);
            if moved {
                let _ = std::fs::remove_dir_all(&trash);
                removed += 1;
                bytes += size;
            }
        }
        (removed, bytes)
    }
}

fn remove_any(path: &std::path::Path) -> bool {
    if path.is_dir() {
        std::fs::remove_dir_all(path).is_ok()
    } else {
        std::fs::remove_file(path).is_ok()
    }
}
