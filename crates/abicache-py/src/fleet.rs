//! `abicache.prebuild`: the `abicache prebuild` command for a package's
//! build step. Converts arguments and the coverage table; nothing more.

use std::path::PathBuf;

use abicache::build::{progress_reporter, ProgressMode};
use abicache::SessionOptions;
use abicache_fleet::{MatrixOptions, PrebuildRequest};
use pyo3::prelude::*;

use crate::convert::to_python;
use crate::errors::fleet_to_py;

/// Keys every extension of `specs` (paths of `abicache.toml` files) for
/// every interpreter in `pythons` and environment file in `envs`, builds
/// each distinct key once, and returns the coverage table as a dict
/// (`cells`, `environments`, `distinct_keys`, `built`, `cached`,
/// `key_only`, `failed`), as `abicache prebuild --json` prints it. With
/// `matrix` (`"python=3.10,3.12 torch=2.12,2.15"`), the cells no interpreter
/// of `pythons` covers are created with `uv` first, as `--matrix` does.
#[pyfunction]
#[pyo3(signature = (specs, pythons=Vec::new(), envs=Vec::new(), extensions=Vec::new(), cache_dir=None, *, jobs=None, quiet=true, matrix=None, uv=None, keep_envs=None))]
#[allow(clippy::too_many_arguments)]
pub fn prebuild<'py>(
    py: Python<'py>,
    specs: Vec<PathBuf>,
    pythons: Vec<PathBuf>,
    envs: Vec<PathBuf>,
    extensions: Vec<String>,
    cache_dir: Option<PathBuf>,
    jobs: Option<usize>,
    quiet: bool,
    matrix: Option<String>,
    uv: Option<PathBuf>,
    keep_envs: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut request = PrebuildRequest {
        specs,
        // Resolved below, with the GIL released, before any work.
        settings: Default::default(),
        extensions,
        pythons,
        env_files: envs,
        matrix,
        matrix_options: MatrixOptions { uv, keep_envs },
        options: SessionOptions {
            rebuild: false,
            jobs,
        },
    };
    let report = |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let mode = if quiet {
        ProgressMode::Quiet
    } else {
        ProgressMode::Auto
    };
    let coverage = py.detach(|| {
        request.settings = crate::settings(cache_dir)?;
        let store = crate::store_for(&request.settings)?;
        abicache_fleet::prebuild(&store, &request, &report, &progress_reporter(mode))
    });
    to_python(py, &coverage.map_err(|e| fleet_to_py(py, e))?)
}
