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

use std::path::{Path, PathBuf};

use abicache_store::Store;

pub use interpreters::{FoundInterpreter, InterpreterSearch};
pub use spec::{Matrix, MatrixCell};
pub use uv::{pure_python_requirements, Uv};

use crate::fleet::FleetEnvironment;
use crate::probe::probe_interpreter;

/// The file, written last, that marks a kept environment complete; it
/// records what the environment was created from.
const STAMP_FILE: &str = ".abicache-matrix";

/// Why the matrix's environments could not be created.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The `--matrix` string is malformed.
    #[error("invalid `--matrix '{matrix}'`: {reason}; expected e.g. `--matrix '{example}'`")]
    Parse {
        /// The string as given.
        matrix: String,
        /// What is wrong with it.
        reason: String,
        /// A valid matrix.
        example: &'static str,
    },
    /// No `uv` on `PATH` and no `--uv`.
    #[error(
        "`--matrix` creates the missing environments with `uv`, and there is no `uv` on `PATH`: \
         install it (`pip install uv`; in a checkout of abicache, `scripts/setup-uv.sh`) or pass \
         `--uv PATH`"
    )]
    NoUv,
    /// `--uv PATH` names no file.
    #[error("`--uv {}` does not exist; pass the path of the `uv` program", path.display())]
    UvMissing {
        /// The path given.
        path: PathBuf,
    },
    /// No installed interpreter has the release.
    #[error(
        "no Python {version} interpreter on this machine (searched `{pyenv}/{version}*`, \
         `uv python find {version}` and `python{version}` on `PATH`); `--matrix` never downloads \
         interpreters: install one (`pyenv install {version}` or `uv python install {version}`) \
         or drop {version} from `python=` in `--matrix`"
    )]
    NoInterpreter {
        /// The release wanted.
        version: String,
        /// pyenv's versions directory searched.
        pyenv: String,
    },
    /// uv could not be started.
    #[error("could not run `{command}`: {message}; check `--uv` or the `uv` on `PATH`")]
    UvRun {
        /// The command.
        command: String,
        /// The OS error.
        message: String,
    },
    /// uv failed.
    #[error("`{command}` failed ({status}):\n{output}\n{hint}")]
    UvFailed {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
        /// What uv printed.
        output: String,
        /// What to check.
        hint: String,
    },
    /// A file of an environment could not be read or written (path named).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

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
    _throwaway: Option<tempfile::TempDir>,
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
            _throwaway: None,
        });
    }
    let uv = Uv::locate(
        options.uv.as_deref(),
        crate::env_vars::var_os(crate::env_vars::PATH).as_deref(),
    )?;
    let (root, throwaway) = match &options.keep_envs {
        Some(dir) => {
            fs_err::create_dir_all(dir)?;
            (std::path::absolute(dir)?, None)
        }
        None => {
            let parent = store.layout().version_dir().join("matrix-envs");
            fs_err::create_dir_all(&parent)?;
            let tmp = tempfile::Builder::new()
                .prefix("run.")
                .tempdir_in(&parent)
                .map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot create a directory in `{}`: {e}", parent.display()),
                    )
                })?;
            (tmp.path().to_path_buf(), Some(tmp))
        }
    };
    let search = InterpreterSearch::from_env();
    let mut environments = Vec::with_capacity(missing.len());
    for cell in &missing {
        let interpreter = search.find(&cell.python, &uv)?;
        let dir = root.join(cell.dir_name());
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
