//! The bounds on background precompiled-header work: which PCH builds may start, how many
//! run at once, and how many bytes of PCHs a cache keeps.
//!
//! ```text
//! <root>/v1/pch-demand/<key>          one line per build that needed the PCH and had none
//!                                     (gc removes it [`PCH_DEMAND_MAX_AGE`] after the last)
//! <root>/v1/pch-demand/<key>.too-large  size of a PCH that alone exceeded the cap
//! <root>/v1/locks/pch-build.lock      held by the one PCH compile of this cache
//! <slots dir>/slot-<n>.lock           held by a PCH compile of this user, n < ABICACHE_PCH_JOBS
//! <root>/v1/locks/pch-slots/slot-<n>.lock  the same, when the slots dir is not private
//! ```
//!
//! A PCH build may start when (checked in this order, the first failing rule is the reason
//! it is skipped, [`PchSkip`]):
//! 1. at least two builds have needed it ([`Store::pch_record_need`]; the first never
//!    waits and never starts one);
//! 2. it is known to fit under the cap (a PCH that alone was larger is not rebuilt until
//!    the cap grows);
//! 3. nobody is building it, and no other PCH of this cache is being built;
//! 4. one of the `ABICACHE_PCH_JOBS` machine slots (per user, [`MachineSlots`]) is free.
//!
//! The locks are taken here, in the deciding process, and handed to the builder process
//! ([`PchPermit::into_files`]), which keeps them until it and its compiler exit: a slot is
//! never free while a compile runs, and the kernel frees it when the compile dies.
//!
//! The cap ([`Store::pch_max_size`]): `ABICACHE_PCH_MAX_SIZE`, else a quarter of
//! `ABICACHE_MAX_SIZE`, else [`DEFAULT_PCH_MAX_SIZE`]. [`Store::pch_enforce_cap`] removes
//! the least recently used PCHs until the total fits.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use abicache_settings::StoreSettings;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::layout::{create_dir_0700, ensure_private_dir, validate_key};
use crate::lock::FileLock;
use crate::pch::PchPaths;
use crate::store::Store;

/// The PCH cap when neither `ABICACHE_PCH_MAX_SIZE` nor `ABICACHE_MAX_SIZE` is set: 2 GiB,
/// two `torch/extension.h` PCHs (~790 MB each).
pub const DEFAULT_PCH_MAX_SIZE: u64 = 2 << 30;

/// The default of `ABICACHE_PCH_JOBS`: one PCH compile at a time per user and machine.
pub use abicache_settings::DEFAULT_PCH_JOBS;

/// How many builds must have needed a PCH before it is built.
pub const PCH_NEEDS_BEFORE_BUILD: u32 = 2;

/// How long gc keeps a PCH demand record no build has added to: a header and flag set
/// needed a second time within 30 days of the last need gets its PCH.
pub const PCH_DEMAND_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Why a background PCH build was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PchSkip {
    /// The first build to need it: it is only recorded.
    FirstUse,
    /// It, or another PCH of the same cache, is being built now.
    Busy,
    /// Every machine slot (`ABICACHE_PCH_JOBS`) holds a running PCH compile.
    MachineSlotsFull,
    /// A build of it was larger than the cap on its own.
    OverCap,
}

impl PchSkip {
    /// The reason in words, for warnings and `abicache stats`.
    pub fn describe(self) -> &'static str {
        match self {
            PchSkip::FirstUse => "first use",
            PchSkip::Busy => "another PCH of this cache is being built",
            PchSkip::MachineSlotsFull => "every machine slot (`ABICACHE_PCH_JOBS`) is busy",
            PchSkip::OverCap => "larger than the PCH cap (`ABICACHE_PCH_MAX_SIZE`)",
        }
    }
}

/// The per-user, per-machine semaphore of PCH compiles: `jobs` lock files in `dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSlots {
    /// The directory of the slot locks (owner-only).
    pub dir: PathBuf,
    /// How many PCH compiles may run at once.
    pub jobs: u32,
}

impl MachineSlots {
    /// The slots of this user: `$XDG_RUNTIME_DIR/abicache/pch-slots` when that variable is an
    /// absolute path (`settings.runtime_dir`), else `$TMPDIR/abicache-<uid>/pch-slots`
    /// (`/tmp` without `TMPDIR`); `ABICACHE_PCH_JOBS` of them (`settings.pch_jobs`).
    /// When that directory or its parent is not private (another user
    /// created it on a shared `/tmp`), [`Store::pch_permit`] takes the slot
    /// in the cache's own `v1/locks/pch-slots` instead and says so
    /// ([`PchPermit::notice`]).
    pub fn for_settings(settings: &StoreSettings) -> Result<MachineSlots> {
        let jobs = settings.pch_jobs;
        let dir = match settings.runtime_dir.clone() {
            Some(run) => run.join("abicache").join("pch-slots"),
            None => std::env::temp_dir()
                .join(format!("abicache-{}", crate::layout::current_uid()?))
                .join("pch-slots"),
        };
        Ok(MachineSlots { dir, jobs })
    }

