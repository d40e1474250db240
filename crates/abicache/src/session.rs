//! The pipeline: spec + environment → scan → key → store (hit?) → build →
//! audit → publish. Nothing flows back.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use abicache_build::{
    BuildOptions, BuildPlan, Cancel, Nvcc, Progress, Toolchain, ToolchainEnv, TvmFfiBuild, Unit,
};
use abicache_fs::FileStamp;
use abicache_isa::Requirement;
use abicache_key::{compute_key, native_cpu_flags, Environment, ExtensionKind, ExtensionSpec};
use abicache_scan::{ScanConfig, StatCache};
use abicache_store::{BuildGuard, Claim, Event, Hit, Manifest, Store};
use serde::Serialize;

use crate::covering::{Coverage, CoveringAsk};
use crate::error::{Error, Result, TorchDirProblem};
use crate::key_audit::{audit_against_key, AuditVerdict};
use crate::pch::{default_umbrellas, PchMode, PchPlan};
use crate::prepared::Prepared;
use crate::remote_cache::{RemoteCache, RemoteSlot, RemoteState};
use crate::remote_objects::SharedObjects;
use crate::warning::Warning;
use abicache_remote::RemoteError;
use abicache_settings::Settings;
use sources::{Ask, Candidate, EntrySource, Origin};

mod sources;
mod warm_key;
pub mod warm_load;
pub use warm_key::{key_memos, RememberedKey};
mod write_behind;

pub use warm_load::WARM_RECORD_FORMAT;

/// The stat cache of scanned files' facts, under the store's `v1/`.
const SCAN_FACTS_FILE: &str = "scan-facts.bin";

/// Remembered `-march=native` resolutions, under the store's `v1/`.
const HOST_CPU_DIR: &str = "host-cpu";

/// How a session builds.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionOptions {
    /// Ignore a cached entry and build anew (the new entry replaces it).
    pub rebuild: bool,
    /// Parallel compile jobs; `None` reads `MAX_JOBS`, else the core count.
    pub jobs: Option<usize>,
}

/// One environment and one cache: computes keys and returns ABI-compatible
/// libraries, building each key at most once across processes.
pub struct Session {
    /// The cache, opened on first use (see [`Session::store`]), so a spec
    /// refused by [`Session::validate_spec`] creates nothing on disk.
    store: OnceLock<Store>,
    /// Where the cache is opened: this root, else the settings' root.
    cache_dir: Option<PathBuf>,
    /// The settings resolved before the session was made (default: every
    /// documented default); the session reads no setting itself.
    settings: Arc<Settings>,
    env: Environment,
    site_packages: Vec<PathBuf>,
    toolchain_env: ToolchainEnv,
    arch_list_env: Option<String>,
    options: SessionOptions,
    /// The nvcc found for CUDA keys (a failed search is not remembered).
    nvcc: OnceLock<Nvcc>,
    /// The remote cache: set by [`Session::with_remote`], else resolved from
    /// the environment at the first build (an error is a warning per build).
    remote: Arc<RemoteSlot>,
    /// Stops a running build when set (Ctrl-C from Python).
    cancel: Cancel,
    /// Cache writes left to a thread of their own ([`Session::settle`]).
    writes: write_behind::WriteBehind,
    /// Where a key's entry is looked for, in order: the local cache, the
    /// read-only layers and cache wheels, the remote cache
    /// ([`sources::in_order`]). Each resolves what it needs on its first lookup.
    sources: Vec<Box<dyn EntrySource>>,
    /// The cache wheels given by [`Session::with_layers`], kept to rebuild
    /// the sources when [`Session::with_settings`] replaces the settings.
    wheels: Vec<PathBuf>,
    /// The command a miss names as the one that would build the key
    /// ([`Session::with_build_command`]); `None`: a generic one.
    build_command: Option<String>,
}

/// The answer of [`Session::build`].
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The verified library inside the cache entry.
    pub path: PathBuf,
    /// The cache key.
    pub key: String,
    /// True when no compile or link ran in this call.
    pub hit: bool,
    /// Wall-clock seconds of the whole call.
    pub seconds: f64,
    /// Units compiled by this call (display paths); empty on a hit.
    pub compiled: Vec<String>,
    /// Units whose objects came from the object cache.
    pub cached_units: usize,
    /// Compiled units that were compiled against a precompiled header.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pch_units: Vec<String>,
    /// One line per compiled CUDA unit that compiled in one step rather than
    /// through nvcc's phase split, saying why (`--verbose` prints them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub one_shot: Vec<String>,
    /// True when the library was downloaded from the remote cache in this call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub remote: bool,
    /// Warnings to show the user (corrupt entries removed, audit notes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// The instruction-set extensions the library requires (its
    /// manifest's): [`Outcome::check_cpu`] compares them with this CPU's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub isa: Vec<Requirement>,
    /// The device-code images the library carries (its manifest's:
    /// `sm_80`, `compute_90`; empty for a CPU library):
    /// [`Outcome::check_gpu`] compares them with the visible GPUs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_images: Vec<String>,
    /// The `fstat` stamp of the library's descriptor that was verified (see
    /// [`abicache_store::Hit::stamp`]), serialized
    /// as the list `[dev, ino, size, mtime_ns, ctime_ns]`: a loader opens the
    /// file once, compares its `fstat` with this and loads what it opened
    /// (`/proc/self/fd/N`), never a file put in its place since. `None` when
    /// the file changed while it was verified (the loader then refuses it).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "stamp_as_list"
    )]
    pub library_stamp: Option<FileStamp>,
    /// True when the library is a read-only layer's: its loader then also
    /// accepts one owned by root (`abicache_store::trusted_owner`).
    /// Read in Python by `python/abicache/_native_path.py:open_checked`
    /// (which restates that rule as `python/abicache/_warm_record.py:trusted_owner`),
    /// tied by `tests/python/test_intercept_and_owner_rules.py::test_the_outcome_says_when_a_library_is_a_layers`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub layer: bool,
    /// When the exact key missed and the library is another entry's whose
    /// device code covers the visible GPUs: that entry and why
    /// ([`crate::covering`]). `key` is still the key asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covered_by: Option<Coverage>,
}

