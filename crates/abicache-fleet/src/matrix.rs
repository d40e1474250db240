//! `prebuild --matrix`: the environments of a fleet's matrix
//! (`python=3.10,3.12 torch=2.12,2.15`) that no given interpreter already
//! covers are created with `uv`, on interpreters installed on this machine
//! (never downloaded), with torch installed without its CUDA dependencies
//! (enough to build CPU and stable-ABI extensions). They live in a
//! throwaway directory under the cache (`v1/matrix-envs/`), removed when
//! the [`MatrixEnvironments`] is dropped, unless a directory to keep them
//! in is given, where a complete environment is reused by the next run.

mod interpreters;
mod spec;
mod uv;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use abicache_store::{FileLock, Store, MATRIX_RUN_LOCK};

pub use interpreters::{FoundInterpreter, InterpreterSearch};
pub use spec::{Matrix, MatrixCell};
pub use uv::{pure_python_requirements, Uv};

pub use crate::error::MatrixError;
use crate::fleet::FleetEnvironment;
use crate::probe::probe_interpreter;

/// The file, written last, that marks a kept environment complete; it
/// records what the environment was created from.
const STAMP_FILE: &str = ".abicache-matrix";

/// Where the matrix's environments go and which `uv` creates them.
#[derive(Debug, Clone, Default)]
pub struct MatrixOptions {
    /// The `uv` program (`--uv`) [default: `uv` on `PATH`].
    pub uv: Option<PathBuf>,
    /// Keep the environments in this directory (`--keep-envs`) and reuse
    /// the complete ones found there [default: a throwaway directory].
    pub keep_envs: Option<PathBuf>,
}

/// The environments created for a matrix. A throwaway directory holding
/// them is removed when this is dropped: keep it alive until the builds
/// are done.
#[derive(Debug)]
pub struct MatrixEnvironments {
    /// The created (or reused) environments, in matrix order.
    pub environments: Vec<FleetEnvironment>,
    /// Where they are.
    pub dir: Option<PathBuf>,
    /// Each cell's lock (`<dir>/<cell>.lock`): no other run replaces an
    /// environment while this one uses it.
    _cell_locks: Vec<FileLock>,
    /// The throwaway directory, with its lock ([`MATRIX_RUN_LOCK`]): gc
    /// removes a run directory only once it is free.
    _throwaway: Option<RunDir>,
}

/// A throwaway `v1/matrix-envs/run.*` directory, locked while it lives and
/// removed on drop. A watcher (`flock <lock> rm -rf <dir>`, in its own
/// process group so Ctrl-C does not reach it) waits for the lock and removes
/// the directory as soon as the run lets go of it: when the run is
/// interrupted (`SIGINT`, `SIGTERM`) or killed, too.
#[derive(Debug)]
struct RunDir {
    dir: tempfile::TempDir,
    _lock: FileLock,
}

impl RunDir {
    fn new(parent: &Path) -> crate::Result<RunDir> {
        let dir = tempfile::Builder::new()
            .prefix("run.")
            .tempdir_in(parent)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a directory in `{}`: {e}", parent.display()),
                )
            })?;
        let lock_path = dir.path().join(MATRIX_RUN_LOCK);
        let lock = FileLock::try_acquire(&lock_path)?
            .ok_or_else(|| std::io::Error::other("a fresh run directory's lock is held"))?;
        // Best effort: gc removes what a watcher that could not start leaves.
        if let Ok(mut watcher) = std::process::Command::new("flock")
            .arg(&lock_path)
            .args(["rm", "-rf"])
            .arg(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
        {
            std::thread::spawn(move || {
                let _ = watcher.wait();
            });
        }
        Ok(RunDir { dir, _lock: lock })
    }
}