    /// Takes a free slot, if any: `Ok(None)` when all are held.
    fn try_take(&self) -> Result<Option<FileLock>> {
        if let Some(parent) = self.dir.parent() {
            ensure_private_dir(parent)?;
        }
        ensure_private_dir(&self.dir)?;
        for n in 0..self.jobs {
            if let Some(lock) = FileLock::try_acquire(&self.dir.join(format!("slot-{n}.lock")))? {
                return Ok(Some(lock));
            }
        }
        Ok(None)
    }
}

/// Parses `ABICACHE_PCH_JOBS`: a whole number ≥ 1; unset or empty gives
/// [`DEFAULT_PCH_JOBS`]. The rule of `abicache_settings::StoreSettings::pch_jobs`.
pub fn parse_jobs(value: Option<&std::ffi::OsStr>) -> Result<u32> {
    Ok(abicache_settings::parse_pch_jobs(value)?)
}

/// Permission to build one PCH: its paths and the three locks the builder must hold
/// (the PCH's own, the cache's PCH-build lock and a machine slot).
#[derive(Debug)]
pub struct PchPermit {
    /// Where to build and publish it.
    pub paths: PchPaths,
    locks: [FileLock; 3],
    /// The line saying the machine slots were taken from this cache instead
    /// of the shared slots directory, which was refused (see
    /// [`MachineSlots::for_settings`]); `None` when the shared one was used.
    pub notice: Option<String>,
}

impl PchPermit {
    /// The locked files, for the builder process to inherit: the locks are `flock(2)`s on
    /// the open files, so they stay held as long as any process has them open.
    pub fn into_files(self) -> [std::fs::File; 3] {
        self.locks.map(FileLock::into_file)
    }
}

/// The demand marker's `.too-large` record.
#[derive(Debug, Serialize, Deserialize)]
struct TooLarge {
    bytes: u64,
}

impl Store {
    /// The PCH cap in bytes: `ABICACHE_PCH_MAX_SIZE` (via [`Store::with_pch_max_size`] or the
    /// environment), else a quarter of the store's size limit, else [`DEFAULT_PCH_MAX_SIZE`].
    pub fn pch_max_size(&self) -> u64 {
        self.pch_max_size_setting()
            .or_else(|| self.max_size().map(|m| m / 4))
            .unwrap_or(DEFAULT_PCH_MAX_SIZE)
    }

    /// `<root>/v1/pch-demand`.
    fn pch_demand_dir(&self) -> PathBuf {
        self.layout().version_dir().join("pch-demand")
    }