/// What [`Session::find_entry`] came to: an entry a source serves, or the
/// key's build lock to build it with.
// One value per lookup, moved once: boxing the entry would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Found {
    /// An entry to serve, and how it covers the GPUs when it was found by
    /// the covering lookup ([`crate::covering`]).
    Entry(Candidate, Option<Coverage>),
    /// No source has it: build it under this lock.
    Build {
        /// The key's build lock.
        guard: BuildGuard,
        /// How the remote answered (it decides the upload).
        remote_state: RemoteState,
    },
}

impl Outcome {
    /// A library that was already built: nothing compiled in this call.
    fn cached(hit: Hit, key: String, started: Instant, warnings: Vec<Warning>) -> Self {
        Outcome {
            library_stamp: hit.stamp,
            path: hit.library,
            isa: hit.manifest.isa,
            device_images: hit.manifest.device_images,
            key,
            hit: true,
            seconds: started.elapsed().as_secs_f64(),
            compiled: Vec::new(),
            cached_units: 0,
            pch_units: Vec::new(),
            one_shot: Vec::new(),
            remote: false,
            warnings,
            layer: false,
            covered_by: None,
        }
    }

    /// The guard before the library is loaded: refuses it, as an
    /// [`ErrorKind::Abi`](crate::ErrorKind::Abi) error naming each missing
    /// extension and the flag that required it, when it requires
    /// instruction-set extensions this CPU lacks (unless
    /// `ABICACHE_ISA_CHECK=0`). `name` is the extension's. Deletes nothing;
    /// costs nothing when the library requires nothing beyond the
    /// compiler's default target.
    pub fn check_cpu(&self, name: &str) -> Result<()> {
        let what = format!("extension `{name}` (`{}`)", self.path.display());
        Ok(abicache_isa::check(&self.isa, &what)?)
    }

    /// The GPU guard before the library is loaded, beside
    /// [`Outcome::check_cpu`]: refuses it, as an
    /// [`ErrorKind::Abi`](crate::ErrorKind::Abi) error naming its images,
    /// each GPU none of them can run, and the arch list to rebuild with, when
    /// a visible GPU can run none of its device code (unless
    /// `ABICACHE_GPU_CHECK=0`; no visible GPU: nothing to check). The
    /// verdict's `jit` says when only PTX serves a GPU (for the verbose).
    /// Reads nothing for a CPU library; the GPUs are asked once per process.
    pub fn check_gpu(&self) -> Result<crate::GpuVerdict> {
        crate::gpu::guard(&self.path, &self.device_images)
    }

    /// Marks the library as a read-only layer's.
    fn layered(self) -> Self {
        Outcome {
            layer: true,
            ..self
        }
    }

    /// Marks the library as downloaded from the remote cache in this call.
    fn downloaded(self) -> Self {
        Outcome {
            remote: true,
            ..self
        }
    }
}

impl Session {
    /// A session for `env` over an already opened `store`. `site_packages`
    /// are searched for NVIDIA's nvcc wheels; by default the parent of
    /// `env.torch_dir`. Its settings are the defaults until
    /// [`Session::with_settings`] gives resolved ones.
    pub fn new(store: Store, env: Environment) -> Self {
        let session = Self::lazy(None, env);
        let signers = crate::remote_cache::trusted_signers(&session.settings.remote);
        let _ = session.store.set(store.with_trusted_signers(signers));
        session
    }

    /// A session for `env` over the cache at `cache_dir` (`None`: the root
    /// of the settings given by [`Session::with_settings`]), which is
    /// opened (and created) only when a build or lookup first needs it: a
    /// spec refused by [`Session::validate_spec`] (a stable target above the
    /// running torch, an invalid spec) leaves nothing on disk.
    pub fn open_lazily(cache_dir: Option<PathBuf>, env: Environment) -> Self {
        Self::lazy(cache_dir, env)
    }

    /// Uses `settings` (resolved and checked up front by
    /// [`abicache_settings::Settings::resolve`]) for the cache, precompiled
    /// headers, the remote cache and the read-only layers. Give it before
    /// [`Session::with_remote`] and before the session is used.
    pub fn with_settings(mut self, settings: Arc<Settings>) -> Self {
        if let Some(store) = self.store.take() {
            let signers = crate::remote_cache::trusted_signers(&settings.remote);
            let _ = self.store.set(store.with_trusted_signers(signers));
        }
        self.sources = sources::in_order(&settings, self.wheels.clone(), &self.remote);
        self.settings = settings;
        self
    }

    /// The settings this session uses.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The read-only layers this session consults (configured layers, then
    /// its cache wheels), unverified: for reading manifests only
    /// (`abicache explain`, a miss's closest entry).
    /// Explains `prepared` against this session's cache, its read-only
    /// layers and cache wheels ([`crate::explain::explain`]): reads manifests
    /// only.
    pub fn explain(&self, prepared: &Prepared) -> Result<crate::explain::Explanation> {
        crate::explain::explain(self.store()?, &self.layers_unverified(), prepared)
    }

    pub(crate) fn layers_unverified(&self) -> Vec<crate::layers::Layer> {
        crate::layers::resolve(&self.settings.layers.readonly_dirs, &self.wheels)
    }

    fn lazy(cache_dir: Option<PathBuf>, env: Environment) -> Self {
        let site_packages = env
            .torch_dir
            .iter()
            .filter_map(|t| t.parent())
            .map(Path::to_path_buf)
            .collect();
        let remote = Arc::new(RemoteSlot::new());
        let settings = Arc::<Settings>::default();
        Session {
            sources: sources::in_order(&settings, Vec::new(), &remote),
            wheels: Vec::new(),
            build_command: None,
            remote,
            store: OnceLock::new(),
            cache_dir,
            settings,
            env,
            site_packages,
            toolchain_env: ToolchainEnv::from_process(),
            arch_list_env: crate::env_vars::var(crate::env_vars::TORCH_CUDA_ARCH_LIST),
            options: SessionOptions::default(),
            nvcc: OnceLock::new(),
            cancel: Cancel::new(),
            writes: write_behind::WriteBehind::default(),
        }
    }

