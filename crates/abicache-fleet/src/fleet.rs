//! Prebuilding a fleet's matrix: every (extension, environment) key is
//! computed first, then each *distinct* key is built once, by the first
//! environment that can build it. Extensions that share a key across
//! environments (Python-agnostic ones across Pythons, stable-ABI ones
//! across torch releases) thus compile once for all of them.

use std::path::{Path, PathBuf};

use abicache_build::Progress;
use abicache_key::{Environment, ExtensionSpec, SpecFile};
use abicache_store::Store;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::probe::probe_interpreter;
use abicache::{Session, SessionOptions};

/// One environment of a fleet and where it came from.
#[derive(Debug, Clone)]
pub struct FleetEnvironment {
    /// How the user named it (the interpreter or environment file as given).
    pub label: String,
    /// What it is.
    pub env: Environment,
    /// Where its packages live (searched for NVIDIA's nvcc wheels).
    pub site_packages: Vec<PathBuf>,
}

impl FleetEnvironment {
    /// Probes the interpreter `python` (without importing torch; answers
    /// cached in `store`).
    pub fn probe(python: &Path, store: &Store) -> Result<FleetEnvironment> {
        let probe_cache = store.layout().version_dir().join("interpreters");
        let probed = probe_interpreter(python, Some(&probe_cache))?;
        Ok(FleetEnvironment {
            label: python.display().to_string(),
            env: probed.environment,
            site_packages: probed.site_packages,
        })
    }

    /// Reads an environment TOML (`--env FILE`).
    pub fn from_file(path: &Path) -> Result<FleetEnvironment> {
        let env = Environment::load(path)?;
        let site_packages = env
            .torch_dir
            .iter()
            .filter_map(|t| t.parent())
            .map(Path::to_path_buf)
            .collect();
        Ok(FleetEnvironment {
            label: path.display().to_string(),
            env,
            site_packages,
        })
    }

    /// True when there is a torch installation to build against; without
    /// one the environment can only be keyed.
    pub fn can_build(&self) -> bool {
        self.env
            .torch_dir
            .as_deref()
            .is_some_and(|dir| dir.join("include").is_dir() && dir.join("lib").is_dir())
    }
}

/// The extensions of a fleet: each spec with its fingerprint root.
#[derive(Debug, Clone)]
pub struct FleetExtension {
    /// The extension.
    pub spec: ExtensionSpec,
    /// Its spec file's directory (the fingerprint root).
    pub root: PathBuf,
}

impl FleetExtension {
    /// The extensions of `files`: all of them, or only those named in
    /// `names` (each name must exist in at least one file).
    pub fn select(files: &[SpecFile], names: &[String]) -> Result<Vec<FleetExtension>> {
        for name in names {
            if !files
                .iter()
                .any(|f| f.extensions.iter().any(|e| &e.name == name))
            {
                return Err(Error::UnknownExtension {
                    name: name.clone(),
                    available: files
                        .iter()
                        .flat_map(|f| f.extensions.iter().map(|e| e.name.clone()))
                        .collect(),
                });
            }
        }
        Ok(files
            .iter()
            .flat_map(|f| {
                f.extensions
                    .iter()
                    .filter(|e| names.is_empty() || names.contains(&e.name))
                    .map(|e| FleetExtension {
                        spec: e.clone(),
                        root: f.root.clone(),
                    })
            })
            .collect())
    }
}

/// What happened to one (environment, extension) cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellStatus {
    /// Its key was compiled in this run (once, maybe for another environment).
    Built,
    /// Its key was already in the cache (or was downloaded from the remote cache).
    Cached,
    /// No environment sharing its key has torch to build against: keyed only.
    KeyOnly,
    /// The environment cannot use the extension (e.g. torch below a stable
    /// target); see the message.
    Refused,
    /// The build of its key failed; see the message.
    Failed,
}

impl CellStatus {
    /// The word shown in the coverage table.
    pub fn as_str(self) -> &'static str {
        match self {
            CellStatus::Built => "built",
            CellStatus::Cached => "already cached",
            CellStatus::KeyOnly => "key-only",
            CellStatus::Refused => "refused",
            CellStatus::Failed => "failed",
        }
    }
}

