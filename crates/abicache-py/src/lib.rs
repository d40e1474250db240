//! `abicache._native`: the PyO3 bindings of the abicache façade.
//!
//! Thin by design: every function converts its arguments (JSON text of an
//! `ExtensionSpec` and an `Environment`, paths), calls the façade with the
//! GIL released, and converts the answer to plain Python objects or the
//! error to an `abicache` exception. What to build and for which
//! environment is decided in Rust (`abicache`) and probed in Python
//! (`python/abicache/_env.py`); nothing is decided here.
//!
//! Guarantees: under a stable target the runtime floor is checked before
//! the cache is opened, so a refused request creates, reads and counts
//! nothing in the cache.

#![deny(missing_docs)]

mod convert;
mod errors;
mod fleet;
mod inline;
mod rules;

use std::path::PathBuf;
use std::sync::Arc;

use abicache::build::{progress_json, progress_reporter, Cancel, Progress, ProgressMode};
use abicache::key::{Environment, ExtensionSpec, StableTarget};
use abicache::settings::{Flags, Settings};
use abicache::store::Store;
use abicache::{Session, SessionOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{env_from_json, json_to_python, spec_from_json, to_python};
use crate::errors::to_py;

/// `-DTORCH_TARGET_VERSION=0x...` for a stable-ABI target `(major, minor)`.
#[pyfunction]
fn torch_stable_abi_target_define(py: Python<'_>, major: i64, minor: i64) -> PyResult<String> {
    let target = StableTarget::from_parts(major, minor).map_err(|e| to_py(py, e.into()))?;
    Ok(target.define())
}

/// Runs the `abicache` command line with `argv` (`argv[0]` is the program
/// name) and returns its exit code: the wheel's `abicache` console script
/// and `python -m abicache`, sharing this module's one native build.
/// `package_dir` is the installed `abicache` package (for `abicache run`,
/// which on Unix replaces this process with its command).
#[pyfunction]
#[pyo3(signature = (argv, package_dir=None))]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>, package_dir: Option<PathBuf>) -> u8 {
    py.detach(|| abicache_cli::main_with_package(argv, package_dir.as_deref()))
}

/// The cache root `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache`, else `~/.cache/abicache`.
#[pyfunction]
fn default_cache_dir(py: Python<'_>) -> PyResult<String> {
    let root = abicache::store::root_from_env().map_err(|e| to_py(py, e.into()))?;
    Ok(root.display().to_string())
}

/// The store's counters and contents (`abicache stats`) as a dict.
#[pyfunction]
#[pyo3(signature = (cache_dir=None))]
fn stats<'py>(py: Python<'py>, cache_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyAny>> {
    let stats = py.detach(|| {
        open_store(cache_dir)?
            .stats()
            .map_err(abicache::Error::from)
    });
    to_python(py, &stats.map_err(|e| to_py(py, e))?)
}

/// The spec's key in this environment, without touching the cache entries.
#[pyfunction]
#[pyo3(signature = (spec, env, root, cache_dir=None))]
fn prepare<'py>(
    py: Python<'py>,
    spec: &str,
    env: &str,
    root: PathBuf,
    cache_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let (spec, env) = (spec_from_json(spec)?, env_from_json(env)?);
    let answer = py.detach(|| {
        let session = session(env, cache_dir, false)?;
        let prepared = session.prepare(&spec, &root)?;
        Ok(prepared_json(&spec, &prepared))
    });
    to_python(py, &answer.map_err(|e| to_py(py, e))?)
}

/// The spec's key in this environment: from the key memo (one `stat` per
/// file and directory its scan depended on) when nothing changed, else by a
/// scan through the stat cache. Touches no cache entry.
#[pyfunction]
#[pyo3(signature = (spec, env, root, cache_dir=None))]
fn key(
    py: Python<'_>,
    spec: &str,
    env: &str,
    root: PathBuf,
    cache_dir: Option<PathBuf>,
) -> PyResult<String> {
    let (spec, env) = (spec_from_json(spec)?, env_from_json(env)?);
    let key = py.detach(|| session(env, cache_dir, false)?.key(&spec, &root));
    key.map_err(|e| to_py(py, e))
}

