//! Counters shared by all processes using a cache root.
//!
//! Counting is off the hot path's critical section: each process appends
//! one JSON line per event to `v1/stats.log` (one `write` to an `O_APPEND`
//! file, no read-modify-write), and readers fold the log onto the totals in
//! `v1/stats.json`. When the log grows past a few dozen kilobytes, one
//! process folds it into `stats.json` (see `stats_log`). Counting is best
//! effort: a read-only or full cache, or something squatting on a stats
//! file, never fails the operation being counted.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::lock::FileLock;
use crate::store::Store;

/// Something worth counting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A lookup found a verified entry; `compile_seconds` is its manifest's
    /// build time, counted as time saved.
    Hit {
        /// The build time the hit saved.
        compile_seconds: f64,
    },
    /// A lookup found nothing usable.
    Miss,
    /// A build finished and was published.
    Build {
        /// How long it took.
        seconds: f64,
    },
    /// A build failed.
    Error,
    /// Entries were evicted by gc.
    Evicted(u64),
    /// A corrupt entry was found.
    Corrupt,
    /// A remote cache supplied a verified entry of `bytes` bytes, saving
    /// its manifest's `compile_seconds`.
    RemoteHit {
        /// Bytes downloaded.
        bytes: u64,
        /// The build time the download saved.
        compile_seconds: f64,
    },
    /// A remote cache had no entry for a key.
    RemoteMiss,
    /// A remote cache failed (unreachable, timed out, refused, or served a
    /// corrupt or untrusted entry); the caller built locally instead.
    RemoteError,
    /// An entry of `bytes` bytes was uploaded to a remote cache.
    RemoteUpload {
        /// Bytes uploaded.
        bytes: u64,
    },
    /// A remote cache supplied a verified compiled object of `bytes` bytes.
    RemoteObjectHit {
        /// Bytes downloaded.
        bytes: u64,
    },
    /// A compiled object of `bytes` bytes was uploaded to a remote cache.
    RemoteObjectUpload {
        /// Bytes uploaded.
        bytes: u64,
    },
    /// A unit was compiled against a cached precompiled header.
    PchHit,
    /// A background precompiled-header build was started.
    PchStarted,
    /// A background precompiled-header build finished and was adopted.
    PchFinished,
    /// A precompiled header a build needed was not started, for this reason.
    PchSkipped(crate::PchSkip),
    /// Precompiled headers were removed to keep their total under the cap.
    PchEvicted(u64),
    /// A read-only cache layer supplied a verified entry (counted in the
    /// local cache, since layers are never written), saving its manifest's
    /// `compile_seconds`.
    LayerHit {
        /// The build time the hit saved.
        compile_seconds: f64,
    },
    /// A build's CUDA device steps for one architecture (`sm_90`): how many
    /// were reused from the object cache and how many ran `cicc` and `ptxas`.
    DeviceSteps {
        /// The architecture, as the build report names it.
        arch: String,
        /// Steps reused.
        reused: u64,
        /// Of `reused`, the steps fetched from the remote's objects (absent
        /// in logs written before it was counted).
        #[serde(default)]
        from_remote: u64,
        /// Steps compiled.
        compiled: u64,
    },
}

/// Device steps of one architecture, summed over builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceStepCounts {
    /// Steps reused from the object cache.
    pub reused: u64,
    /// Of `reused`, the steps the object cache lacked and the remote's
    /// objects supplied.
    pub from_remote: u64,
    /// Steps compiled (`cicc` and `ptxas` ran).
    pub compiled: u64,
}

