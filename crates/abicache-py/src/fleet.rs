//! `abicache.prebuild`: the `abicache prebuild` command for a package's
//! build step. Converts arguments and the coverage table; nothing more.

use std::path::PathBuf;

use abicache::build::{progress_reporter, ProgressMode};
use abicache::key::SpecFile;
use abicache::{FleetEnvironment, FleetExtension, Matrix, MatrixOptions, SessionOptions};
use pyo3::prelude::*;

use crate::convert::to_python;
use crate::errors::to_py;

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
        // Held until the builds are done: dropping it removes throwaway environments.
        let _created = match matrix.as_deref().map(str::parse::<Matrix>).transpose()? {
            Some(matrix) => {
                let options = MatrixOptions { uv, keep_envs };
                let report = |line: &str| {
                    if !quiet {
                        eprintln!("{line}");
                    }
                };
                let created = abicache::matrix::create_missing(
                    &store,
                    &matrix,
                    &environments,
                    &options,
                    &report,
                )?;
                environments.extend(created.environments.iter().cloned());
                Some(created)
            }
            None => None,
        };
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
