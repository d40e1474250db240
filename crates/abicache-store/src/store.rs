//! The local store: open, verified lookup, one build per key, list and remove.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use abicache_fs::{read_bounded, verify_file, Expected, FileStamp, Follow};
use abicache_settings::StoreSettings;

use crate::entry_stamp;
use crate::error::{Result, StoreError};
use crate::key_claim::KeyClaim;
use crate::last_used;
use crate::layout::{
    current_uid, insecurity, trusted_owner, validate_key, Layout, MANIFEST_FILE, MANIFEST_FORMAT,
};
use crate::manifest::{Manifest, MAX_MANIFEST_SIZE};
use crate::objects::ObjectCache;
use crate::publish::BuildGuard;
use crate::shared_mode::CacheMode;
use crate::warning::{Corruption, StoreWarning};

/// A handle on one cache root. Cheap to clone; all state is on disk, so any
/// number of handles in any number of processes may share a root.
#[derive(Clone, Debug)]
pub struct Store {
    layout: Layout,
    lock_timeout: Duration,
    max_size: Option<u64>,
    pch_max_size: Option<u64>,
    gc_grace: Duration,
    trusted_signers: std::sync::Arc<[String]>,
    mode: std::sync::Arc<CacheMode>,
    lease_timeout: Duration,
}

/// A verified cache entry: its manifest was readable and its library's size
/// and BLAKE3 matched the manifest when it was looked up.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The entry directory, `<root>/v1/entries/<key>`.
    pub dir: PathBuf,
    /// The library to load.
    pub library: PathBuf,
    /// The entry's manifest.
    pub manifest: Manifest,
    /// True when this lookup read and hashed the library; false when the
    /// stamp of an earlier full check still matched (or when just published).
    pub rehashed: bool,
    /// The `fstat` stamp of the library file that was verified (hashed,
    /// stamp-checked or just published), taken from its descriptor: a
    /// loader that opens [`Hit::library`] loads the verified bytes only when
    /// its descriptor has this stamp (a file renamed into place since has
    /// another). `None` when the file changed while it was read.
    pub stamp: Option<FileStamp>,
}

/// The answer of [`Store::lookup`]: a verified hit or a miss, plus warnings
/// about corrupt entries found (and removed) on the way, for the caller to print.
#[derive(Debug, Default)]
#[must_use]
pub struct Lookup {
    /// The verified entry, if any.
    pub hit: Option<Hit>,
    /// Corrupt entries found; never returned as a hit.
    pub warnings: Vec<StoreWarning>,
}

/// The answer of [`Store::lookup_or_lock`].
#[derive(Debug)]
#[must_use]
pub enum Claim {
    /// The entry exists (possibly published by the process we waited for).
    Hit {
        /// The verified entry.
        hit: Hit,
        /// Corrupt entries found on the way.
        warnings: Vec<StoreWarning>,
    },
    /// The entry does not exist and this process holds the key's lock: build
    /// into [`BuildGuard::temp_dir`] and [`BuildGuard::publish`].
    Build {
        /// The lock and private build directory.
        guard: BuildGuard,
        /// Corrupt entries found on the way.
        warnings: Vec<StoreWarning>,
    },
}

/// One entry as listed by [`Store::list`] (for `abicache ls`).
#[derive(Clone, Debug)]
pub struct EntryInfo {
    /// The cache key.
    pub key: String,
    /// The extension's name.
    pub name: String,
    /// Bytes on disk of all files in the entry directory.
    pub size: u64,
    /// When it was built (Unix seconds, from the manifest).
    pub created: u64,
    /// When it was last hit (mtime of `last-used`; the manifest's mtime if absent).
    pub last_used: SystemTime,
    /// The entry directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
}

/// True when `target` names the entry with key `key`: the whole key, or a
/// prefix of it of at least 8 characters. The one rule behind `rm`, `push`
/// and `export` (with [`EntryInfo::matches`], which also accepts the name).
pub fn key_matches(key: &str, target: &str) -> bool {
    key == target || (target.len() >= 8 && key.starts_with(target))
}