/// One environment of the coverage table.
#[derive(Debug, Clone, Serialize)]
pub struct CoverageEnvironment {
    /// How the user named it.
    pub label: String,
    /// Its Python release.
    pub python_version: String,
    /// Its torch release.
    pub torch_version: String,
    /// False when it has no torch to build against (keyed only).
    pub can_build: bool,
}

/// One cell of the coverage table: environment × extension → key.
#[derive(Debug, Clone, Serialize)]
pub struct CoverageCell {
    /// The environment's label.
    pub environment: String,
    /// The extension's name.
    pub extension: String,
    /// The key, unless the cell was refused before a key existed.
    pub key: Option<String>,
    /// What happened.
    pub status: CellStatus,
    /// The environment whose torch built the key in this run (`built` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub built_by: Option<String>,
    /// The library in the cache (`built` and `already cached`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library: Option<PathBuf>,
    /// Why a cell was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The answer of [`build_each_key_once`]: the coverage table and its totals.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// The environments, in the order given.
    pub environments: Vec<CoverageEnvironment>,
    /// One cell per environment and extension, environment-major.
    pub cells: Vec<CoverageCell>,
    /// Distinct keys among the cells.
    pub distinct_keys: usize,
    /// Libraries compiled in this run.
    pub built: usize,
    /// Distinct keys that were already cached.
    pub cached: usize,
    /// Distinct keys that could only be keyed.
    pub key_only: usize,
    /// Distinct keys whose build failed.
    pub failed: usize,
}

/// Keys every extension for every environment, then builds each distinct
/// key once, with the first environment (in the order given) that shares
/// that key and has torch. A failed build is recorded in its cells and the
/// run goes on; [`Coverage::failed`] counts them. `progress` receives the
/// build events of every compile.
pub fn build_each_key_once(
    store: &Store,
    settings: &std::sync::Arc<abicache::settings::Settings>,
    environments: &[FleetEnvironment],
    extensions: &[FleetExtension],
    options: SessionOptions,
    progress: &dyn Fn(Progress),
) -> Result<Coverage> {
    if environments.is_empty() {
        return Err(Error::NoFleetEnvironment);
    }
    if extensions.is_empty() {
        return Err(Error::NoFleetExtension);
    }
    let sessions: Vec<Session> = environments
        .iter()
        .map(|e| {
            Session::new(store.clone(), e.env.clone())
                .with_settings(std::sync::Arc::clone(settings))
                .with_site_packages(e.site_packages.clone())
                .with_options(options)
        })
        .collect();
    let mut cells = Vec::with_capacity(environments.len() * extensions.len());
    // (cell index, environment index, extension index) per cell, keys first.
    let mut keyed: Vec<(usize, usize, usize)> = Vec::new();
    for (ei, (fleet_env, session)) in environments.iter().zip(&sessions).enumerate() {
        for (xi, ext) in extensions.iter().enumerate() {
            let mut cell = CoverageCell {
                environment: fleet_env.label.clone(),
                extension: ext.spec.name.clone(),
                key: None,
                status: CellStatus::KeyOnly,
                built_by: None,
                library: None,
                message: None,
            };
            match session.prepare(&ext.spec, &ext.root) {
                Ok(prepared) => {
                    cell.key = Some(prepared.keyed.key);
                    keyed.push((cells.len(), ei, xi));
                }
                Err(e) => {
                    cell.status = CellStatus::Refused;
                    cell.message = Some(e.to_string());
                }
            }
            cells.push(cell);
        }
    }

    let mut distinct: Vec<String> = Vec::new();
    for &(ci, _, _) in &keyed {
        let key = cells[ci].key.clone().expect("keyed cells have a key");
        if !distinct.contains(&key) {
            distinct.push(key);
        }
    }
    let (mut built, mut cached, mut key_only, mut failed) = (0, 0, 0, 0);
    for key in &distinct {
        let sharing: Vec<(usize, usize, usize)> = keyed
            .iter()
            .copied()
            .filter(|&(ci, _, _)| cells[ci].key.as_ref() == Some(key))
            .collect();
        let builder = sharing
            .iter()
            .copied()
            .find(|&(_, ei, _)| environments[ei].can_build());
        let (status, built_by, library, message) = match builder {
            Some((_, ei, xi)) => {
                let ext = &extensions[xi];
                match sessions[ei].build(&ext.spec, &ext.root, progress) {
                    Ok(outcome) if outcome.hit => {
                        (CellStatus::Cached, None, Some(outcome.path), None)
                    }
                    Ok(outcome) => (
                        CellStatus::Built,
                        Some(environments[ei].label.clone()),
                        Some(outcome.path),
                        None,
                    ),
                    Err(e) => (CellStatus::Failed, None, None, Some(e.to_string())),
                }
            }
            None => match store.lookup(key)?.hit {
                Some(hit) => (CellStatus::Cached, None, Some(hit.library), None),
                None => (CellStatus::KeyOnly, None, None, None),
            },
        };
        match status {
            CellStatus::Built => built += 1,
            CellStatus::Cached => cached += 1,
            CellStatus::KeyOnly => key_only += 1,
            _ => failed += 1,
        }
        for (ci, _, _) in sharing {
            let cell = &mut cells[ci];
            cell.status = status;
            cell.built_by.clone_from(&built_by);
            cell.library.clone_from(&library);
            cell.message.clone_from(&message);
        }
    }
    Ok(Coverage {
        environments: environments
            .iter()
            .map(|e| CoverageEnvironment {
                label: e.label.clone(),
                python_version: e.env.python_version.clone(),
                torch_version: e.env.torch_version.clone(),
                can_build: e.can_build(),
            })
            .collect(),
        cells,
        distinct_keys: distinct.len(),
        built,
        cached,
        key_only,
        failed,
    })
}