    /// Records that one more build needed `key`'s PCH and had none; returns how many have
    /// (this one included). One `O_APPEND` line per need, so concurrent builds all count.
    pub fn pch_record_need(&self, key: &str) -> Result<u32> {
        validate_key(key)?;
        let dir = self.pch_demand_dir();
        create_dir_0700(&dir)?;
        let path = dir.join(key);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| StoreError::opening("record PCH demand in", &path, e))?;
        file.write_all(format!("{}\n", crate::manifest::unix_now()).as_bytes())
            .map_err(StoreError::io_at("write", &path))?;
        let text = fs_err::read(&path)?;
        Ok(text.iter().filter(|&&b| b == b'\n').count() as u32)
    }

    /// Decides whether `key`'s PCH may be built now (see the module docs for the rules)
    /// given `needs` (from [`Store::pch_record_need`]); on success the locks are held.
    pub fn pch_permit(
        &self,
        key: &str,
        needs: u32,
        slots: &MachineSlots,
    ) -> Result<std::result::Result<PchPermit, PchSkip>> {
        if needs < PCH_NEEDS_BEFORE_BUILD {
            return Ok(Err(PchSkip::FirstUse));
        }
        if let Some(bytes) = self.pch_too_large(key) {
            if bytes > self.pch_max_size() {
                return Ok(Err(PchSkip::OverCap));
            }
        }
        let paths = self.pch_paths(key)?;
        let Some(own) = FileLock::try_acquire(&paths.lock)? else {
            return Ok(Err(PchSkip::Busy));
        };
        let Some(cache) = FileLock::try_acquire(&self.layout().lock_path("pch-build"))? else {
            return Ok(Err(PchSkip::Busy));
        };
        let (slot, notice) = match slots.try_take() {
            Ok(slot) => (slot, None),
            Err(refused) => self.take_private_slot(slots, &refused)?,
        };
        let Some(slot) = slot else {
            return Ok(Err(PchSkip::MachineSlotsFull));
        };
        Ok(Ok(PchPermit {
            paths,
            locks: [own, cache, slot],
            notice,
        }))
    }

    /// A slot of `slots.jobs` in `<root>/v1/locks/pch-slots` (this cache,
    /// already checked private), when the shared slots directory was refused
    /// (`refused`): on a shared `/tmp` another user can create
    /// `abicache-<uid>` first. Returns the slot and the line saying so.
    fn take_private_slot(
        &self,
        slots: &MachineSlots,
        refused: &StoreError,
    ) -> Result<(Option<FileLock>, Option<String>)> {
        let private = MachineSlots {
            dir: self.layout().locks_dir().join("pch-slots"),
            jobs: slots.jobs,
        };
        let why = match refused {
            StoreError::ForeignOwner { path, owner, .. } => {
                format!("`{}` belongs to uid {owner}", path.display())
            }
            StoreError::InsecureMode { path, mode } => {
                format!(
                    "`{}` has mode {mode:04o}, writable by others",
                    path.display()
                )
            }
            other => other.to_string(),
        };
        let notice = format!(
            "the PCH slots directory `{}` cannot be used ({why}); using `{}` instead, so \
             `ABICACHE_PCH_JOBS` bounds this cache's PCH compiles apart from other caches'. \
             Set `XDG_RUNTIME_DIR` (or `TMPDIR`) to a directory only you can write",
            slots.dir.display(),
            private.dir.display()
        );
        Ok((private.try_take()?, Some(notice)))
    }

    /// The size recorded when a PCH of `key` was removed for being larger than the cap.
    fn pch_too_large(&self, key: &str) -> Option<u64> {
        let text = std::fs::read(self.pch_demand_dir().join(format!("{key}.too-large"))).ok()?;
        serde_json::from_slice::<TooLarge>(&text)
            .ok()
            .map(|t| t.bytes)
    }

    /// Removes the least recently used PCH directories (failed builds' logs first once
    /// they expired) until their total is at most [`Store::pch_max_size`]. A PCH that is
    /// over the cap on its own is removed too and remembered, so it is not rebuilt until
    /// the cap grows. Returns the removed directories. Best effort.
    pub fn pch_enforce_cap(&self) -> Vec<PathBuf> {
        let cap = self.pch_max_size();
        let dirs = self.pch_dirs_oldest_first();
        let mut total: u64 = dirs.iter().map(|d| d.1).sum();
        let mut removed = Vec::new();
        let last = dirs.len();
        for (n, (dir, size, _)) in dirs.into_iter().enumerate() {
            if total <= cap {
                break;
            }
            let Some(key) = dir.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
                continue;
            };
            let key = key.trim_end_matches(".failed");
            if n + 1 == last && size > cap {
                self.pch_remember_too_large(key, size);
            }
            if self.pch_remove(key).is_ok() {
                total = total.saturating_sub(size);
                removed.push(dir);
            }
        }
        removed
    }

    /// Removes the PCH demand records no build added to within [`PCH_DEMAND_MAX_AGE`],
    /// and temporary files an interrupted write left, once past the gc grace. The
    /// records of PCHs too large for the cap stay (until the cap grows, they are what
    /// stops a rebuild). Returns how many files were removed; best effort.
    pub(crate) fn gc_pch_demand(&self) -> usize {
        let Ok(rd) = std::fs::read_dir(self.pch_demand_dir()) else {
            return 0;
        };
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for entry in rd.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !meta.is_file() || name.ends_with(".too-large") {
                continue;
            }
            let modified = meta.modified().unwrap_or(now);
            let expired = if name.ends_with(".tmp") {
                !self.is_recent(modified)
            } else {
                now.duration_since(modified)
                    .is_ok_and(|age| age > PCH_DEMAND_MAX_AGE)
            };
            if expired && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    fn pch_remember_too_large(&self, key: &str, bytes: u64) {
        let dir = self.pch_demand_dir();
        if create_dir_0700(&dir).is_err() {
            return;
        }
        let text = serde_json::to_vec(&TooLarge { bytes }).unwrap_or_default();
        let _ = write_small(&dir.join(format!("{key}.too-large")), &text);
    }
}

/// Writes a small file through a temporary name and a rename.
fn write_small(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn pch_jobs_parse_whole_numbers_of_at_least_one() {
        assert_eq!(parse_jobs(None).unwrap(), DEFAULT_PCH_JOBS);
        assert_eq!(parse_jobs(Some(OsStr::new(""))).unwrap(), DEFAULT_PCH_JOBS);
        assert_eq!(parse_jobs(Some(OsStr::new("3"))).unwrap(), 3);
        let err = parse_jobs(Some(OsStr::new("0"))).unwrap_err().to_string();
        assert!(err.contains("ABICACHE_PCH_JOBS"), "{err}");
        assert!(parse_jobs(Some(OsStr::new("two"))).is_err());
    }
}