impl EntryInfo {
    /// True when `target` is this entry's name, key, or key prefix (≥ 8 characters).
    pub fn matches(&self, target: &str) -> bool {
        self.name == target || key_matches(&self.key, target)
    }
}

/// What verification of an entry directory found.
pub(crate) enum Verified {
    Hit(Box<Hit>),
    /// No entry directory, or one without `manifest.json` (it does not exist).
    Absent,
    Corrupt(Corruption),
}

impl Store {
    /// Opens (creating if needed) the cache at `root` with `settings` (the
    /// lock time-out, size bounds, gc grace, shared mode and lease timeout;
    /// its `root` is not used): creates the layout owner-only, refuses an
    /// insecure root (see [`Layout::create`]), decides the mode
    /// ([`CacheMode::decide`]: `statfs` of the root under
    /// `settings.shared`), and removes temporary directories left by dead
    /// processes. Reads no variable.
    pub fn open_with(root: impl Into<PathBuf>, settings: &StoreSettings) -> Result<Store> {
        let layout = Layout::new(root);
        layout.create()?;
        let mode = CacheMode::decide(layout.root(), settings.shared);
        let store = Store {
            layout,
            lock_timeout: settings.lock_timeout,
            max_size: settings.max_size,
            pch_max_size: settings.pch_max_size,
            gc_grace: settings.gc_grace,
            trusted_signers: std::sync::Arc::from(Vec::new()),
            mode: std::sync::Arc::new(mode),
            lease_timeout: settings.lease_timeout,
        };
        store.clean_stale_temp_dirs();
        Ok(store)
    }

    /// [`Store::open_with`] at the root `settings` resolved; an error
    /// naming the variables when none applies ([`StoreError::NoCacheDir`]).
    pub fn open_configured(settings: &StoreSettings) -> Result<Store> {
        let root = settings.root.clone().ok_or(StoreError::NoCacheDir)?;
        Self::open_with(root, settings)
    }

    /// [`Store::open_with`] the store settings of this process's
    /// environment (`abicache_settings::StoreSettings::from_env`, which
    /// names a variable that cannot be used): for tools and tests that
    /// resolve nothing else. abicache's entry points resolve all settings
    /// once and call [`Store::open_with`].
    pub fn open(root: impl Into<PathBuf>) -> Result<Store> {
        Self::open_with(root, &StoreSettings::from_env()?)
    }

    /// [`Store::open_configured`] with the store settings of this process's
    /// environment (its root: `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache`,
    /// else `~/.cache/abicache`).
    pub fn open_default() -> Result<Store> {
        Self::open_configured(&StoreSettings::from_env()?)
    }

    /// Serves a pulled entry (one with a [`crate::Provenance`]) only when one
    /// of `signers` (public keys, as `ABICACHE_TRUSTED_KEYS` lists them)
    /// signed it; an unsigned or otherwise signed one is discarded as
    /// corrupt and rebuilt. Empty (the default): every entry is served.
    pub fn with_trusted_signers(mut self, signers: Vec<String>) -> Self {
        self.trusted_signers = signers.into();
        self
    }

    /// The trusted signers given to [`Store::with_trusted_signers`].
    pub fn trusted_signers(&self) -> &[String] {
        &self.trusted_signers
    }

    /// Whether this store runs in shared mode, and why (decided at open).
    pub fn mode(&self) -> &CacheMode {
        &self.mode
    }

    /// Overrides the mode decided at open (tests; tools that know better).
    pub fn with_mode(mut self, mode: CacheMode) -> Self {
        self.mode = std::sync::Arc::new(mode);
        self
    }

    /// How long a lease (shared mode) stays valid without being refreshed
    /// (`ABICACHE_LEASE_TIMEOUT`, default 60 s).
    pub fn lease_timeout(&self) -> Duration {
        self.lease_timeout
    }

    /// Overrides the lease timeout (default: `ABICACHE_LEASE_TIMEOUT`).
    pub fn with_lease_timeout(mut self, timeout: Duration) -> Self {
        self.lease_timeout = timeout;
        self
    }