/// Returns a verified library for the spec (a hit, or built once), as the
/// façade's `Outcome` dict. `progress` is called with one dict per build
/// event; without it events go to stderr unless `quiet`.
///
/// The library is for loading: one that requires instruction-set
/// extensions this CPU lacks raises `AbiError` (unless
/// `ABICACHE_ISA_CHECK=0`), and so does a CUDA library whose device code
/// no visible GPU can run (unless `ABICACHE_GPU_CHECK=0`); neither writes a
/// warm-load record. The dict's `gpu_jit` is the line to show the verbose
/// when only PTX serves a GPU (`None` otherwise).
///
/// `warm_record` names the warm-load record to write afterwards (see
/// `Session::remember_warm_load`; `layers` are read-only cache roots
/// (installed cache wheels) consulted after the local cache and
/// `ABICACHE_READONLY_DIRS`; `warm_files` are files it requires
/// unchanged too, e.g. this module); the dict's `warm_record` says whether
/// one was written.
#[pyfunction]
#[pyo3(signature = (spec, env, root, cache_dir=None, *, rebuild=false, site_packages=Vec::new(), progress=None, quiet=false, warm_record=None, warm_files=Vec::new(), layers=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn build<'py>(
    py: Python<'py>,
    spec: &str,
    env: &str,
    root: PathBuf,
    cache_dir: Option<PathBuf>,
    rebuild: bool,
    site_packages: Vec<PathBuf>,
    progress: Option<Py<PyAny>>,
    quiet: bool,
    warm_record: Option<String>,
    warm_files: Vec<PathBuf>,
    layers: Vec<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let (spec, env) = (spec_from_json(spec)?, env_from_json(env)?);
    let cancel = Cancel::new();
    let build = || {
        let mut session = session(env, cache_dir, rebuild)?
            .with_cancel(cancel.clone())
            .with_layers(layers);
        if !site_packages.is_empty() {
            session = session.with_site_packages(site_packages);
        }
        let outcome = match &progress {
            Some(callback) => session.build(&spec, &root, &|event| call_progress(callback, &event)),
            None => {
                let mode = if quiet {
                    ProgressMode::Quiet
                } else {
                    ProgressMode::Auto
                };
                session.build(&spec, &root, &progress_reporter(mode))
            }
        }?;
        // The guard before the caller loads it: a library this CPU cannot
        // run is refused here, never handed to the loader.
        outcome.check_cpu(&spec.name)?;
        // And one no visible GPU can run (built for `8.0`, on a `9.0` GPU):
        // refused here, not at its first kernel launch.
        let gpu = outcome.check_gpu()?;
        let warm = warm_record
            .is_some_and(|name| session.remember_warm_load(&spec, &root, &name, &warm_files));
        Ok::<_, abicache::Error>((outcome, warm, gpu.jit))
    };
    let (outcome, warm, jit) = interruptible(py, &cancel, build)?.map_err(|e| to_py(py, e))?;
    let answer = to_python(py, &outcome)?;
    answer.set_item("warm_record", warm)?;
    answer.set_item("gpu_jit", jit)?;
    Ok(answer)
}

/// Runs `work` on another thread while this (the calling, usually main)
/// thread waits without the GIL and checks for signals every 50 ms. On
/// Ctrl-C (or any signal handler that raises), `cancel` is set, `work` is
/// waited for (it stops its compilers, removes its build directory and
/// releases its lock), and the handler's exception (`KeyboardInterrupt`)
/// is raised: it wins over whatever `work` returned.
fn interruptible<T: Send>(
    py: Python<'_>,
    cancel: &Cancel,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    use std::time::Duration;
    std::thread::scope(|scope| {
        let (tx, rx) = channel();
        scope.spawn(move || {
            let _ = tx.send(work());
        });
        // A `Receiver` is not `Sync`; the mutex lets the GIL-free closures borrow it.
        let rx = std::sync::Mutex::new(rx);
        let recv = |timeout: Duration| match rx.lock() {
            Ok(rx) => rx.recv_timeout(timeout),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        loop {
            let answer = py.detach(|| recv(Duration::from_millis(50)));
            let signals = py.check_signals();
            match (answer, signals) {
                (Ok(result), Ok(())) => return Ok(result),
                (Err(RecvTimeoutError::Timeout), Ok(())) => {}
                (Ok(_), Err(interrupt)) => return Err(interrupt),
                (Err(RecvTimeoutError::Timeout), Err(interrupt)) => {
                    cancel.cancel();
                    let _ = py.detach(|| recv(Duration::MAX));
                    return Err(interrupt);
                }
                (Err(RecvTimeoutError::Disconnected), _) => {
                    // `work` panicked; the scope re-raises the panic on exit.
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(
                        "abicache: the build thread panicked",
                    ));
                }
            }
        }
    })
}