    /// Adds read-only cache layers (cache roots never written: installed
    /// cache wheels), consulted in order after the local cache and after
    /// `ABICACHE_READONLY_DIRS` (see [`crate::layers`]).
    pub fn with_layers(mut self, roots: Vec<PathBuf>) -> Self {
        self.sources = sources::in_order(&self.settings, roots.clone(), &self.remote);
        self.wheels = roots;
        self
    }

    /// The sources a key's entry is looked for in, in the order they are
    /// tried (`local cache`, `read-only layers`, `remote cache`); only the
    /// local cache's entries skip the gate ([`crate::gate`]).
    pub fn source_order(&self) -> Vec<&'static str> {
        self.sources.iter().map(|s| s.describe()).collect()
    }

    /// The command that builds this session's extensions where compiling is
    /// allowed (`abicache build SPEC --extension NAME …`), which a cache
    /// miss names (offline mode's error, the miss report). Without it a
    /// miss names running the program once with `ABICACHE_OFFLINE=warn`, or
    /// recording it into a prebuild plan.
    pub fn with_build_command(mut self, command: String) -> Self {
        self.build_command = Some(command);
        self
    }

    /// Replaces the directories searched for NVIDIA's pip wheels.
    pub fn with_site_packages(mut self, site_packages: Vec<PathBuf>) -> Self {
        self.site_packages = site_packages;
        self
    }

    /// Sets the build options.
    pub fn with_options(mut self, options: SessionOptions) -> Self {
        self.options = options;
        self
    }

    /// Builds stop when `cancel` is set: compilers are stopped, the build
    /// directory is removed, the key's lock released, and
    /// [`Session::build`] returns an error whose kind is
    /// [`crate::ErrorKind::Interrupted`].
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    /// Uses `remote` as the remote cache (`None`: none, whatever the
    /// settings say) instead of opening the settings' remote at the first build.
    pub fn with_remote(self, remote: Option<RemoteCache>) -> Self {
        let _ = self.remote.set(Ok(remote));
        self
    }

    /// The remote cache the settings name, opened on first use; a key that
    /// cannot be read is returned for the caller's warning.
    fn remote(&self) -> std::result::Result<Option<&RemoteCache>, Arc<RemoteError>> {
        crate::remote_cache::resolve(&self.remote, &self.settings.remote)
    }

    /// Where the stat cache of scanned files lives (`<cache>/v1/scan-facts.bin`);
    /// opens the cache.
    pub fn scan_facts_path(&self) -> Result<PathBuf> {
        Ok(self.store()?.layout().version_dir().join(SCAN_FACTS_FILE))
    }

    /// The cache this session uses, opened (and created) on the first call.
    pub fn store(&self) -> Result<&Store> {
        if let Some(store) = self.store.get() {
            return Ok(store);
        }
        let root = self
            .cache_root()
            .ok_or(abicache_store::StoreError::NoCacheDir)?;
        let store = Store::open_with(root, &self.settings.store)?
            .with_trusted_signers(crate::remote_cache::trusted_signers(&self.settings.remote));
        // Another thread may have won the race: both opened the same root.
        Ok(self.store.get_or_init(|| store))
    }

    /// Where the cache is: the session's root, else the settings'.
    fn cache_root(&self) -> Option<&Path> {
        self.cache_dir
            .as_deref()
            .or(self.settings.store.root.as_deref())
    }

    /// The cache once [`Session::build`] has opened it.
    fn opened(&self) -> &Store {
        self.store
            .get()
            .expect("the store is opened before it is used")
    }

    /// The checks a spec passes before anything is read or created: under
    /// a stable target the running torch must reach the target's runtime
    /// floor (an unparseable torch version is refused too), then the
    /// spec's names and sources must be valid. The one home of both rules
    /// for the CLI and the Python package.
    pub fn validate_spec(&self, spec: &ExtensionSpec) -> Result<()> {
        Ok(spec.check_for(&self.env)?)
    }

    /// The environment as given (before per-extension completion).
    pub fn environment(&self) -> &Environment {
        &self.env
    }

    /// Scans and keys `spec` (paths in it absolute, or relative to the
    /// current directory); `root` is the fingerprint root. Under a stable
    /// target a too-old or unparseable torch is refused first, before any
    /// file is read or any cache is looked at.
    ///
    /// Files whose stat stamp matches the stat cache's are not read again
    /// (the report is the cold scan's). What the scan learnt (the stat
    /// cache, and the key memo that makes the next key one `stat` per
    /// dependency) is written on another thread once the key is known
    /// ([`Session::settle`] waits for it; so does dropping the session).
    /// Writing is best effort: a read-only or full cache only loses the
    /// speed-up.
    pub fn prepare(&self, spec: &ExtensionSpec, root: &Path) -> Result<Prepared> {
        self.validate_spec(spec)?;
        let (env, config) = self.configure_scan(spec, root)?;
        // This scan reads what earlier ones of this session write.
        self.settle();
        let facts = StatCache::open(self.scan_facts_path()?);
        let (scan, learnt) = abicache_scan::scan_learning(&spec.sources, &config, &facts)?;
        let keyed = compute_key(spec, &env, &scan, root);
        // The memo's value (the key and the payload's text) is written out
        // with the memo, off this thread: for a tree of thousands of files
        // it is a megabyte, and the key is ready without it.
        let memo = keyed.as_ref().ok().and_then(|keyed| {
            let inputs = warm_key::inputs(spec, &env, root)?;
            let remembered = (keyed.key.clone(), Arc::clone(&keyed.payload));
            Some((self.key_memo()?, inputs, remembered))
        });
        self.writes.spawn(move || {
            let mut facts = facts;
            let (deps, _) = learnt.into_cache_then(&mut facts, StatCache::save);
            if let (Some(deps), Some((memo, inputs, (key, payload)))) = (deps, memo) {
                let value = warm_key::memo_value(&key, &payload);
                let _ = memo.put(&inputs, &value, &deps);
            }
        });
        let archs_from_gpus = self.archs_from_gpus(spec, &env);
        Ok(Prepared {
            env,
            scan,
            keyed: keyed?,
            archs_from_gpus,
        })
    }

    /// The scan configuration keying uses for `spec` under the fingerprint
    /// `root` in this session's environment (completed for a CUDA spec as
    /// [`Session::prepare`] does): `abicache scan --python/--env` scans
    /// with it, so it resolves every include as `abicache key` does. Reads
    /// no source and opens no cache.
    pub fn scan_config(&self, spec: &ExtensionSpec, root: &Path) -> Result<ScanConfig> {
        Ok(self.configure_scan(spec, root)?.1)
    }

    /// The environment completed for `spec` and the scan configuration in it.
    fn configure_scan(
        &self,
        spec: &ExtensionSpec,
        root: &Path,
    ) -> Result<(Environment, ScanConfig)> {
        let env = self.complete_env(spec)?;
        let config = spec.scan_config(Some(&env), root);
        Ok((env, config))
    }

    /// Returns a verified library for `spec`: from the cache when its key
    /// is there, else built once (other processes asking for the same key
    /// wait for this build and then use it), audited against its key and
    /// published atomically. `progress` receives build events. The
    /// outcome's [`Outcome::library_stamp`] is the stamp of the descriptor
    /// that was verified, never of whatever the path names afterwards.
    pub fn build(
        &self,
        spec: &ExtensionSpec,
        root: &Path,
        progress: &dyn Fn(Progress),
    ) -> Result<Outcome> {
        let started = Instant::now();
        let mut warnings = Vec::new();
        if !self.options.rebuild {
            if let Some(outcome) = self.memo_hit(spec, root, started, &mut warnings)? {
                return Ok(outcome);
            }
        }
        let prepared = self.prepare(spec, root)?;
        let (guard, remote_state) = match self.find_entry(&prepared, &mut warnings)? {
            Found::Entry(found, covered) => {
                let mut outcome = self.serve(found, &prepared, started, warnings)?;
                outcome.covered_by = covered;
                return Ok(outcome);
            }
            Found::Build {
                guard,
                remote_state,
            } => (self.on_miss(spec, &prepared, root, guard)?, remote_state),
        };
        let remote = self.remote().unwrap_or_else(|e| {
            warnings.push(Warning::RemoteDisabled(e));
            None
        });
        // Objects go through the remote too, unless it failed already.
        let object_remote =
            remote.filter(|_| !self.options.rebuild && remote_state != RemoteState::Unavailable);
        let (hit, report, shared) = self
            .compile_and_publish(
                spec,
                &prepared,
                root,
                (guard, object_remote),
                progress,
                &mut warnings,
            )
            .inspect_err(|_| {
                let _ = self.opened().count(&[Event::Error]);
            })?;
        warnings.extend(
            report
                .warnings
                .iter()
                .cloned()
                .map(Warning::ObjectDiscarded),
        );
        let mut events = vec![Event::Build {
            seconds: report.seconds,
        }];
        events.extend(
            report
                .device_steps
                .iter()
                .map(|(arch, steps)| Event::DeviceSteps {
                    arch: arch.clone(),
                    reused: steps.reused as u64,
                    from_remote: steps.from_remote as u64,
                    compiled: steps.compiled as u64,
                }),
        );
        self.count(&events, &mut warnings);
        if let Some(remote) = remote {
            let usable =
                remote.upload_after_build(self.opened(), &hit, remote_state, &mut warnings);
            match (usable, shared) {
                (true, Some(shared)) => shared.after_build(&report.units_compiled, &mut warnings),
                (false, Some(shared)) => warnings.extend(shared.take_warnings()),
                (_, None) => {}
            }
        }
        Ok(Outcome {
            library_stamp: hit.stamp,
            path: hit.library,
            isa: hit.manifest.isa,
            device_images: hit.manifest.device_images,
            key: prepared.keyed.key.clone(),
            hit: false,
            seconds: started.elapsed().as_secs_f64(),
            compiled: report.units_compiled,
            cached_units: report.units_cached,
            pch_units: report.pch_units,
            one_shot: report.one_shot,
            remote: false,
            warnings,
            layer: false,
            covered_by: None,
        })
    }

    /// The miss decision (see [`crate::misses`]): reports the miss when a
    /// miss report is set, then under offline mode releases the key's lock
    /// and returns [`Error::CacheMiss`]; under `warn` says so on stderr and
    /// hands the lock back to build with; otherwise hands it back at once.
    fn on_miss(
        &self,
        spec: &ExtensionSpec,
        prepared: &Prepared,
        root: &Path,
        guard: BuildGuard,
    ) -> Result<BuildGuard> {
        use abicache_settings::OfflineMode;
        let misses = &self.settings.misses;
        if misses.offline == OfflineMode::Off && misses.report.is_none() {
            return Ok(guard);
        }
        let miss = self.describe_miss(spec, prepared)?;
        if let Some(report) = &misses.report {
            let line = crate::misses::MissLine {
                time: crate::misses::utc_timestamp(std::time::SystemTime::now()),
                pid: std::process::id(),
                extension: &miss.extension,
                key: &miss.key,
                reason: miss.reason,
                offline: misses.offline.as_str(),
                closest: miss.closest.as_ref().map(crate::misses::ClosestLine::of),
                rebuild: crate::misses::RebuildLine {
                    command: &miss.command,
                    spec,
                    root: std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()),
                    environment: &prepared.env,
                },
            };
            let written = serde_json::to_string(&line)
                .map_err(std::io::Error::other)
                .and_then(|line| crate::misses::append_line(report, &line));
            if let Err(e) = written {
                eprintln!(
                    "abicache: warning: cannot append to the miss report `{}` \
                     (`ABICACHE_MISS_REPORT`): {e}",
                    report.display()
                );
            }
        }
        match misses.offline {
            OfflineMode::On => {
                drop(guard);
                Err(Error::CacheMiss(Box::new(miss)))
            }
            OfflineMode::Warn => {
                let differs = match &miss.closest {
                    Some(c) => format!(
                        "; closest entry {} differs in: {}",
                        c.key,
                        c.changes
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                    None => String::new(),
                };
                eprintln!(
                    "abicache: cache miss (`ABICACHE_OFFLINE=warn`): extension `{}` key {} ({}{differs}); building it",
                    miss.extension,
                    miss.key,
                    miss.reason.describe()
                );
                Ok(guard)
            }
            OfflineMode::Off => Ok(guard),
        }
    }

    /// What a miss of the prepared key is: the closest entry of the
    /// extension the local cache holds (as `abicache explain` finds it) and
    /// the command that would build it.
    fn describe_miss(
        &self,
        spec: &ExtensionSpec,
        prepared: &Prepared,
    ) -> Result<crate::misses::CacheMiss> {
        use crate::misses::MissReason;
        let explanation = self.explain(prepared)?;
        let reason = if self.options.rebuild {
            MissReason::Rebuild
        } else if explanation.closest.is_some() {
            MissReason::KeyDiffers
        } else {
            MissReason::NotCached
        };
        let command = self.build_command.clone().unwrap_or_else(|| {
            format!(
                "the same program with `ABICACHE_OFFLINE` unset or `warn` (which builds \
                 `{}` and reports it), or `abicache run --record PLAN -- CMD` then \
                 `abicache prebuild --plan PLAN`",
                spec.name
            )
        });
        Ok(crate::misses::CacheMiss {
            extension: prepared.keyed.name.clone(),
            key: prepared.keyed.key.clone(),
            reason,
            sources: self.source_order(),
            // A rebuild of a cached key: the entry is the key's own.
            closest: explanation.closest,
            command,
        })
    }

    /// Looks the prepared key up along the sources in order (none when
    /// rebuilding). The key's build lock is taken before the first source
    /// that publishes locally (the remote), or after the last: an entry
    /// published while waiting for it is a local hit, and otherwise one
    /// miss is counted, by the process that builds.
    fn find_entry(&self, prepared: &Prepared, warnings: &mut Vec<Warning>) -> Result<Found> {
        let store = self.store()?;
        let key = &prepared.keyed.key;
        if self.options.rebuild {
            let guard = store.begin_build(key)?;
            self.count(&[Event::Miss], warnings);
            return Ok(Found::Build {
                guard,
                remote_state: RemoteState::NotAsked,
            });
        }
        let mut ask = Ask {
            key,
            store,
            prepared: Some(prepared),
            guard: None,
            remote_state: RemoteState::NotAsked,
            warnings,
            covering: CoveringAsk::of(prepared),
            covered: None,
        };
        for source in &self.sources {
            if source.publishes_locally() && ask.guard.is_none() {
                if let Some(found) = lock(&mut ask)? {
                    return Ok(Found::Entry(found, None));
                }
            }
            if let Some(found) = source.lookup(&mut ask)? {
                return Ok(Found::Entry(found, None));
            }
            // A miss on the exact key may be served, from the same source,
            // by an entry whose device code covers the visible GPUs.
            if ask.covering.is_some() {
                if let Some(found) = source.cover(&mut ask)? {
                    return Ok(Found::Entry(found, ask.covered.take()));
                }
            }
        }
        if ask.guard.is_none() {
            if let Some(found) = lock(&mut ask)? {
                return Ok(Found::Entry(found, None));
            }
        }
        Ok(Found::Build {
            guard: ask.guard.expect("the lock is taken when no source served"),
            remote_state: ask.remote_state,
        })
    }

    /// The warm path's lookup (no scan, no lock): the sources before the
    /// first that publishes locally, in order, until one serves `key`, or
    /// (with `covering`) an entry that covers the GPUs, with its coverage.
    fn find_served(
        &self,
        key: &str,
        covering: Option<CoveringAsk>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Option<(Candidate, Option<Coverage>)>> {
        let mut ask = Ask {
            key,
            store: self.store()?,
            prepared: None,
            guard: None,
            remote_state: RemoteState::NotAsked,
            warnings,
            covering,
            covered: None,
        };
        for source in self.sources.iter().take_while(|s| !s.publishes_locally()) {
            if let Some(found) = source.lookup(&mut ask)? {
                return Ok(Some((found, None)));
            }
            if ask.covering.is_some() {
                if let Some(found) = source.cover(&mut ask)? {
                    return Ok(Some((found, ask.covered.take())));
                }
            }
        }
        Ok(None)
    }

    /// The outcome of an entry a source served for the prepared key.
    fn serve(
        &self,
        found: Candidate,
        prepared: &Prepared,
        started: Instant,
        warnings: Vec<Warning>,
    ) -> Result<Outcome> {
        let key = prepared.keyed.key.clone();
        match found.origin {
            Origin::Local => self.finish_hit(found.hit, prepared, started, warnings),
            Origin::Layer => Ok(Outcome::cached(found.hit, key, started, warnings).layered()),
            Origin::Remote => Ok(Outcome::cached(found.hit, key, started, warnings).downloaded()),
        }
    }

    /// Counts `events`, best effort: a cache whose counters cannot be
    /// written (read-only, full) still serves and builds; the first such
    /// failure in this process becomes a warning.
    fn count(&self, events: &[Event], warnings: &mut Vec<Warning>) {
        warnings.extend(self.opened().count(events).map(Warning::Counters));
    }

    /// The warm path: a hit found by the remembered key (no scan), when
    /// the memo holds, the entry is there and was audited at publish.
    /// `None` sends the caller down the full path (warnings kept).
    fn memo_hit(
        &self,
        spec: &ExtensionSpec,
        root: &Path,
        started: Instant,
        warnings: &mut Vec<Warning>,
    ) -> Result<Option<Outcome>> {
        self.validate_spec(spec)?;
        let env = self.complete_env(spec)?;
        let Some((key, payload)) = self.memo_entry(spec, &env, root) else {
            return Ok(None);
        };
        let covering = match (self.archs_from_gpus(spec, &env), &env.cuda_archs) {
            (true, Some(list)) => CoveringAsk::from_parts(&payload, list),
            _ => None,
        };
        let (found, covered_by) = match self.find_served(&key, covering, warnings)? {
            Some(found) => found,
            None => return Ok(None),
        };
        let outcome = match found {
            Candidate {
                hit,
                origin: Origin::Local,
            } if hit.manifest.audit.is_some() => {
                let warnings = std::mem::take(warnings);
                self.hit_outcome(hit, key, started, warnings)
            }
            // Audited on the full path, and looked up there again.
            Candidate {
                origin: Origin::Local,
                ..
            } => return Ok(None),
            Candidate { hit, .. } => {
                let warnings = std::mem::take(warnings);
                Outcome::cached(hit, key, started, warnings).layered()
            }
        };
        Ok(Some(Outcome {
            covered_by,
            ..outcome
        }))
    }

    /// Counts a hit and describes it.
    fn hit_outcome(
        &self,
        hit: Hit,
        key: String,
        started: Instant,
        mut warnings: Vec<Warning>,
    ) -> Outcome {
        self.count(
            &[Event::Hit {
                compile_seconds: hit.manifest.compile_seconds,
            }],
            &mut warnings,
        );
        Outcome::cached(hit, key, started, warnings)
    }

    fn finish_hit(
        &self,
        hit: Hit,
        prepared: &Prepared,
        started: Instant,
        mut warnings: Vec<Warning>,
    ) -> Result<Outcome> {
        if hit.manifest.audit.is_none() {
            // An entry from before audits existed: check it once, now.
            if let AuditVerdict::Refused(message) =
                audit_against_key(&hit.library, &prepared.keyed, &prepared.scan)?
            {
                self.opened().remove(&prepared.keyed.key)?;
                return Err(Error::AuditRefused { message });
            }
            warnings.push(Warning::AuditedNow {
                dir: hit.dir.clone(),
            });
        }
        let key = prepared.keyed.key.clone();
        Ok(self.hit_outcome(hit, key, started, warnings))
    }

    fn compile_and_publish<'r>(
        &'r self,
        spec: &ExtensionSpec,
        prepared: &Prepared,
        root: &Path,
        // The key's build guard, and the remote its objects go through (if any).
        (guard, remote): (abicache_store::BuildGuard, Option<&'r RemoteCache>),
        progress: &dyn Fn(Progress),
        warnings: &mut Vec<Warning>,
    ) -> Result<(Hit, abicache_build::BuildReport, Option<SharedObjects<'r>>)> {
        let requires_cuda = spec.requires_cuda();
        let pch_mode = self.settings.build.pch;
        let toolchain =
            Toolchain::discover(&self.toolchain_env, &self.site_packages, requires_cuda)?;
        self.check_host_cpu_here(spec, &prepared.env)?;
        let plan = self.plan(spec, prepared, root)?;
        let (pch_plan, pch_slots) = match pch_mode {
            PchMode::Auto => {
                let slots = abicache_store::MachineSlots::for_settings(&self.settings.store)?;
                let requests =
                    abicache_build::pch_requests(&plan, &toolchain, &default_umbrellas());
                let plan = crate::pch::resolve(self.opened(), requests, warnings);
                (plan, Some(slots))
            }
            PchMode::Off => (PchPlan::default(), None),
        };
        let previous_seconds = self
            .opened()
            .find_by_name(&spec.name)
            .ok()
            .and_then(|entries| entries.first().map(|e| e.manifest.compile_seconds));
        // With a launcher every unit may run elsewhere (a distcc farm):
        // `ABICACHE_JOBS` may ask for more jobs than local cores. Not when
        // nvcc units stay here (distcc cannot take them).
        let distributed = toolchain
            .launcher
            .as_deref()
            .is_some_and(|l| !requires_cuda || abicache_build::launcher_compiles_cuda(l));
        let jobs = match self.options.jobs {
            Some(jobs) => Some(abicache_build::JobRequest {
                jobs,
                setting: "jobs",
            }),
            None => abicache_build::jobs_from_env(distributed)?,
        };
        let options = BuildOptions {
            jobs: jobs.map(|r| r.jobs),
            jobs_setting: jobs.map(|r| r.setting),
            previous_seconds,
            pch: pch_plan.ready,
            cancel: self.cancel.clone(),
            usable_memory: None,
        };
        let shared = crate::remote_objects::before_build(
            remote.filter(|_| self.settings.remote.objects),
            self.opened(),
            &plan,
            &toolchain,
            warnings,
        )?;
        // Device steps the object cache lacks are asked of the remote's objects.
        let report = abicache_build::build_with_device_steps(
            &plan,
            &toolchain,
            &self.opened().objects_dir(),
            guard.temp_dir(),
            &options,
            shared
                .as_ref()
                .map(|s| s as &dyn abicache_build::DeviceStepSource),
            progress,
        );
        if let (Err(_), Some(shared)) = (&report, &shared) {
            warnings.extend(shared.take_warnings());
        }
        let report = report?;
        warnings.extend(report.jobs_capped.clone().map(Warning::JobsCapped));
        crate::pch::drop_rejected(self.opened(), &report.pch_rejected, warnings);
        self.count(&vec![Event::PchHit; report.pch_units.len()], warnings);
        let audit = match audit_against_key(&report.library, &prepared.keyed, &prepared.scan)? {
            AuditVerdict::Refused(message) => return Err(Error::AuditRefused { message }),
            AuditVerdict::Passed(audit) => audit,
        };
        let mut manifest = Manifest::new(
            &prepared.keyed.key,
            &spec.name,
            prepared.keyed.payload.text(),
        );
        manifest.toolchain = report.toolchain.clone();
        manifest.compile_seconds = report.seconds;
        manifest.units = report.units_total as u32;
        manifest.audit = Some(audit);
        let cuda_flags: &[String] = match requires_cuda {
            true => &prepared.keyed.cuda_flags,
            false => &[],
        };
        let target_flags =
            abicache_isa::flags::spec_target_flags(&prepared.keyed.host_flags, cuda_flags);
        manifest.isa = abicache_build::isa_requirements(&toolchain.cxx.path, &target_flags)?;
        if requires_cuda {
            manifest.device_images = recorded_device_images(
                &spec.name,
                &report.library,
                &prepared.keyed.gencode,
                cuda_flags,
            )?;
        }
        let file_name = report
            .library
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::LibraryWithoutFileName {
                path: report.library.clone(),
            })?
            .to_string();
        let published = guard.publish(&file_name, manifest)?;
        // Only now, so the build never waited for it (see `crate::pch`).
        if let Some(slots) = &pch_slots {
            crate::pch::start_missing(
                self.opened(),
                &pch_plan.missing,
                &report.units_compiled,
                slots,
                warnings,
            );
        }
        Ok((published.hit, report, shared))
    }

    /// The build plan for a prepared spec.
    fn plan(&self, spec: &ExtensionSpec, prepared: &Prepared, root: &Path) -> Result<BuildPlan> {
        let env = &prepared.env;
        // A TVM-FFI module that includes no torch header needs no torch.
        let torch_dir = match prepared.keyed.uses_torch {
            true => {
                let torch_dir = env.torch_dir.clone().ok_or(Error::NoTorchDir)?;
                check_torch_dir(&torch_dir)?;
                torch_dir
            }
            false => PathBuf::new(),
        };
        let tvm_ffi = match spec.kind {
            ExtensionKind::Torch => None,
            ExtensionKind::TvmFfi => Some(TvmFfiBuild {
                include_dirs: env.tvm_ffi_include_dirs.clone(),
                lib_dir: env
                    .tvm_ffi_lib_dir
                    .clone()
                    .ok_or_else(|| Error::NoTvmFfiLib {
                        name: spec.name.clone(),
                    })?,
                uses_torch: prepared.keyed.uses_torch,
            }),
        };
        let sources = spec
            .sources
            .iter()
            .zip(&prepared.scan.sources)
            .map(|(source, report)| {
                let mut files: Vec<(String, String)> = report
                    .files
                    .iter()
                    .map(|f| (f.path.to_string(), f.blake3.to_string()))
                    .collect();
                // Creating a missing header must recompile the unit.
                files.extend(
                    report
                        .missing_includes
                        .iter()
                        .map(|m| (format!("missing_include={m}"), String::new())),
                );
                Unit {
                    source: source.clone(),
                    files,
                    uses_extension_name: report.uses_extension_name,
                }
            })
            .collect();
        Ok(BuildPlan {
            name: spec.name.clone(),
            sources,
            requires_cuda: spec.requires_cuda(),
            python_abi_dependent: prepared.keyed.python_abi_dependent,
            cxx11_abi: env.cxx11_abi,
            torch_dir,
            python_include: env.python_include.clone(),
            cuda_include_dirs: env.cuda_include_dirs.clone(),
            extra_cflags: prepared.keyed.host_flags.clone(),
            extra_cuda_cflags: prepared.keyed.cuda_flags.clone(),
            extra_ldflags: spec.extra_ldflags.clone(),
            extra_include_paths: spec.extra_include_paths.clone(),
            gencode: prepared.keyed.gencode.clone(),
            abi_fields: prepared.keyed.abi_fields(),
            // Compiled relative to the fingerprint root: relocatable objects.
            root: std::path::absolute(root).ok(),
            tvm_ffi,
        })
    }

    /// Fills in what a key needs and the environment may lack: for a spec
    /// with a native CPU flag (`-march=native`), `host_cpu` (this machine's
    /// resolution, see [`Session::resolve_host_cpu`]); `compiler_isa` (what
    /// the host compiler enables by itself, see
    /// [`Session::resolve_compiler_isa`]); for a CUDA spec the
    /// nvcc release and CUDA include dirs (from the discovered nvcc) and
    /// the arch list (`TORCH_CUDA_ARCH_LIST`, else the visible GPUs).
    fn complete_env(&self, spec: &ExtensionSpec) -> Result<Environment> {
        let mut env = self.env.clone();
        if env.host_cpu.is_none() {
            let native = native_cpu_flags(spec);
            if !native.is_empty() {
                env.host_cpu = Some(self.resolve_host_cpu(&native)?);
            }
        }
        if env.compiler_isa.is_none() {
            env.compiler_isa = self.resolve_compiler_isa();
        }
        if !spec.requires_cuda() {
            return Ok(env);
        }
        // What the key needs is `nvcc_version`: when the environment gives
        // it, nothing is probed (an environment file may describe a machine
        // with no CUDA toolchain here). Unknown CUDA include dirs then only
        // mean that angle includes found nowhere are system headers (docs/key.md, step 1).
        if env.nvcc_version.is_none() {
            let nvcc = match self.nvcc.get() {
                Some(nvcc) => nvcc,
                None => {
                    let found =
                        abicache_build::find_nvcc(&self.toolchain_env, &self.site_packages)?;
                    self.nvcc.get_or_init(|| found)
                }
            };
            env.nvcc_version.get_or_insert_with(|| nvcc.release.clone());
            if env.cuda_include_dirs.is_empty() {
                env.cuda_include_dirs = nvcc.include_dirs.clone();
            }
        }
        if env.cuda_archs.is_none() && spec.cuda_archs.is_none() {
            env.cuda_archs = self
                .arch_list_env
                .clone()
                .or_else(crate::gpu::visible_gpu_archs);
        }
        Ok(env)
    }
}