/// The persistent counters, as stored in `stats.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Verified hits.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
    /// Published builds.
    pub builds: u64,
    /// Failed builds.
    pub errors: u64,
    /// Entries evicted by gc.
    pub evictions: u64,
    /// Corrupt entries found.
    pub corrupt: u64,
    /// Total seconds spent building.
    pub build_seconds: f64,
    /// Total build seconds saved by hits.
    pub saved_seconds: f64,
    /// Verified entries downloaded from a remote cache.
    pub remote_hits: u64,
    /// Keys a remote cache did not have.
    pub remote_misses: u64,
    /// Remote failures that fell back to a local build.
    pub remote_errors: u64,
    /// Entries uploaded to a remote cache.
    pub remote_uploads: u64,
    /// Bytes downloaded from a remote cache.
    pub remote_bytes_down: u64,
    /// Bytes uploaded to a remote cache.
    pub remote_bytes_up: u64,
    /// Compiled objects downloaded from a remote cache.
    pub remote_object_hits: u64,
    /// Compiled objects uploaded to a remote cache.
    pub remote_object_uploads: u64,
    /// Units compiled against a cached precompiled header.
    pub pch_hits: u64,
    /// Background precompiled-header builds started.
    pub pch_builds_started: u64,
    /// Background precompiled-header builds finished (adopted into the cache).
    pub pch_builds_finished: u64,
    /// Precompiled headers not started: the first build to need them.
    pub pch_skipped_first_use: u64,
    /// Not started: it or another PCH of this cache was being built.
    pub pch_skipped_busy: u64,
    /// Not started: every machine slot (`ABICACHE_PCH_JOBS`) was busy.
    pub pch_skipped_machine_slots: u64,
    /// Not started: larger than the PCH cap on its own.
    pub pch_skipped_over_cap: u64,
    /// Precompiled headers removed to keep their total under the cap.
    pub pch_evicted: u64,
    /// Entries served by a read-only cache layer (also counted in `hits`).
    pub layer_hits: u64,
    /// CUDA device steps per architecture (`sm_90`), reused and compiled.
    pub device_steps: std::collections::BTreeMap<String, DeviceStepCounts>,
}

impl Counters {
    pub(crate) fn apply(&mut self, event: Event) {
        match event {
            Event::Hit { compile_seconds } => {
                self.hits += 1;
                self.saved_seconds += compile_seconds;
            }
            Event::Miss => self.misses += 1,
            Event::Build { seconds } => {
                self.builds += 1;
                self.build_seconds += seconds;
            }
            Event::Error => self.errors += 1,
            Event::Evicted(n) => self.evictions += n,
            Event::Corrupt => self.corrupt += 1,
            Event::RemoteHit {
                bytes,
                compile_seconds,
            } => {
                self.remote_hits += 1;
                self.remote_bytes_down += bytes;
                self.saved_seconds += compile_seconds;
            }
            Event::RemoteMiss => self.remote_misses += 1,
            Event::RemoteError => self.remote_errors += 1,
            Event::RemoteUpload { bytes } => {
                self.remote_uploads += 1;
                self.remote_bytes_up += bytes;
            }
            Event::RemoteObjectHit { bytes } => {
                self.remote_object_hits += 1;
                self.remote_bytes_down += bytes;
            }
            Event::RemoteObjectUpload { bytes } => {
                self.remote_object_uploads += 1;
                self.remote_bytes_up += bytes;
            }
            Event::PchHit => self.pch_hits += 1,
            Event::PchStarted => self.pch_builds_started += 1,
            Event::PchFinished => self.pch_builds_finished += 1,
            Event::PchSkipped(reason) => match reason {
                crate::PchSkip::FirstUse => self.pch_skipped_first_use += 1,
                crate::PchSkip::Busy => self.pch_skipped_busy += 1,
                crate::PchSkip::MachineSlotsFull => self.pch_skipped_machine_slots += 1,
                crate::PchSkip::OverCap => self.pch_skipped_over_cap += 1,
            },
            Event::PchEvicted(n) => self.pch_evicted += n,
            Event::LayerHit { compile_seconds } => {
                self.hits += 1;
                self.layer_hits += 1;
                self.saved_seconds += compile_seconds;
            }
            Event::DeviceSteps {
                arch,
                reused,
                from_remote,
                compiled,
            } => {
                let counts = self.device_steps.entry(arch).or_default();
                counts.reused += reused;
                counts.from_remote += from_remote;
                counts.compiled += compiled;
            }
        }
    }
}

/// Counters plus what is in the store right now (for `abicache stats`).
/// Serialises flat: the counters' fields, then `entries`, `bytes`, `pchs`
/// and `pch_bytes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// The persistent counters.
    #[serde(flatten)]
    pub counters: Counters,
    /// Whether the store runs in shared mode, and why.
    pub mode: crate::CacheMode,
    /// Entries in the store now.
    pub entries: u64,
    /// Bytes of those entries.
    pub bytes: u64,
    /// Precompiled headers in the store now (published ones).
    pub pchs: u64,
    /// Bytes of those precompiled headers.
    pub pch_bytes: u64,
    /// The largest peak resident memory recorded for one compile (bytes),
    /// from the objects' peak records ([`crate::PeakRecords`]); absent when
    /// no compile was measured. Not serialised when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_peak_rss: Option<u64>,
}

