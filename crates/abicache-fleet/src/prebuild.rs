//! The one prebuild pipeline both front ends run (`abicache prebuild` and
//! `abicache.prebuild`): specs, selection, probes, environment files, the
//! matrix's environments, then [`crate::fleet::build_each_key_once`]. Its errors name
//! what is wrong, never a command-line flag; the command line adds those.

use std::path::PathBuf;
use std::sync::Arc;

use abicache_build::Progress;
use abicache_key::SpecFile;
use abicache_store::Store;

use crate::error::{Error, Result};
use crate::fleet::{build_each_key_once, Coverage, FleetEnvironment, FleetExtension};
use crate::matrix::{Matrix, MatrixOptions};
use abicache::settings::Settings;
use abicache::SessionOptions;

/// What to prebuild, as both front ends (`abicache prebuild` and
/// `abicache.prebuild`) pass it to [`prebuild()`].
#[derive(Debug, Clone, Default)]
pub struct PrebuildRequest {
    /// Spec files (`abicache.toml`); each one's directory is its
    /// extensions' fingerprint root.
    pub specs: Vec<PathBuf>,
    /// Prebuild plan directories (`abicache run --record PLAN`); each
    /// entry is laid out again under a throwaway directory (its root) for
    /// the run ([`crate::plan::stage`]).
    pub plans: Vec<PathBuf>,
    /// The settings the caller resolved and checked before any work; every
    /// session of the run uses them (the default: every documented default).
    pub settings: Arc<Settings>,
    /// Only these extensions; every extension of every spec when empty.
    pub extensions: Vec<String>,
    /// Interpreters with torch to key and build for (probed).
    pub pythons: Vec<PathBuf>,
    /// Environment TOML files; one without a `torch_dir` is keyed only.
    pub env_files: Vec<PathBuf>,
    /// A `python=… torch=…` matrix whose cells no interpreter covers are
    /// created with `uv` ([`crate::matrix`]).
    pub matrix: Option<String>,
    /// Where the matrix's environments go and which `uv` creates them.
    pub matrix_options: MatrixOptions,
    /// How each key is built.
    pub options: SessionOptions,
}

/// The one prebuild pipeline: refuses a request without any environment,
/// parses the matrix and checks the directory for kept environments
/// (before anything is probed or created), loads the
/// specs, selects the extensions, probes the interpreters, reads the
/// environment files, creates the matrix's missing environments (removed
/// again before this returns unless `matrix_options.keep_envs` is set),
/// then runs [`build_each_key_once`]. `report` receives the matrix's progress lines,
/// `progress` the build events.
pub fn prebuild(
    store: &Store,
    request: &PrebuildRequest,
    report: &dyn Fn(&str),
    progress: &dyn Fn(Progress),
) -> Result<Coverage> {
    if request.pythons.is_empty() && request.env_files.is_empty() && request.matrix.is_none() {
        return Err(Error::NoFleetEnvironment);
    }
    let matrix = request
        .matrix
        .as_deref()
        .map(str::parse::<Matrix>)
        .transpose()?;
    // `--keep-envs` names a directory whose environments are run: checked
    // before anything (an interpreter probe included) runs, even when
    // `--python` serves every cell and nothing would be created there.
    if let (Some(_), Some(dir)) = (&matrix, &request.matrix_options.keep_envs) {
        crate::matrix::private_keep_dir(dir)?;
    }
    let files = request
        .specs
        .iter()
        .map(|path| SpecFile::load(path))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // Held until the builds are done: the plans' entries are laid out there.
    let staging = if request.plans.is_empty() {
        None
    } else {
        Some(tempfile::tempdir().map_err(|e| Error::Plan {
            path: std::env::temp_dir(),
            message: format!("cannot make a directory to lay the plan out in: {e}"),
        })?)
    };
    let extensions = match &staging {
        None => FleetExtension::select(&files, &request.extensions)?,
        Some(staging) => {
            let mut all = FleetExtension::select(&files, &[])?;
            for (i, plan) in request.plans.iter().enumerate() {
                all.extend(crate::plan::stage(
                    plan,
                    &staging.path().join(i.to_string()),
                )?);
            }
            select_by_name(all, &request.extensions)?
        }
    };
    let mut environments = Vec::new();
    for python in &request.pythons {
        environments.push(FleetEnvironment::probe(python, store)?);
    }
    for file in &request.env_files {
        environments.push(FleetEnvironment::from_file(file)?);
    }
    // Held until the builds are done: dropping it removes throwaway environments.
    let created = match &matrix {
        Some(matrix) => {
            let created = crate::matrix::create_missing(
                store,
                matrix,
                &environments,
                &request.matrix_options,
                report,
            )?;
            environments.extend(created.environments.iter().cloned());
            Some(created)
        }
        None => None,
    };
    let coverage = build_each_key_once(
        store,
        &request.settings,
        &environments,
        &extensions,
        request.options,
        progress,
    );
    drop(created);
    drop(staging);
    coverage
}

/// The extensions named in `names` (all of them when it is empty); a name
/// none of them has is refused, naming those there are.
fn select_by_name(all: Vec<FleetExtension>, names: &[String]) -> Result<Vec<FleetExtension>> {
    for name in names {
        if !all.iter().any(|e| &e.spec.name == name) {
            let mut available: Vec<String> = all.iter().map(|e| e.spec.name.clone()).collect();
            available.dedup();
            return Err(Error::UnknownExtension {
                name: name.clone(),
                available,
            });
        }
    }
    Ok(all
        .into_iter()
        .filter(|e| names.is_empty() || names.contains(&e.spec.name))
        .collect())
}
