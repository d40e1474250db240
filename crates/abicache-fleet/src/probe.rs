//! Probing a Python interpreter for its environment, without importing torch.
//!
//! Like uv's interpreter query: an embedded script (the Python package's
//! `abicache/_probe.py`, which also probes the running interpreter) runs under
//! `python -I -B` and prints one tagged JSON line. torch is located with
//! `importlib.util.find_spec` (which does not execute it) and its
//! `torch/version.py` is read, so a probe costs a Python start-up (~20 ms),
//! not an `import torch` (~1 s). Answers are cached under the cache root,
//! keyed by the interpreter's path and ctime and validated against the
//! mtime of the `torch/version.py` they read, so installing another torch
//! into the same venv is noticed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use abicache_build::{run_captured, RunFailure, RunLimits};
use abicache_key::Environment;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use abicache::env_vars::ABICACHE_PROBE_TIMEOUT;

/// How long a probe may run when `ABICACHE_PROBE_TIMEOUT` is unset.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most a probe may print on stdout or on stderr (the answer is a few KiB).
const PROBE_OUTPUT_CAP: u64 = 4 << 20;

/// The Python package's probe, so both probes share one definition of the fields.
const PROBE_SCRIPT: &str = include_str!("../../../python/abicache/_probe.py");
const PROBE_TAG: &str = "ABICACHE-PROBE ";
/// Bumped whenever the probe script's output changes meaning.
const PROBE_FORMAT: u32 = 1;

/// What a probe found: the environment to key and build for, plus where
/// the interpreter's packages live (searched for NVIDIA's nvcc wheels).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbedInterpreter {
    /// The interpreter as given.
    pub python: PathBuf,
    /// The environment; `nvcc_version` and `cuda_archs` are left for the session.
    pub environment: Environment,
    /// `purelib` and `platlib`.
    pub site_packages: Vec<PathBuf>,
}

#[derive(Deserialize)]
struct RawProbe {
    python_version: String,
    python_soabi: Option<String>,
    python_abiflags: Option<String>,
    python_include: Option<PathBuf>,
    site_packages: Vec<PathBuf>,
    torch: Option<RawTorch>,
}

#[derive(Deserialize)]
struct RawTorch {
    dir: PathBuf,
    version_py: PathBuf,
    version: Option<String>,
    cuda: Option<String>,
    hip: Option<String>,
    cxx11_abi_flag: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct CacheRecord {
    format: u32,
    python_ctime: [i64; 4],
    version_py: Option<PathBuf>,
    version_py_mtime: Option<(u64, u32)>,
    probed: ProbedInterpreter,
}

/// Probes `python`, using and refreshing the cached answer in `cache_dir`
/// when given (the answer is reused only while the interpreter's ctime and
/// the mtime of the `torch/version.py` it read are unchanged).
pub fn probe_interpreter(python: &Path, cache_dir: Option<&Path>) -> Result<ProbedInterpreter> {
    // The absolute path, not the canonical one: a venv's `bin/python` is a
    // symlink to the base interpreter, and two venvs must not share a record.
    let python = &std::path::absolute(python).unwrap_or_else(|_| python.to_path_buf());
    let ctime = ctime_of(python)?;
    let record_path = cache_dir.map(|dir| {
        let hash = blake3::hash(python.as_os_str().as_encoded_bytes());
        dir.join(format!("{}.json", &hash.to_hex()[..32]))
    });
    if let Some(path) = &record_path {
        if let Some(probed) = read_cached(path, ctime) {
            return Ok(probed);
        }
    }
    let (probed, version_py) = run_probe(python)?;
    if let Some(path) = &record_path {
        let record = CacheRecord {
            format: PROBE_FORMAT,
            python_ctime: ctime,
            version_py_mtime: version_py.as_deref().and_then(mtime_of),
            version_py,
            probed: probed.clone(),
        };
        // A cache that cannot be written only costs the next probe its speed.
        let _ = write_atomic(path, &serde_json::to_vec(&record).unwrap_or_default());
    }
    Ok(probed)
}

/// `ABICACHE_PROBE_TIMEOUT` (seconds, fractions allowed), else
/// [`DEFAULT_PROBE_TIMEOUT`]; anything but a positive number is an error.
pub fn probe_timeout_from_env() -> Result<Duration> {
    let Some(value) = abicache::env_vars::var(ABICACHE_PROBE_TIMEOUT) else {
        return Ok(DEFAULT_PROBE_TIMEOUT);
    };
    abicache_env_vars::parse_seconds(&value)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            abicache::Error::InvalidVariable {
                name: ABICACHE_PROBE_TIMEOUT,
                value: value.clone(),
                problem: "is not a positive number of seconds; set it to how long an \
                          interpreter probe may take (e.g. `60`), or unset it",
            }
            .into()
        })
}

fn read_cached(path: &Path, ctime: [i64; 4]) -> Option<ProbedInterpreter> {
    // A probe record is small; never follow a link or block on a FIFO planted there.
    let bytes = abicache_fs::read_bounded(path, abicache_fs::Follow::No, PROBE_OUTPUT_CAP).ok()?;
    let record: CacheRecord = serde_json::from_slice(&bytes).ok()?;
    let fresh = record.format == PROBE_FORMAT
        && record.python_ctime == ctime
        && record.version_py.as_deref().and_then(mtime_of) == record.version_py_mtime;
    fresh.then_some(record.probed)
}