/// The device-code images of the CUDA library `library` (sorted, as the
/// manifest records them), refused ([`Error::DeviceImagesMismatch`]) when
/// they differ from what the nvcc flags ask for: the arch list's `gencode`
/// flags and the user's own `cuda_flags` (each `M.m` its `sm_Mm`, each
/// `+PTX` its `compute_Mm`). Flags that ask for nothing readable (no arch
/// flag: nvcc's default; one the flag reader cannot follow) are not compared.
fn recorded_device_images(
    name: &str,
    library: &Path,
    gencode: &[String],
    cuda_flags: &[String],
) -> Result<Vec<String>> {
    let mut found = abicache_fatbin::images_in_elf(library)?;
    found.sort_unstable();
    found.dedup();
    let flags: Vec<String> = gencode.iter().chain(cuda_flags).cloned().collect();
    if let Ok(mut expected) = abicache_fatbin::expected_images(&flags) {
        expected.sort_unstable();
        expected.dedup();
        if !expected.is_empty() && expected != found {
            let join = |images: &[abicache_fatbin::DeviceImage]| match images {
                [] => "no image".to_owned(),
                _ => images
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            return Err(Error::DeviceImagesMismatch {
                name: name.to_owned(),
                found: join(&found),
                expected: join(&expected),
            });
        }
    }
    Ok(found.iter().map(ToString::to_string).collect())
}

impl Session {
    /// True when `env` (completed for `spec`) has the arch list of the
    /// visible GPUs because nobody chose one ([`Prepared::archs_from_gpus`]).
    fn archs_from_gpus(&self, spec: &ExtensionSpec, env: &Environment) -> bool {
        spec.requires_cuda()
            && spec.cuda_archs.is_none()
            && self.env.cuda_archs.is_none()
            && self.arch_list_env.is_none()
            && env.cuda_archs.is_some()
            && !abicache_key::user_sets_arch(&spec.extra_cuda_cflags)
    }

    /// What the native CPU flags `native` (`-march=native`, …) resolve to
    /// with this machine's host compiler: asked once per compiler (path and
    /// stamp) and CPU, then remembered in the process and under the cache
    /// (`v1/host-cpu/`, once the cache exists), so a warm key runs no
    /// compiler. Nothing is remembered on disk when the CPU cannot be
    /// identified (no `/proc/cpuinfo`).
    fn resolve_host_cpu(&self, native: &[String]) -> Result<String> {
        let cpu = abicache_isa::running_cpu();
        let dir = cpu.and_then(|_| self.host_cpu_dir());
        let identity = cpu.map_or("", |c| c.identity());
        Ok(abicache_build::resolve_host_cpu(
            &self.toolchain_env,
            native,
            identity,
            dir.as_deref(),
        )?)
    }

    /// The extensions the host compiler enables by itself beyond the fixed
    /// baseline ([`abicache_build::resolve_compiler_isa`]), remembered like
    /// [`Session::resolve_host_cpu`]'s answers. `None` when no host compiler
    /// is found or its probe fails: the key then has no `compiler_isa`
    /// line, and a build (which needs that compiler) fails on its own.
    fn resolve_compiler_isa(&self) -> Option<String> {
        let cpu = abicache_isa::running_cpu();
        let dir = cpu.and_then(|_| self.host_cpu_dir());
        let identity = cpu.map_or("", |c| c.identity());
        abicache_build::resolve_compiler_isa(&self.toolchain_env, identity, dir.as_deref()).ok()
    }

    /// `<cache>/v1/host-cpu` when the cache's `v1` exists (probing never
    /// creates the cache: see [`Session::validate_spec`]).
    fn host_cpu_dir(&self) -> Option<PathBuf> {
        let version_dir = match self.store.get() {
            Some(store) => store.layout().version_dir().to_path_buf(),
            None => abicache_store::Layout::new(self.cache_root()?)
                .version_dir()
                .to_path_buf(),
        };
        version_dir.is_dir().then(|| version_dir.join(HOST_CPU_DIR))
    }

    /// Before a build of a spec with a native CPU flag: the `host_cpu` it
    /// is keyed on (the environment's, e.g. from an environment file
    /// describing another machine) must be what the flag resolves to here,
    /// since the compiler resolves it on this machine.
    fn check_host_cpu_here(&self, spec: &ExtensionSpec, env: &Environment) -> Result<()> {
        let native = native_cpu_flags(spec);
        let Some(flag) = native.first() else {
            return Ok(());
        };
        let here = self.resolve_host_cpu(&native)?;
        match env.host_cpu.as_deref() {
            Some(keyed) if keyed == here => Ok(()),
            keyed => Err(Error::HostCpuElsewhere {
                name: spec.name.clone(),
                flag: flag.clone(),
                keyed: keyed.unwrap_or_default().to_owned(),
                here,
            }),
        }
    }
}

/// Takes the key's build lock for `ask`: an entry published while waiting
/// for it is a local hit; otherwise the lock is kept in `ask` and one miss
/// is counted. Corrupt entries found on the way are counted.
fn lock(ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
    match ask.store.lookup_or_lock(ask.key)? {
        Claim::Hit { hit, warnings } => {
            // Another process built it while we waited: a hit, not a miss.
            ask.note_corrupt(warnings);
            Ok(Some(Candidate {
                hit,
                origin: Origin::Local,
            }))
        }
        Claim::Build { guard, warnings } => {
            ask.note_corrupt(warnings);
            ask.guard = Some(guard);
            ask.count(&[Event::Miss]);
            Ok(None)
        }
    }
}

/// Refuses a `torch_dir` without torch's headers as bad input (exit 2),
/// before any compiler runs and fails on it (which would read as a failed
/// build, exit 1).
fn check_torch_dir(torch_dir: &Path) -> Result<()> {
    let include = torch_dir.join("include");
    if include.join("torch").is_dir() {
        return Ok(());
    }
    let problem = if torch_dir.is_dir() {
        TorchDirProblem::NoHeaders {
            expected: include.join("torch"),
        }
    } else {
        TorchDirProblem::NotADirectory
    };
    Err(Error::TorchDirUnusable {
        path: torch_dir.to_path_buf(),
        problem,
    })
}

/// [`Outcome::library_stamp`] as the list `[dev, ino, size, mtime_ns,
/// ctime_ns]` the Python loader reads
/// (`python/abicache/_native_path.py:open_checked`); `null` for none.
fn stamp_as_list<S: serde::Serializer>(
    stamp: &Option<FileStamp>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    stamp
        .map(|s| (s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns))
        .serialize(serializer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Python receives is the list it always was, not `FileStamp`'s fields.
    #[test]
    fn the_library_stamp_reaches_python_as_a_list_of_five() {
        let stamp = FileStamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: -4,
            ctime_ns: 5,
        };
        let outcome = Outcome {
            path: PathBuf::from("/c/ops.so"),
            key: "k".to_owned(),
            hit: true,
            seconds: 0.0,
            compiled: Vec::new(),
            cached_units: 0,
            pch_units: Vec::new(),
            one_shot: Vec::new(),
            remote: false,
            warnings: Vec::new(),
            isa: Vec::new(),
            device_images: Vec::new(),
            library_stamp: Some(stamp),
            layer: false,
            covered_by: None,
        };
        let json = serde_json::to_value(&outcome).unwrap();
        assert_eq!(json["library_stamp"], serde_json::json!([1, 2, 3, -4, 5]));
        let none = Outcome {
            library_stamp: None,
            ..outcome
        };
        assert!(serde_json::to_value(&none)
            .unwrap()
            .get("library_stamp")
            .is_none());
    }
}
