//! Finding an installed interpreter for a Python release of the matrix.
//! Interpreters are never downloaded: pyenv's versions, then `uv python
//! find` (installs uv knows, without downloads), then `python3.X` on `PATH`;
//! each candidate is run to confirm its release.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::uv::Uv;
use super::MatrixError;
use abicache_build::{run_captured, RunLimits};

/// How long a candidate interpreter may take to print its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);
const VERSION_SCRIPT: &str = "import sys; print('.'.join(map(str, sys.version_info[:3])))";

/// An interpreter found for a matrix release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundInterpreter {
    /// Its path.
    pub path: PathBuf,
    /// Its full release (`3.12.1`).
    pub version: String,
}

/// Where to look, from this process's environment.
#[derive(Debug, Clone)]
pub struct InterpreterSearch {
    /// `$HOME/.pyenv/versions`, when `HOME` is set.
    pub pyenv_versions: Option<PathBuf>,
    /// The `PATH` searched for `python3.X`.
    pub path: Option<std::ffi::OsString>,
}

impl InterpreterSearch {
    /// The search of this process: pyenv's versions under `HOME`, and `PATH`.
    pub fn from_env() -> InterpreterSearch {
        use abicache::env_vars::{var_os, HOME, PATH};
        InterpreterSearch {
            pyenv_versions: var_os(HOME).map(|home| Path::new(&home).join(".pyenv/versions")),
            path: var_os(PATH),
        }
    }

    /// The first installed interpreter whose release matches `wanted`
    /// (`3.12` or `3.12.1`).
    pub fn find(&self, wanted: &str, uv: &Uv) -> Result<FoundInterpreter, MatrixError> {
        let mut candidates = self.pyenv_candidates(wanted);
        candidates.extend(uv.find_python(wanted));
        let minor = wanted.split('.').take(2).collect::<Vec<_>>().join(".");
        candidates.extend(abicache_build::which(
            &format!("python{minor}"),
            self.path.as_deref(),
        ));
        for candidate in candidates {
            if let Some(version) = release_of(&candidate) {
                if super::spec::release_matches(wanted, &version) {
                    return Ok(FoundInterpreter {
                        path: candidate,
                        version,
                    });
                }
            }
        }
        Err(MatrixError::NoInterpreter {
            version: wanted.to_owned(),
            pyenv: self
                .pyenv_versions
                .as_ref()
                .map_or_else(|| "~/.pyenv/versions".into(), |d| d.display().to_string()),
        })
    }

    /// pyenv's `versions/X.Y.Z/bin/python` matching `wanted`, newest first
    /// (only plain releases: not `3.13.0t` or `3.12-dev`).
    fn pyenv_candidates(&self, wanted: &str) -> Vec<PathBuf> {
        let Some(dir) = &self.pyenv_versions else {
            return Vec::new();
        };
        let Ok(read) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut found: Vec<(Vec<u64>, PathBuf)> = read
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let parts = name
                    .split('.')
                    .map(|p| p.parse::<u64>().ok())
                    .collect::<Option<Vec<u64>>>()?;
                let python = entry.path().join("bin/python");
                (super::spec::release_matches(wanted, &name) && python.is_file())
                    .then_some((parts, python))
            })
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0));
        found.into_iter().map(|(_, path)| path).collect()
    }
}

/// The release `python` reports, or `None` when it does not run (a pyenv
/// shim for a version that is not selected, a broken link).
fn release_of(python: &Path) -> Option<String> {
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-B", "-c", VERSION_SCRIPT]);
    let limits = RunLimits {
        timeout: Some(VERSION_TIMEOUT),
        cap: Some(4096),
        ..RunLimits::default()
    };
    let out = run_captured(&mut cmd, limits).ok()?;
    if !out.status.success() {
        return None;
    }
    let version = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!version.is_empty()).then_some(version)
}