fn run_probe(python: &Path) -> Result<(ProbedInterpreter, Option<PathBuf>)> {
    let fail = |message: String| Error::Probe {
        python: python.to_path_buf(),
        message,
    };
    let timeout = probe_timeout_from_env()?;
    let mut command = Command::new(python);
    command.args(["-I", "-B", "-c", PROBE_SCRIPT]);
    let limits = RunLimits {
        timeout: Some(timeout),
        cap: Some(PROBE_OUTPUT_CAP),
        ..RunLimits::default()
    };
    let output = run_captured(&mut command, limits).map_err(|e| match e {
        RunFailure::Spawn(e) | RunFailure::Wait(e) => fail(format!(
            "{e}; pass the path of a Python executable, e.g. `.venv/bin/python`"
        )),
        RunFailure::TimedOut | RunFailure::Cancelled => fail(format!(
            "it did not answer within {} s, so it was stopped; pass the path of a Python \
             executable (e.g. `.venv/bin/python`), or set `{ABICACHE_PROBE_TIMEOUT}` \
             (seconds) to wait longer",
            timeout.as_secs_f64()
        )),
        RunFailure::Flooded { stream } => fail(format!(
            "it printed more than {} MiB to {stream}, so it was stopped; pass the path of a \
             Python executable, e.g. `.venv/bin/python`",
            PROBE_OUTPUT_CAP >> 20
        )),
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix(PROBE_TAG)) else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(fail(format!(
            "it did not answer the probe ({}); its output was:\n{}{}",
            output.status,
            stdout.trim_end(),
            stderr.trim_end()
        )));
    };
    let raw: RawProbe =
        serde_json::from_str(line).map_err(|e| fail(format!("unreadable probe answer: {e}")))?;
    let torch = raw.torch.ok_or_else(|| {
        fail("torch is not installed in it; install torch into that environment (`python -m pip install torch`) or pass `--env FILE`".into())
    })?;
    if let Some(error) = &torch.error {
        return Err(fail(format!(
            "reading `{}` failed: {error}",
            torch.version_py.display()
        )));
    }
    let torch_version = torch.version.clone().ok_or_else(|| {
        fail(format!(
            "`{}` has no `__version__`; reinstall torch",
            torch.version_py.display()
        ))
    })?;
    let environment = Environment {
        python_version: raw.python_version,
        python_soabi: raw.python_soabi.filter(|s| !s.is_empty()),
        python_abiflags: raw.python_abiflags,
        cxx11_abi: cxx11_abi(&torch_version, torch.cxx11_abi_flag.as_deref()),
        torch_version,
        torch_cuda: torch.cuda,
        torch_hip: torch.hip,
        nvcc_version: None,
        torch_dir: Some(torch.dir),
        python_include: raw.python_include,
        cuda_include_dirs: Vec::new(),
        cuda_archs: None,
        host_cpu: None,
        compiler_isa: None,
        tvm_ffi_abi: None,
        tvm_ffi_include_dirs: Vec::new(),
        tvm_ffi_lib_dir: None,
    };
    let probed = ProbedInterpreter {
        python: python.to_path_buf(),
        environment,
        site_packages: raw.site_packages,
    };
    Ok((probed, Some(torch.version_py)))
}

/// torch's `_GLIBCXX_USE_CXX11_ABI` without importing torch: an explicit
/// `-D_GLIBCXX_USE_CXX11_ABI=N` in `TorchConfig.cmake` wins; otherwise
/// torch ≥ 2.7 (whose wheels are all built with the new ABI and whose
/// `compiled_with_cxx11_abi()` returns `True` unconditionally) is `true`,
/// and older torch defaults to the pre-2.7 PyPI wheels' `false`.
fn cxx11_abi(torch_version: &str, cmake_flag: Option<&str>) -> bool {
    if let Some(flag) = cmake_flag {
        return flag == "1";
    }
    match abicache_key::TorchVersion::parse(torch_version) {
        Ok(v) => v.major_minor() >= (2, 7),
        Err(_) => true,
    }
}

/// The ctimes of the interpreter path itself (a venv's symlink, recreated
/// with the venv) and of the executable it resolves to.
fn ctime_of(path: &Path) -> Result<[i64; 4]> {
    use std::os::unix::fs::MetadataExt;
    let fail = |e: std::io::Error| Error::Probe {
        python: path.to_path_buf(),
        message: format!("{e}; pass the path of a Python executable, e.g. `.venv/bin/python`"),
    };
    let link = fs_err::symlink_metadata(path).map_err(fail)?;
    let target = fs_err::metadata(path).map_err(fail)?;
    Ok([
        link.ctime(),
        link.ctime_nsec(),
        target.ctime(),
        target.ctime_nsec(),
    ])
}

fn mtime_of(path: &Path) -> Option<(u64, u32)> {
    let d = std::fs::metadata(path)
        .ok()?
        .modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()?;
    Some((d.as_secs(), d.subsec_nanos()))
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so readers see the old file or the new one, never a part.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cxx11_abi;

    #[test]
    fn cxx11_abi_follows_cmake_flag_then_release() {
        assert!(!cxx11_abi("2.15.0", Some("0")));
        assert!(cxx11_abi("2.3.0", Some("1")));
        assert!(cxx11_abi("2.15.0+cu132", None));
        assert!(!cxx11_abi("2.6.0+cpu", None));
    }
}
