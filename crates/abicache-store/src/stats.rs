//! Counters shared by all processes using a cache root (`v1/stats.json`).
//!
//! Every update is a read-modify-write under the `v1/stats.lock` file lock,
//! written to a temporary file and renamed over `stats.json`, so readers
//! (who take no lock) always see a whole file and no update is lost.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::lock::FileLock;
use crate::store::Store;

/// Something worth counting.
#[derive(Clone, Copy, Debug, PartialEq)]
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
}

impl Counters {
    fn apply(&mut self, event: Event) {
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
        }
    }
}

/// Counters plus what is in the store right now (for `abicache stats`).
/// Serialises flat: the counters' fields, then `entries` and `bytes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// The persistent counters.
    #[serde(flatten)]
    pub counters: Counters,
    /// Entries in the store now.
    pub entries: u64,
    /// Bytes of those entries.
    pub bytes: u64,
}

impl Store {
    /// Counts one event (see [`Store::record_all`]).
    pub fn record(&self, event: Event) -> Result<()> {
        self.record_all(&[event])
    }

    /// Counts events in one locked read-modify-write of `stats.json`, safe
    /// against concurrent processes. An unparseable `stats.json` restarts from zero.
    pub fn record_all(&self, events: &[Event]) -> Result<()> {
        let layout = self.layout();
        let _lock = FileLock::acquire(&layout.stats_lock_path(), "stats", self.lock_timeout())?;
        let mut counters = self.counters()?;
        for &event in events {
            counters.apply(event);
        }
        let path = layout.stats_path();
        let tmp = path.with_extension("json.tmp");
        let json = serde_json::to_vec_pretty(&counters).map_err(|source| StoreError::Json {
            action: "write",
            path: path.clone(),
            source,
        })?;
        fs_err::File::create(&tmp)?.write_all(&json)?;
        fs_err::rename(&tmp, &path)?;
        Ok(())
    }

    /// Resets every counter to zero (`abicache stats --zero`, like `ccache -z`)
    /// by removing `stats.json` under the same lock as [`Store::record_all`]
    /// (a missing file reads as zero); entries are untouched.
    pub fn zero_counters(&self) -> Result<()> {
        let layout = self.layout();
        let _lock = FileLock::acquire(&layout.stats_lock_path(), "stats", self.lock_timeout())?;
        match fs_err::remove_file(layout.stats_path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// The counters as last written (zero when there is no or an unparseable `stats.json`).
    pub fn counters(&self) -> Result<Counters> {
        match fs_err::read(self.layout().stats_path()) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Counters::default()),
            Err(e) => Err(e.into()),
        }
    }

    /// The counters plus the number and total size of the entries now in the store.
    pub fn stats(&self) -> Result<Stats> {
        let counters = self.counters()?;
        let entries = self.list()?;
        Ok(Stats {
            counters,
            entries: entries.len() as u64,
            bytes: entries.iter().map(|e| e.size).sum(),
        })
    }
}