/// Whether this process has already warned that counting failed.
static WARNED: AtomicBool = AtomicBool::new(false);

impl Store {
    /// Counts one event, best effort (see [`Store::count`]). Never fails:
    /// the `Result` is kept for callers written when counting could fail.
    pub fn record(&self, event: Event) -> Result<()> {
        self.record_all(&[event])
    }

    /// Counts events, best effort (see [`Store::count`]); never fails. A
    /// failure is left for the next [`Store::count`] to report.
    pub fn record_all(&self, events: &[Event]) -> Result<()> {
        let _ = self.append_events(events);
        Ok(())
    }

    /// Resets every counter to zero (`abicache stats --zero`, like `ccache -z`):
    /// holding `stats.lock` (as a fold does) and an exclusive lock on
    /// `stats.log` (waiting for writers in flight), removes the log and
    /// `stats.json` (missing files read as zero); entries are untouched. A
    /// writer that opened the old log notices the unlink and opens a new one.
    pub fn zero_counters(&self) -> Result<()> {
        let files = self.counter_files();
        if self.mode().shared && !self.host_stats_dir().is_dir() {
            crate::layout::create_dir_0700(&self.host_stats_dir())?;
        }
        let _fold = FileLock::acquire(&files.fold_lock, "stats", self.lock_timeout())?;
        let log = files.log.clone();
        let _held = match std::fs::File::open(&log) {
            Ok(file) => {
                file.lock().map_err(StoreError::io_at("lock", &log))?;
                Some(file)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(StoreError::opening("read", &log, e)),
        };
        let mut paths = vec![log.clone(), files.totals.clone()];
        if self.mode().shared {
            // Every other host's files too (their writers' locks do not
            // reach this node: an event in flight there may be lost).
            for other in self.all_counter_files() {
                paths.extend([other.log, other.totals]);
            }
        }
        for path in paths {
            match fs_err::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    /// Counts events: one append to `stats.log`, safe against concurrent
    /// processes, no lock held against other counters. Never fails: when
    /// the counters cannot be written (read-only or full cache, a directory
    /// squatting on a stats file) the events are dropped, and the first
    /// such failure in this process is returned as a warning to show (with
    /// the fix, when there is one); later ones return `None`.
    pub fn count(&self, events: &[Event]) -> Option<String> {
        let error = self.try_count(events).err()?;
        (!WARNED.swap(true, Ordering::Relaxed))
            .then(|| format!("statistics not updated (the cache is still used): {error}"))
    }

    /// Counts events like [`Store::count`], but returns why they could not
    /// be counted (for callers and tests that want the error itself).
    pub fn try_count(&self, events: &[Event]) -> Result<()> {
        self.append_events(events)
    }

    /// The counters: the totals in `stats.json` plus the events in
    /// `stats.log` not yet folded into them. Zero when neither exists; an
    /// unparseable `stats.json` counts as zero, unparseable log lines are
    /// skipped. A directory squatting on either file is an error naming it.
    pub fn counters(&self) -> Result<Counters> {
        self.fold_counters()
    }

    /// The counters plus the number and total size of the entries now in the store.
    pub fn stats(&self) -> Result<Stats> {
        let counters = self.counters()?;
        let entries = self.list()?;
        // Published PCHs only: not the logs of failed builds (`<key>.failed`).
        let pchs: Vec<_> = self
            .pch_dirs_oldest_first()
            .into_iter()
            .filter(|(dir, ..)| dir.extension().is_none())
            .collect();
        Ok(Stats {
            counters,
            mode: self.mode().clone(),
            entries: entries.len() as u64,
            bytes: entries.iter().map(|e| e.size).sum(),
            pchs: pchs.len() as u64,
            pch_bytes: pchs.iter().map(|p| p.1).sum(),
            largest_peak_rss: crate::PeakRecords::new(&self.layout().objects_dir()).largest(),
        })
    }
}