    /// Overrides the bounded wait for key locks (default: `ABICACHE_LOCK_TIMEOUT`).
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Overrides the size the store is collected to after each publish
    /// (default: `ABICACHE_MAX_SIZE`; `None` never collects automatically).
    pub fn with_max_size(mut self, max_bytes: Option<u64>) -> Self {
        self.max_size = max_bytes;
        self
    }

    /// Overrides the bytes of precompiled headers kept (default: `ABICACHE_PCH_MAX_SIZE`;
    /// `None`: a quarter of the size limit, see [`Store::pch_max_size`]).
    pub fn with_pch_max_size(mut self, max_bytes: Option<u64>) -> Self {
        self.pch_max_size = max_bytes;
        self
    }

    /// The PCH cap given by `ABICACHE_PCH_MAX_SIZE` or [`Store::with_pch_max_size`], if any.
    pub(crate) fn pch_max_size_setting(&self) -> Option<u64> {
        self.pch_max_size
    }

    /// Overrides how long after its last use gc spares an entry or object
    /// (default: `ABICACHE_GC_GRACE`, else [`crate::DEFAULT_GC_GRACE`]).
    pub fn with_gc_grace(mut self, grace: Duration) -> Self {
        self.gc_grace = grace;
        self
    }

    /// How long after its last use gc spares an entry or object.
    pub fn gc_grace(&self) -> Duration {
        self.gc_grace
    }

    /// The object cache under `<root>/v1/objects`.
    pub fn objects(&self) -> ObjectCache {
        ObjectCache::new(self.layout.objects_dir(), self.layout.tmp_dir())
    }

    /// The paths of this store.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The cache root.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }
    /// `<root>/v1/objects`, reserved for the build crate's object cache.
    pub fn objects_dir(&self) -> PathBuf {
        self.layout.objects_dir()
    }
    /// The bounded wait for key locks.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }
    /// The size collected to after each publish, if any.
    pub fn max_size(&self) -> Option<u64> {
        self.max_size
    }

    /// Looks `key` up. A hit has a private entry directory (owned by this
    /// user, not writable by others, not a symlink), a readable manifest for
    /// this key and a library whose size and BLAKE3 match it: hashed in
    /// full unless the stamp of an earlier full check still matches (see
    /// [`abicache_fs::verify_file`]); a trusted new stamp is recorded, best
    /// effort. Its `last-used` time is touched *before* it is checked (under
    /// a shared lock of that file), so a concurrent gc (which re-reads it
    /// under the key's lock and holds it exclusively until the removal)
    /// spares it for [`Store::gc_grace`], or has removed it and this misses.
    /// A corrupt entry is never a hit: it is removed (under its lock; left
    /// alone if another process holds the lock, since that process is
    /// replacing or removing it) and reported in [`Lookup::warnings`].
    /// Counts nothing: the caller records [`crate::Event`]s it wants counted.
    pub fn lookup(&self, key: &str) -> Result<Lookup> {
        self.lookup_impl(key, false)
    }

    /// Lookup by a caller that already holds `key`'s lock (`held`), or not.
    pub(crate) fn lookup_impl(&self, key: &str, held: bool) -> Result<Lookup> {
        validate_key(key)?;
        let dir = self.layout.entry_dir(key);
        let problem = match self.verify(key, &dir) {
            Verified::Hit(hit) => {
                return Ok(Lookup {
                    hit: Some(*hit),
                    warnings: vec![],
                })
            }
            Verified::Absent => return Ok(Lookup::default()),
            Verified::Corrupt(problem) => problem,
        };
        if self.mode.shared && problem.may_be_half_visible() {
            // Another node may be publishing or replacing it, or this
            // node's caches lag behind: a miss for this lookup, never
            // corruption to delete (a later lookup sees the entry whole).
            return Ok(Lookup::default());
        }
        let mut warning = StoreWarning {
            key: key.to_owned(),
            dir: dir.clone(),
            problem,
            removed: false,
        };
        let lock = if held { None } else { self.try_claim_key(key)? };
        if held || lock.is_some() {
            // Re-verify under the lock: a builder may have replaced the entry meanwhile.
            match self.verify(key, &dir) {
                Verified::Hit(hit) => {
                    return Ok(Lookup {
                        hit: Some(*hit),
                        warnings: vec![],
                    })
                }
                Verified::Absent => {}
                Verified::Corrupt(problem) => {
                    warning.problem = problem;
                    self.discard_entry(key)?;
                    warning.removed = true;
                }
            }
        }
        Ok(Lookup {
            hit: None,
            warnings: vec![warning],
        })
    }