/// The coverage table as text: one row per cell, then the totals.
pub fn render_coverage(coverage: &Coverage) -> String {
    let env_of = |label: &str| coverage.environments.iter().find(|e| e.label == label);
    let rows: Vec<[String; 6]> = coverage
        .cells
        .iter()
        .map(|cell| {
            let env = env_of(&cell.environment);
            let mut status = cell.status.as_str().to_owned();
            if let Some(by) = cell
                .built_by
                .as_deref()
                .filter(|by| *by != cell.environment)
            {
                status.push_str(&format!(" (shared with {by})"));
            }
            [
                cell.environment.clone(),
                env.map_or_else(String::new, |e| e.python_version.clone()),
                env.map_or_else(String::new, |e| e.torch_version.clone()),
                cell.extension.clone(),
                cell.key.clone().unwrap_or_else(|| "-".to_owned()),
                status,
            ]
        })
        .collect();
    let header = [
        "ENVIRONMENT",
        "PYTHON",
        "TORCH",
        "EXTENSION",
        "KEY",
        "STATUS",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cols: [&str; 6]| {
        let mut text = String::new();
        for (i, (col, w)) in cols.iter().zip(widths).enumerate() {
            if i == 5 {
                text.push_str(col);
            } else {
                text.push_str(&format!("{col:<w$}  "));
            }
        }
        text.push('\n');
        text
    };
    let mut out = line(header);
    for row in &rows {
        out.push_str(&line(row.each_ref().map(String::as_str)));
    }
    out.push_str(&format!(
        "{} distinct key(s) for {} cell(s): {} built, {} already cached, {} key-only{}\n",
        coverage.distinct_keys,
        coverage.cells.len(),
        coverage.built,
        coverage.cached,
        coverage.key_only,
        if coverage.failed > 0 {
            format!(", {} failed", coverage.failed)
        } else {
            String::new()
        }
    ));
    for env in coverage.environments.iter().filter(|e| !e.can_build) {
        out.push_str(&format!(
            "note: `{}` has no torch installation (`torch_dir`), so its keys can only be computed, \
             not built; a key it shares with another environment is built there\n",
            env.label
        ));
    }
    for cell in &coverage.cells {
        if let Some(message) = &cell.message {
            out.push_str(&format!(
                "{} `{}` for `{}`: {message}\n",
                cell.status.as_str(),
                cell.extension,
                cell.environment
            ));
        }
    }
    out
}