/// The instruction-set guard on its own: `isa` is the JSON list of
/// requirements an entry's manifest (or a build's outcome) records
/// (`[{"feature", "flag"}]`); raises `AbiError` naming what this CPU lacks
/// (unless `ABICACHE_ISA_CHECK=0`). `what` names the library in the message.
#[pyfunction]
#[pyo3(signature = (isa, what="the library"))]
fn check_isa(py: Python<'_>, isa: &str, what: &str) -> PyResult<()> {
    let required: Vec<abicache::isa::Requirement> = serde_json::from_str(isa)
        .map_err(|e| PyValueError::new_err(format!("`isa` is not a list of requirements: {e}")))?;
    abicache::isa::check(&required, what).map_err(|e| to_py(py, e.into()))
}

/// Why the key is what it is and, on a miss, how the closest cached entry
/// differs: `(text, data)`, the human rendering and the structured form.
#[pyfunction]
#[pyo3(signature = (spec, env, root, cache_dir=None))]
fn explain<'py>(
    py: Python<'py>,
    spec: &str,
    env: &str,
    root: PathBuf,
    cache_dir: Option<PathBuf>,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let (spec, env) = (spec_from_json(spec)?, env_from_json(env)?);
    let explanation = py.detach(|| {
        let session = session(env, cache_dir, false)?;
        let prepared = session.prepare(&spec, &root)?;
        session.explain(&prepared)
    });
    let explanation = explanation.map_err(|e| to_py(py, e))?;
    Ok((
        abicache::render_explanation(&explanation),
        to_python(py, &explanation)?,
    ))
}

/// The settings of one native call: this process's environment and config
/// file as they are now (Python may change them between calls), with
/// `cache_dir` as `--cache-dir`; every value checked before any work.
pub(crate) fn settings(cache_dir: Option<PathBuf>) -> abicache::Result<Arc<Settings>> {
    let flags = Flags {
        cache_dir,
        ..Flags::default()
    };
    Ok(Arc::new(Settings::resolve(&flags)?))
}

/// The cache at `cache_dir` (`None`: the settings' root), with the settings
/// resolved for this call.
pub(crate) fn open_store(cache_dir: Option<PathBuf>) -> abicache::Result<Store> {
    let settings = settings(cache_dir)?;
    store_for(&settings)
}

/// The cache `settings` name, with their trusted signers.
pub(crate) fn store_for(settings: &Settings) -> abicache::Result<Store> {
    Ok(Store::open_configured(&settings.store)?
        .with_trusted_signers(abicache::trusted_signers(&settings.remote)))
}

/// A session for `env` over the cache at `cache_dir`, with the settings
/// resolved once for this call (a value that cannot be used is refused
/// here, before any scan); the cache is opened by the session when first
/// needed, after [`Session::validate_spec`] passed (so a refused spec creates and
/// reads nothing in the cache).
fn session(
    env: Environment,
    cache_dir: Option<PathBuf>,
    rebuild: bool,
) -> abicache::Result<Session> {
    Ok(Session::open_lazily(None, env)
        .with_settings(settings(cache_dir)?)
        .with_options(SessionOptions {
            rebuild,
            jobs: None,
        }))
}

