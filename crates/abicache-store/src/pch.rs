//! Where precompiled headers live, kept like objects and entries: one directory per
//! PCH key, built privately and renamed into place, verified before use, evicted by gc.
//!
//! ```text
//! <root>/v1/pch/<key>/{abicache-pch.h, abicache-pch.h.gch, abicache-pch.d, manifest.json, last-used}
//! <root>/v1/pch/<key>.failed/             a build that failed (its compiler log); not retried
//! <root>/v1/tmp/pch-<key>.<suffix>/       a build in progress
//! <root>/v1/locks/pch-<key>.lock          held while it is built or adopted
//! ```
//!
//! A builder (the build crate, in a background process) renames its finished directory
//! to `pch/<key>` *without* a manifest. The first lookup that finds it "adopts" it under
//! the lock: it hashes every file (size and BLAKE3), records the stamps (size and mtime)
//! of the headers it was compiled from, and writes `manifest.json` atomically. Only a
//! directory with a manifest is ever handed out, and only after every file passed
//! [`abicache_fs::verify_file`] (a trusted stamp skips the re-hash) and every header it was
//! built from still has its recorded size and mtime; anything else is removed and reported.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use abicache_fs::{verify_file, Expected, FileStamp, Follow};
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::layout::{create_dir_0700, validate_key, LAST_USED_FILE, MANIFEST_FILE};
use crate::lock::FileLock;
use crate::store::{dir_size, Store};

/// What [`Store::pch_lookup`] found for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PchLookup {
    /// A verified PCH directory, ready to pass to the compiler.
    Ready(PathBuf),
    /// A finished build not yet adopted: parse its dependency list and call
    /// [`Store::pch_adopt`].
    Unadopted(PathBuf),
    /// Another process is building it right now.
    Busy,
    /// An earlier build failed; its directory holds the compiler's log. Not retried until
    /// it is removed (`abicache gc` removes it after a day).
    Failed(PathBuf),
    /// Nothing: neither built nor being built.
    Missing,
    /// It was there but corrupt or stale, and was removed; the warning says why.
    Removed(String),
}

/// A header the PCH was compiled from, as it was then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DepStamp {
    path: PathBuf,
    size: u64,
    mtime_ns: i64,
}

/// One file of the PCH directory, as adopted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PchFile {
    name: String,
    size: u64,
    blake3: String,
    #[serde(default)]
    stamp: Option<FileStamp>,
}

/// `manifest.json` of a PCH directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PchManifest {
    key: String,
    files: Vec<PchFile>,
    deps: Vec<DepStamp>,
    created: u64,
}

/// The paths a PCH build uses, for the build crate's `PchSlot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PchPaths {
    /// `<root>/v1/locks/pch-<key>.lock`.
    pub lock: PathBuf,
    /// A fresh `<root>/v1/tmp/pch-<key>.<suffix>` (not created).
    pub temp_dir: PathBuf,
    /// `<root>/v1/pch/<key>`.
    pub dir: PathBuf,
    /// `<root>/v1/pch/<key>.failed`.
    pub failed_dir: PathBuf,
}

