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
/// `plans`: prebuild plan directories (`abicache run --record`), whose
/// entries are built too.
#[pyfunction]
#[pyo3(signature = (specs, pythons=Vec::new(), envs=Vec::new(), extensions=Vec::new(), cache_dir=None, *, jobs=None, quiet=true, matrix=None, uv=None, keep_envs=None, plans=Vec::new()))]
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
    plans: Vec<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut request = PrebuildRequest {
        specs,
        plans,
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

/// Records the spec's load into the prebuild plan directory `plan`
/// (`ABICACHE_RECORD`, `abicache run --record`): its key and payload in
/// this environment, its spec relative to `root` and a copy of every file
/// the key hashed ([`abicache_fleet::plan::record`]). Returns `True` when
/// the plan did not have the key yet.
#[pyfunction]
#[pyo3(signature = (plan, spec, env, root, cache_dir=None))]
pub fn record_plan_entry(
    py: Python<'_>,
    plan: PathBuf,
    spec: &str,
    env: &str,
    root: PathBuf,
    cache_dir: Option<PathBuf>,
) -> PyResult<bool> {
    let (spec, env) = (
        crate::convert::spec_from_json(spec)?,
        crate::convert::env_from_json(env)?,
    );
    let recorded = py.detach(|| {
        let session = crate::session(env, cache_dir, false)?;
        let prepared = session.prepare(&spec, &root)?;
        let keyed = &prepared.keyed;
        abicache_fleet::plan::record(&plan, &spec, &root, &keyed.key, &keyed.payload.lines())
    });
    match recorded {
        Ok(r) => Ok(r == abicache_fleet::plan::Recorded::Added),
        Err(e) => Err(fleet_to_py(py, e)),
    }
}