    /// Marks the entry directory of `key` used, then checks it (see
    /// [`Store::lookup`]); records a new trusted stamp, best effort.
    pub(crate) fn verify(&self, key: &str, dir: &Path) -> Verified {
        let meta = match std::fs::symlink_metadata(dir) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Verified::Absent,
            Err(e) => {
                return Verified::Corrupt(Corruption::UnreadableManifest {
                    error: format!("cannot inspect `{}`: {e}", dir.display()),
                })
            }
        };
        let problem = if meta.is_dir() || meta.is_symlink() {
            current_uid()
                .ok()
                .and_then(|uid| insecurity(&meta, uid))
                .map(|i| i.to_string())
        } else {
            Some("it is not a directory".to_owned())
        };
        if let Some(reason) = problem {
            return Verified::Corrupt(Corruption::Insecure { reason });
        }
        if !self.trusted_signers.is_empty() {
            let refusal = match crate::Provenance::read(dir) {
                Ok(None) => None,
                Ok(Some(provenance)) => provenance.refusal(&self.trusted_signers),
                Err(reason) => Some(reason),
            };
            if let Some(reason) = refusal {
                return Verified::Corrupt(Corruption::Insecure { reason });
            }
        }
        if self.mode.shared {
            last_used::touch_shared(dir);
        } else {
            last_used::touch(dir);
        }
        let manifest_path = dir.join(MANIFEST_FILE);
        let unknown_requirements = || {
            read_bounded(&manifest_path, Follow::No, MAX_MANIFEST_SIZE)
                .ok()
                .and_then(|bytes| Manifest::unknown_requirements(&bytes))
                .map(|format| Corruption::UnknownRequirements { format })
        };
        let manifest = match Manifest::read(&manifest_path) {
            Ok(m) => m,
            Err(e) if e.is_not_found() => return Verified::Absent,
            Err(e) => {
                return Verified::Corrupt(unknown_requirements().unwrap_or(
                    Corruption::UnreadableManifest {
                        error: e.to_string(),
                    },
                ))
            }
        };
        if manifest.format < MANIFEST_FORMAT {
            return Verified::Corrupt(Corruption::UnknownRequirements {
                format: manifest.format,
            });
        }
        if manifest.format != MANIFEST_FORMAT
            || manifest.key != key
            || !valid_library_name(&manifest.library)
        {
            return Verified::Corrupt(Corruption::InconsistentManifest {
                format: manifest.format,
                key: manifest.key,
                library: manifest.library,
            });
        }
        let library = dir.join(&manifest.library);
        let expected = Expected {
            size: manifest.size,
            blake3: manifest.library_blake3.clone(),
        };
        // Shared mode: another node may replace a file behind this node's
        // attribute caches, so a stat stamp proves nothing; every hit
        // hashes the library through the descriptor it verifies.
        let known = if self.mode.shared {
            None
        } else {
            entry_stamp::read(dir)
        };
        let checked = match verify_file(&library, &expected, known.as_ref(), Follow::No) {
            Ok(checked) => checked,
            Err(mismatch) => return Verified::Corrupt(Corruption::of_library(library, mismatch)),
        };
        // Only a file of this user's, that no one else can write and that no
        // other name shares (a hard link elsewhere is a way to write it), is served.
        if let Some(reason) = library_insecurity(&library) {
            return Verified::Corrupt(Corruption::Insecure { reason });
        }
        if let Some(stamp) = checked
            .stamp
            .filter(|s| !self.mode.shared && Some(s) != known.as_ref())
        {
            entry_stamp::write(dir, stamp, &self.layout.tmp_dir());
        }
        Verified::Hit(Box::new(Hit {
            dir: dir.to_owned(),
            library,
            manifest,
            rehashed: checked.rehashed,
            stamp: checked.opened,
        }))
    }

    /// Takes `key`'s claim (waiting at most [`Store::lock_timeout`]: its
    /// lock, or in shared mode its lease, which a dead node's process holds
    /// no longer than [`Store::lease_timeout`]) and a fresh private build
    /// directory. **The caller must call
    /// [`Store::lookup`] again after this returns**: the process it waited
    /// for may have published the entry. [`Store::lookup_or_lock`] does that.
    pub fn begin_build(&self, key: &str) -> Result<BuildGuard> {
        let claim = self.claim_key(key)?;
        BuildGuard::new(self.clone(), key.to_owned(), claim)
    }

    /// Lookup, then (on a miss) lock, then lookup again: either the entry
    /// (perhaps built by the process we waited for) or the lock to build it.
    /// Exactly one of any number of concurrent callers builds a given key.
    pub fn lookup_or_lock(&self, key: &str) -> Result<Claim> {
        if self.mode.shared {
            return self.lookup_or_lease(key);
        }
        let first = self.lookup(key)?;
        let mut warnings = first.warnings;
        if let Some(hit) = first.hit {
            return Ok(Claim::Hit { hit, warnings });
        }
        let guard = self.begin_build(key)?;
        let second = self.lookup_impl(key, true)?;
        warnings.extend(second.warnings);
        Ok(match second.hit {
            Some(hit) => Claim::Hit { hit, warnings },
            None => Claim::Build { guard, warnings },
        })
    }

    /// [`Store::lookup_or_lock`] in shared mode: lookup; on a miss, try the
    /// key's lease; while another process (on any node) holds it fresh,
    /// look up again after a backoff sleep (so waiters take the published
    /// entry without queueing for the lease), for at most
    /// [`Store::lock_timeout`]. Having won the lease, look up once more: the
    /// entry may have been published meanwhile (a hit, no build).
    fn lookup_or_lease(&self, key: &str) -> Result<Claim> {
        validate_key(key)?;
        self.leases_dir()?;
        let path = self.lease_path(key);
        let start = std::time::Instant::now();
        let mut sleep = Duration::from_millis(5);
        let max_sleep =
            (self.lease_timeout / 4).clamp(Duration::from_millis(50), Duration::from_millis(250));
        let mut warnings = Vec::new();
        loop {
            let found = self.lookup(key)?;
            warnings.extend(found.warnings);
            if let Some(hit) = found.hit {
                return Ok(Claim::Hit { hit, warnings });
            }
            let holder = match crate::Lease::try_acquire(&path, self.lease_timeout)? {
                crate::LeaseAttempt::Taken(lease) => {
                    let guard =
                        BuildGuard::new(self.clone(), key.to_owned(), KeyClaim::Lease(lease))?;
                    let again = self.lookup_impl(key, true)?;
                    warnings.extend(again.warnings);
                    return Ok(match again.hit {
                        Some(hit) => Claim::Hit { hit, warnings },
                        None => Claim::Build { guard, warnings },
                    });
                }
                crate::LeaseAttempt::Held(holder) => holder,
            };
            let waited = start.elapsed();
            if waited >= self.lock_timeout {
                return Err(StoreError::LockTimeout {
                    key: key.to_owned(),
                    path,
                    timeout: self.lock_timeout,
                    holder: holder.describe(),
                });
            }
            std::thread::sleep(sleep.min(self.lock_timeout - waited));
            sleep = (sleep * 2).min(max_sleep);
        }
    }

    /// Every entry with a readable manifest, sorted by name, most recently used first.
    pub fn list(&self) -> Result<Vec<EntryInfo>> {
        let mut out: Vec<EntryInfo> = self
            .entry_dirs()?
            .into_iter()
            .filter_map(|(key, dir)| self.entry_info(key, dir))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name).then(b.last_used.cmp(&a.last_used)));
        Ok(out)
    }

    /// The entries built for the extension `name`, most recently used first
    /// (what `abicache explain` diffs a new payload against).
    pub fn find_by_name(&self, name: &str) -> Result<Vec<EntryInfo>> {
        let mut out: Vec<EntryInfo> = self
            .list()?
            .into_iter()
            .filter(|e| e.name == name)
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.last_used));
        Ok(out)
    }

    /// Removes the entries whose key is `name_or_key`, whose key starts with
    /// it (at least 8 characters), or whose name is it, each under its lock
    /// (bounded wait). Returns how many were removed.
    pub fn remove(&self, name_or_key: &str) -> Result<usize> {
        let arg = name_or_key;
        let mut keys: Vec<String> = self
            .entry_dirs()?
            .into_iter()
            .filter_map(|(key, dir)| {
                let matches_key = key_matches(&key, arg);
                let matches_name = || {
                    self.entry_info(key.clone(), dir)
                        .is_some_and(|e| e.name == arg)
                };
                (matches_key || matches_name()).then_some(key)
            })
            .collect();
        keys.sort();
        for key in &keys {
            let claim = self.claim_key(key)?;
            self.discard_entry(key)?;
            claim.release_and_clean();
        }
        Ok(keys.len())
    }

    /// Names and paths of all directories under `entries/` with a valid key name.
    pub(crate) fn entry_dirs(&self) -> Result<Vec<(String, PathBuf)>> {
        let mut out = Vec::new();
        for entry in fs_err::read_dir(self.layout.entries_dir())? {
            let entry = entry?;
            let Ok(key) = entry.file_name().into_string() else {
                continue;
            };
            if validate_key(&key).is_ok() && entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.push((key, entry.path()));
            }
        }
        Ok(out)
    }

    /// The listing of one entry directory, or `None` when its manifest is unreadable.
    pub(crate) fn entry_info(&self, key: String, dir: PathBuf) -> Option<EntryInfo> {
        let manifest_path = dir.join(MANIFEST_FILE);
        let manifest = Manifest::read(&manifest_path).ok()?;
        let last_used = last_used::read(&dir);
        Some(EntryInfo {
            key,
            name: manifest.name.clone(),
            size: dir_size(&dir),
            created: manifest.created,
            last_used,
            dir,
            manifest,
        })
    }

    /// Removes `key`'s entry directory, if any: renamed into `tmp/` first so it
    /// vanishes at once, then deleted. The caller holds the key's lock.
    pub(crate) fn discard_entry(&self, key: &str) -> Result<()> {
        let dir = self.layout.entry_dir(key);
        let trash = self.trash_path(key);
        match std::fs::rename(&dir, &trash) {
            Ok(()) => {
                let _ = std::fs::remove_dir_all(&trash);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io_at("move aside", dir)(e)),
        }
    }

    /// A fresh name under `tmp/` for a directory being deleted; it starts
    /// with `<key>.` so stale-temp cleanup recognises it.
    pub(crate) fn trash_path(&self, key: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        self.layout
            .tmp_dir()
            .join(format!("{key}.trash-{}-{nanos}-{n}", std::process::id()))
    }
}

/// A library file name must be a plain name that cannot collide with the entry's own files.
pub(crate) fn valid_library_name(name: &str) -> bool {
    crate::library_name::LibraryName::parse(name).is_ok()
}

/// Why the library at `path` must not be served: owned by another user,
/// writable by group or others, or with more than one link; `None` when fine.
fn library_insecurity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) => return Some(format!("`{}` cannot be inspected: {e}", path.display())),
    };
    let uid = current_uid().ok()?;
    if !trusted_owner(meta.uid(), uid, false) {
        return Some(format!(
            "the library `{}` is owned by uid {}, not by uid {uid} (this process)",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "the library `{}` has mode {:04o}, which lets other users write it",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    if meta.nlink() != 1 {
        return Some(format!(
            "the library `{}` has {} hard links (a second name can write it)",
            path.display(),
            meta.nlink()
        ));
    }
    None
}

/// Hex BLAKE3 of everything `reader` yields.
pub(crate) fn hash_reader(reader: impl std::io::Read) -> std::io::Result<String> {
    abicache_fs::hash_reader(reader)
}

/// Total length of the files under `dir` (recursively; symlinks not followed).
pub(crate) fn dir_size(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