/// `dir` for `--keep-envs`: created owner-only when absent; otherwise it must
/// be a directory (not a symlink) owned by this user and writable by no one
/// else, since the environments found in it are run. [`crate::prebuild()`]
/// checks it before anything runs, whatever serves the matrix.
pub(crate) fn private_keep_dir(dir: &Path) -> Result<PathBuf, MatrixError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = std::path::absolute(dir)?;
    if std::fs::symlink_metadata(&dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot create `{}`: {e}", dir.display()))
            })?;
    }
    let meta = fs_err::symlink_metadata(&dir)?;
    let uid = rustix::process::geteuid().as_raw();
    let reason = if meta.file_type().is_symlink() {
        Some("is a symbolic link".to_owned())
    } else if !meta.is_dir() {
        Some("is not a directory".to_owned())
    } else if meta.uid() != uid {
        Some(format!(
            "is owned by uid {}, not by you (uid {uid})",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "is writable by others (mode {:o})",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match reason {
        Some(reason) => Err(MatrixError::KeepEnvsNotPrivate { path: dir, reason }),
        None => Ok(dir),
    }
}

/// Creates the environments of `matrix` that none of `existing` covers (an
/// environment with torch whose Python and torch releases match a cell),
/// reporting each step to `progress`. Nothing is created, and `uv` is not
/// needed, when every cell is covered.
pub fn create_missing(
    store: &Store,
    matrix: &Matrix,
    existing: &[FleetEnvironment],
    options: &MatrixOptions,
    progress: &dyn Fn(&str),
) -> crate::Result<MatrixEnvironments> {
    let mut missing = Vec::new();
    for cell in matrix.cells() {
        let covering = existing.iter().find(|e| {
            e.can_build() && cell.is_covered_by(&e.env.python_version, &e.env.torch_version)
        });
        match covering {
            Some(env) => progress(&format!("matrix: {cell} is `{}`", env.label)),
            None => missing.push(cell),
        }
    }
    if missing.is_empty() {
        return Ok(MatrixEnvironments {
            environments: Vec::new(),
            dir: None,
            _cell_locks: Vec::new(),
            _throwaway: None,
        });
    }
    let keep = match &options.keep_envs {
        Some(dir) => Some(private_keep_dir(dir)?),
        None => None,
    };
    let uv = Uv::locate(
        options.uv.as_deref(),
        abicache::env_vars::var_os(abicache::env_vars::PATH).as_deref(),
    )?;
    let (root, throwaway) = match keep {
        Some(dir) => (dir, None),
        None => {
            let parent = store.layout().matrix_envs_dir();
            fs_err::create_dir_all(&parent)?;
            let run = RunDir::new(&parent)?;
            let root = run.dir.path().to_path_buf();
            (root, Some(run))
        }
    };
    let search = InterpreterSearch::from_env();
    let mut environments = Vec::with_capacity(missing.len());
    let mut cell_locks = Vec::with_capacity(missing.len());
    for cell in &missing {
        let interpreter = search.find(&cell.python, &uv)?;
        let dir = root.join(cell.dir_name());
        // One run at a time creates, replaces or uses a cell's environment.
        let lock_path = root.join(format!("{}.lock", cell.dir_name()));
        cell_locks.push(FileLock::acquire(
            &lock_path,
            &format!("the matrix environment `{}`", dir.display()),
            store.lock_timeout(),
        )?);
        create_one(&uv, cell, &interpreter, &dir, progress)?;
        let python = dir.join("bin/python");
        let probed = probe_interpreter(&python, None)?;
        let label = if throwaway.is_some() {
            cell.dir_name()
        } else {
            python.display().to_string()
        };
        environments.push(FleetEnvironment {
            label,
            env: probed.environment,
            site_packages: probed.site_packages,
        });
    }
    Ok(MatrixEnvironments {
        environments,
        dir: Some(root),
        _cell_locks: cell_locks,
        _throwaway: throwaway,
    })
}

/// Creates the environment of `cell` at `dir`, or reuses it when its stamp
/// says it was created from the same interpreter and requirement.
fn create_one(
    uv: &Uv,
    cell: &MatrixCell,
    interpreter: &FoundInterpreter,
    dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<(), MatrixError> {
    let requirement = cell.torch_requirement();
    let stamp = format!("{}\n{requirement}\n", interpreter.path.display());
    let stamp_path = dir.join(STAMP_FILE);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        progress(&format!("matrix: {cell}: reusing `{}`", dir.display()));
        return Ok(());
    }
    if dir.exists() {
        fs_err::remove_dir_all(dir)?;
    }
    progress(&format!(
        "matrix: {cell}: creating `{}` on Python {} (`{}`)",
        dir.display(),
        interpreter.version,
        interpreter.path.display()
    ));
    uv.create_venv(&interpreter.path, dir)?;
    let python = dir.join("bin/python");
    progress(&format!(
        "matrix: {cell}: installing `{requirement}` without its CUDA dependencies \
         (a wheel of about 1 GB the first time; uv caches it)"
    ));
    uv.install(&python, std::slice::from_ref(&requirement), true)?;
    let metadata = uv::torch_metadata(dir).ok_or_else(|| {
        std::io::Error::other(format!(
            "`{requirement}` was installed into `{}` but its `METADATA` is missing",
            dir.display()
        ))
    })?;
    let pure = pure_python_requirements(&fs_err::read_to_string(&metadata)?);
    if !pure.is_empty() {
        progress(&format!(
            "matrix: {cell}: installing torch's pure-Python dependencies ({})",
            pure.join(", ")
        ));
        uv.install(&python, &pure, false)?;
    }
    fs_err::write(&stamp_path, stamp)?;
    Ok(())
}