/// A failed PCH build is retried after this long (gc removes its directory).
pub const PCH_FAILED_RETRY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl Store {
    /// `<root>/v1/pch`.
    pub fn pch_root(&self) -> PathBuf {
        self.layout().version_dir().join("pch")
    }

    /// The paths of `key`'s PCH; creates `v1/pch` (owner-only).
    pub fn pch_paths(&self, key: &str) -> Result<PchPaths> {
        validate_key(key)?;
        create_dir_0700(&self.pch_root())?;
        let lock_name = pch_lock_name(key);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Ok(PchPaths {
            lock: self.layout().lock_path(&lock_name),
            temp_dir: self
                .layout()
                .tmp_dir()
                .join(format!("{lock_name}.{}-{nanos}", std::process::id())),
            dir: self.pch_root().join(key),
            failed_dir: self.pch_root().join(format!("{key}.failed")),
        })
    }

    /// Looks up `key`'s PCH: verified and ready, waiting for adoption, being built,
    /// failed, missing, or removed because it was corrupt or stale. Relative header paths
    /// it was built from are checked under `base` (the directory compilers run in).
    pub fn pch_lookup(&self, key: &str, base: &Path) -> Result<PchLookup> {
        let paths = self.pch_paths(key)?;
        if !paths.dir.is_dir() {
            if paths.failed_dir.is_dir() {
                return Ok(PchLookup::Failed(paths.failed_dir));
            }
            return Ok(match FileLock::try_acquire(&paths.lock)? {
                Some(_) => PchLookup::Missing,
                None => PchLookup::Busy,
            });
        }
        let manifest_path = paths.dir.join(MANIFEST_FILE);
        let Ok(text) = std::fs::read_to_string(&manifest_path) else {
            return Ok(PchLookup::Unadopted(paths.dir));
        };
        let problem = match serde_json::from_str::<PchManifest>(&text) {
            Err(e) => format!("unreadable manifest ({e})"),
            Ok(manifest) if manifest.key != key => "manifest of another key".to_string(),
            Ok(mut manifest) => match check(&paths.dir, &mut manifest, base) {
                Ok(restamped) => {
                    if restamped {
                        // Best effort: the next lookup re-hashes when this fails.
                        let _ = write_manifest(&paths.dir, &manifest);
                    }
                    touch(&paths.dir.join(LAST_USED_FILE));
                    return Ok(PchLookup::Ready(paths.dir));
                }
                Err(problem) => problem,
            },
        };
        self.pch_remove(key)?;
        Ok(PchLookup::Removed(format!(
            "removed precompiled header `{}`: {problem}; it is rebuilt in the background",
            paths.dir.display()
        )))
    }

    /// Adopts a finished PCH build: records the size and BLAKE3 of its files and the
    /// stamps of `deps` (the headers it was compiled from), then writes its manifest
    /// atomically. Relative `deps` are relative to `base` and recorded as given, so a
    /// later check looks at the same relative file under its own `base`. Returns
    /// [`PchLookup::Busy`] when another process holds its lock.
    pub fn pch_adopt(&self, key: &str, deps: &[PathBuf], base: &Path) -> Result<PchLookup> {
        let paths = self.pch_paths(key)?;
        let Some(_lock) = FileLock::try_acquire(&paths.lock)? else {
            return Ok(PchLookup::Busy);
        };
        if paths.dir.join(MANIFEST_FILE).is_file() {
            return self.pch_lookup(key, base);
        }
        let mut files = Vec::new();
        let rd = fs_err::read_dir(&paths.dir)?;
        for entry in rd.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == LAST_USED_FILE {
                continue;
            }
            let path = entry.path();
            let (file, meta) = abicache_fs::open_regular(&path, Follow::No)
                .map_err(|e| StoreError::io_at("adopt", path.clone())(std::io::Error::other(e)))?;
            let blake3 = abicache_fs::hash_reader(&file)
                .map_err(|e| StoreError::io_at("hash", path.clone())(e))?;
            files.push(PchFile {
                name,
                size: meta.len(),
                blake3,
                stamp: FileStamp::trusted(&meta, SystemTime::now()),
            });
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        let mut dep_stamps = Vec::with_capacity(deps.len());
        for dep in deps {
            let Ok(meta) = std::fs::metadata(base.join(dep)) else {
                continue; // gone already: nothing to compare later
            };
            dep_stamps.push(DepStamp {
                path: dep.clone(),
                size: meta.len(),
                mtime_ns: FileStamp::of(&meta).mtime_ns,
            });
        }
        let manifest = PchManifest {
            key: key.to_string(),
            files,
            deps: dep_stamps,
            created: crate::manifest::unix_now(),
        };
        write_manifest(&paths.dir, &manifest)?;
        drop(_lock);
        self.pch_lookup(key, base)
    }

    /// Removes `key`'s PCH directory (and a failed one), moved aside first so it vanishes
    /// at once. Best effort on the deletion itself.
    pub fn pch_remove(&self, key: &str) -> Result<()> {
        let paths = self.pch_paths(key)?;
        for dir in [paths.dir, paths.failed_dir] {
            let trash = self.trash_path(&pch_lock_name(key));
            match std::fs::rename(&dir, &trash) {
                Ok(()) => {
                    let _ = std::fs::remove_dir_all(&trash);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io_at("move aside", dir)(e)),
            }
        }
        Ok(())
    }

    /// Every PCH directory with its size and last use (failed builds older than
    /// [`PCH_FAILED_RETRY`] count as used at the epoch, so gc removes them first).
    pub(crate) fn pch_dirs_oldest_first(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let Ok(rd) = std::fs::read_dir(self.pch_root()) else {
            return Vec::new();
        };
        let mut out: Vec<(PathBuf, u64, SystemTime)> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| {
                let dir = e.path();
                let used = std::fs::metadata(dir.join(LAST_USED_FILE))
                    .or_else(|_| e.metadata())
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let failed = dir.extension().is_some_and(|x| x == "failed");
                let expired =
                    SystemTime::now().duration_since(used).unwrap_or_default() > PCH_FAILED_RETRY;
                let used = if failed && expired {
                    SystemTime::UNIX_EPOCH
                } else {
                    used
                };
                (dir.clone(), dir_size(&dir), used)
            })
            .collect();
        out.sort_by(|a, b| a.2.cmp(&b.2).then(a.0.cmp(&b.0)));
        out
    }
}

/// The lock and temp-dir name of a PCH key (`pch-<key>`), distinct from entry keys.
fn pch_lock_name(key: &str) -> String {
    format!("pch-{key}")
}

/// Verifies every file and dependency of a PCH; `Ok(true)` when a stamp was refreshed.
fn check(dir: &Path, manifest: &mut PchManifest, base: &Path) -> std::result::Result<bool, String> {
    let mut restamped = false;
    for file in &mut manifest.files {
        let expected = Expected {
            size: file.size,
            blake3: file.blake3.clone(),
        };
        let checked = verify_file(
            &dir.join(&file.name),
            &expected,
            file.stamp.as_ref(),
            Follow::No,
        )
        .map_err(|e| format!("`{}` is corrupt ({e})", file.name))?;
        if checked.rehashed {
            restamped |= checked.stamp.is_some();
            file.stamp = checked.stamp;
        }
    }
    for dep in &manifest.deps {
        let now =
            std::fs::metadata(base.join(&dep.path)).map(|m| (m.len(), FileStamp::of(&m).mtime_ns));
        if now.ok() != Some((dep.size, dep.mtime_ns)) {
            return Err(format!(
                "header `{}` changed since it was precompiled",
                dep.path.display()
            ));
        }
    }
    Ok(restamped)
}

/// Writes `manifest.json` through a temporary file, fsynced, renamed into place.
fn write_manifest(dir: &Path, manifest: &PchManifest) -> Result<()> {
    let temp = dir.join(format!(".{MANIFEST_FILE}.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(manifest).map_err(|e| {
        StoreError::io_at("serialise", dir.join(MANIFEST_FILE))(std::io::Error::other(e))
    })?;
    {
        use std::io::Write;
        let mut f = fs_err::File::create(&temp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    fs_err::rename(&temp, dir.join(MANIFEST_FILE))?;
    Ok(())
}

fn touch(path: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
    {
        let _ = f.set_modified(SystemTime::now());
    }
}