fn prepared_json(spec: &ExtensionSpec, prepared: &abicache::Prepared) -> serde_json::Value {
    let keyed = &prepared.keyed;
    serde_json::json!({
        "name": keyed.name,
        "key": keyed.key,
        "payload": keyed.payload.lines(),
        "python_abi": keyed.python_abi,
        "python_abi_dependent": keyed.python_abi_dependent,
        "python_abi_reason": keyed.python_abi_reason,
        "torch_abi": keyed.torch_abi,
        "requires_cuda": spec.requires_cuda(),
    })
}

/// Calls a Python progress callback with the GIL re-acquired and the event
/// as a dict ([`progress_json`]: `kind`, the event's fields, `line`); an
/// exception it raises is reported as unraisable and does not stop the build.
fn call_progress(callback: &Py<PyAny>, event: &Progress) {
    Python::attach(|py| {
        let result = progress_json(event)
            .map_err(|e| PyValueError::new_err(format!("cannot convert a progress event: {e}")))
            .and_then(|value| json_to_python(py, &value))
            .and_then(|d| callback.call1(py, (d,)));
        if let Err(e) = result {
            e.write_unraisable(py, Some(callback.bind(py)));
        }
    });
}

/// The `abicache._native` module. It runs without the GIL on free-threaded
/// CPython (`gil_used = false`, so importing it does not turn the GIL back
/// on), reviewed for that as follows (docs/internals.md, "Free-threaded
/// CPython"):
///
/// - this crate keeps no state between calls: no `static`, no `pyclass`,
///   no `RefCell` or `Cell`; every call resolves its settings and opens its
///   store afresh, and hands Python only new objects;
/// - every process-wide cache in the crates below it is a `Mutex`,
///   `OnceLock` or atomic (`Sync`, checked by the compiler) and was already
///   reached with the GIL released (`Python::detach`), so by several
///   threads at once;
/// - no Rust lock is waited on while attached to the interpreter: the long
///   calls detach first, and `interruptible` waits detached; a progress
///   callback attaches from the one thread that runs its build (the
///   reporter is not `Sync`), so one build never calls it from two threads;
/// - the Python package's own caches are idempotent memos or guarded by
///   `threading.Lock`s (`_extension.py`, `_dropins.py`, `_env.py`).
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<errors::Error>())?;
    let build_error = py.get_type::<errors::BuildError>();
    // Class-level defaults; a compiler or linker failure sets them per instance.
    build_error.setattr("output", py.None())?;
    build_error.setattr("command", py.None())?;
    m.add("BuildError", build_error)?;
    m.add("AbiError", py.get_type::<errors::AbiError>())?;
    m.add("LockTimeout", py.get_type::<errors::LockTimeout>())?;
    let cache_miss = py.get_type::<errors::CacheMiss>();
    for attribute in ["extension", "key", "closest_key", "command"] {
        cache_miss.setattr(attribute, py.None())?;
    }
    cache_miss.setattr("differs", pyo3::types::PyTuple::empty(py))?;
    m.add("CacheMiss", cache_miss)?;
    m.add_function(wrap_pyfunction!(torch_stable_abi_target_define, m)?)?;
    m.add_function(wrap_pyfunction!(default_cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add_function(wrap_pyfunction!(prepare, m)?)?;
    m.add_function(wrap_pyfunction!(key, m)?)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(check_isa, m)?)?;
    m.add_function(wrap_pyfunction!(inline::store_generated_sources, m)?)?;
    m.add_function(wrap_pyfunction!(fleet::prebuild, m)?)?;
    m.add_function(wrap_pyfunction!(fleet::record_plan_entry, m)?)?;
    m.add_function(wrap_pyfunction!(rules::visible_cuda_archs, m)?)?;
    m.add_function(wrap_pyfunction!(rules::requires_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(rules::warm_record_format, m)?)?;
    m.add_function(wrap_pyfunction!(rules::fingerprint_root, m)?)?;
    m.add_function(wrap_pyfunction!(rules::rebuild_requested, m)?)?;
    m.add_function(wrap_pyfunction!(rules::intercept_mode, m)?)?;
    m.add_function(wrap_pyfunction!(rules::offline_mode, m)?)?;
    m.add_function(wrap_pyfunction!(rules::library_owner_trusted, m)?)?;
    Ok(())
}
