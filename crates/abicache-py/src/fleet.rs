//! `abicache.prebuild`: the `abicache prebuild` command for a package's
//! build step. Converts arguments and the coverage table; nothing more.

use std::path::PathBuf;

use abicache::build::{progress_reporter, ProgressMode};
use abicache::key::SpecFile;
use abicache::{FleetEnvironment, FleetExtension, SessionOptions};
use pyo3::prelude::*;

use crate::convert::to_python;
use crate::errors::to_py;

/// Keys every extension of `specs` (paths of `abicache.toml` files) for
/// every interpreter in `pythons` and environment file in `envs`, builds
/// each distinct key once, and returns the coverage table as a dict
/// (`cells`, `environments`, `distinct_keys`, `built`, `cached`,
/// `key_only`, `failed`), as `abicache prebuild --json` prints it.
#[pyfunction]
#[pyo3(signature = (specs, pythons=Vec::new(), envs=Vec::new(), extensions=Vec::new(), cache_dir=None, *, jobs=None, quiet=true))]
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
) -> PyResult<Bound<'py, PyAny>> {
    let coverage = py.detach(|| {
        let store = crate::open_store(cache_dir)?;
        let files = specs
            .iter()
            .map(|path| SpecFile::load(path))
            .collect::<Result<Vec<_>, _>>()?;
        let extensions = FleetExtension::select(&files, &extensions)?;
        let mut environments = Vec::new();
        for python in &pythons {
            environments.push(FleetEnvironment::probe(python, &store)?);
        }
        for env in &envs {
            environments.push(FleetEnvironment::from_file(env)?);
        }
        let mode = if quiet {
            ProgressMode::Quiet
        } else {
            ProgressMode::Auto
        };
        let options = SessionOptions {
            rebuild: false,
            jobs,
        };
        abicache::prebuild(
            &store,
            &environments,
            &extensions,
            options,
            &progress_reporter(mode),
        )
    });
    to_python(py, &coverage.map_err(|e| to_py(py, e))?)
}
