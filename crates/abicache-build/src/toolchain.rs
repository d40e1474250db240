//! Toolchain discovery: the host C++ compiler, `nvcc`, the CUDA include and library
//! directories, and an optional compiler launcher (ccache, sccache).
//!
//! Search order, mirroring `torch.utils.cpp_extension` plus NVIDIA's pip wheels:
//! - host compiler: `CXX`, else `c++`, resolved on `PATH`;
//! - nvcc: `CUDA_HOME`/`CUDA_PATH` `bin/nvcc` (an error when that file is missing: an
//!   explicit setting is never silently overridden), else `nvcc` on `PATH`, else
//!   `<site-packages>/nvidia/*/bin/nvcc` for each site-packages directory the caller gives;
//! - `-ccbin` for nvcc: `CC`, as torch does;
//! - launcher: `ABICACHE_COMPILER_LAUNCHER` (a name on `PATH` or a path).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use abicache_fs::FileStamp;

use crate::error::BuildError;
use crate::quote::shell_join;

/// The environment variables discovery reads, captured once so that discovery is
/// deterministic and testable without touching the process environment.
#[derive(Debug, Clone, Default)]
pub struct ToolchainEnv {
    /// `CXX`: the host C++ compiler (name or path).
    pub cxx: Option<String>,
    /// `CC`: passed to nvcc as `-ccbin`, as torch does.
    pub cc: Option<String>,
    /// `CUDA_HOME`, else `CUDA_PATH`.
    pub cuda_home: Option<PathBuf>,
    /// `PATH`.
    pub path: Option<OsString>,
    /// `ABICACHE_COMPILER_LAUNCHER`, e.g. `ccache` or `sccache`.
    pub launcher: Option<String>,
}

impl ToolchainEnv {
    /// Reads the variables from the running process; empty values count as unset.
    pub fn from_process() -> Self {
        use abicache_env_vars::{var, var_os};
        use abicache_env_vars::{ABICACHE_COMPILER_LAUNCHER, CC, CUDA_HOME, CUDA_PATH, CXX, PATH};
        ToolchainEnv {
            cxx: var(CXX),
            cc: var(CC),
            cuda_home: var_os(CUDA_HOME)
                .or_else(|| var_os(CUDA_PATH))
                .map(PathBuf::from),
            path: var_os(PATH),
            launcher: var(ABICACHE_COMPILER_LAUNCHER),
        }
    }
}

/// A probed compiler: where it is and what it says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// Absolute path of the executable.
    pub path: PathBuf,
    /// First line of `--version`, e.g. `c++ (Debian 12.2.0-14) 12.2.0`.
    pub version: String,
}

/// A probed `nvcc` and the CUDA installation it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nvcc {
    /// The executable and its `--version` line that names the release.
    pub tool: Tool,
    /// The release as `major.minor`, e.g. `13.2`.
    pub release: String,
    /// Where it was found: `CUDA_HOME`, `PATH` or `pip wheel`.
    pub origin: String,
    /// CUDA include directories (`<root>/include`, or every `nvidia/*/include` of a wheel set).
    pub include_dirs: Vec<PathBuf>,
    /// The directory holding `libcudart`, when one was found.
    pub lib_dir: Option<PathBuf>,
    /// The linker flag for the CUDA runtime: `-lcudart`, or `-l:libcudart.so.N` when only
    /// the versioned library exists (NVIDIA's pip wheels ship no `libcudart.so`).
    pub cudart_flag: String,
}

/// Everything needed to compile and link: the host compiler, optionally nvcc, a launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    /// The host C++ compiler; also the linker driver.
    pub cxx: Tool,
    /// `nvcc`, when discovery was asked for CUDA.
    pub nvcc: Option<Nvcc>,
    /// `CC`, passed to nvcc as `-ccbin` (torch does the same).
    pub ccbin: Option<String>,
    /// The compiler launcher prepended to compile commands (never to the link).
    pub launcher: Option<PathBuf>,
}

impl Toolchain {
    /// Finds the toolchain. With `cuda`, nvcc is required; `site_packages` are the
    /// directories searched for NVIDIA's pip wheels (typically the parent of torch's dir).
    pub fn discover(
        env: &ToolchainEnv,
        site_packages: &[PathBuf],
        cuda: bool,
    ) -> Result<Toolchain, BuildError> {
        let cxx = find_cxx(env)?;
        let nvcc = if cuda {
            Some(find_nvcc(env, site_packages)?)
        } else {
            None
        };
        let launcher = match &env.launcher {
            None => None,
            Some(l) => Some(resolve_program(l, env.path.as_deref()).ok_or_else(|| {
                BuildError::LauncherNotFound {
                    launcher: l.clone(),
                }
            })?),
        };
        Ok(Toolchain {
            cxx,
            nvcc,
            ccbin: env.cc.clone(),
            launcher,
        })
    }

    /// The toolchain as `name → value` lines for manifests and build reports.
    pub fn describe(&self) -> std::collections::BTreeMap<String, String> {
        let mut m = std::collections::BTreeMap::new();
        m.insert("cxx".into(), self.cxx.path.display().to_string());
        m.insert("cxx_version".into(), self.cxx.version.clone());
        if let Some(n) = &self.nvcc {
            m.insert("nvcc".into(), n.tool.path.display().to_string());
            m.insert("nvcc_version".into(), n.release.clone());
            m.insert("nvcc_origin".into(), n.origin.clone());
        }
        if let Some(cc) = &self.ccbin {
            m.insert("ccbin".into(), cc.clone());
        }
        if let Some(l) = &self.launcher {
            m.insert("launcher".into(), l.display().to_string());
        }
        m
    }
}

/// Finds the host compiler: `CXX`, else `c++` on `PATH`, and reads its version.
pub fn find_cxx(env: &ToolchainEnv) -> Result<Tool, BuildError> {
    let (wanted, looked_for) = match &env.cxx {
        Some(cxx) => (cxx.as_str(), format!("`CXX={cxx}` (no such executable)")),
        None => ("c++", "`c++` on `PATH` (`CXX` is not set)".to_string()),
    };
    let path = resolve_program(wanted, env.path.as_deref())
        .ok_or(BuildError::CompilerNotFound { looked_for })?;
    let version = probe_version(&path, "CXX")?;
    let first = version
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    Ok(Tool {
        path,
        version: first,
    })
}

/// Finds nvcc (see the module doc for the order), its release and its CUDA directories.
pub fn find_nvcc(env: &ToolchainEnv, site_packages: &[PathBuf]) -> Result<Nvcc, BuildError> {
    let mut searched = Vec::new();
    let (path, origin) = 'found: {
        if let Some(home) = &env.cuda_home {
            let nvcc = home.join("bin").join("nvcc");
            if nvcc.is_file() {
                break 'found (nvcc, "CUDA_HOME");
            }
            // An explicit CUDA_HOME that has no nvcc is an error, not a hint.
            searched.push(format!(
                "`{}` (from `CUDA_HOME`/`CUDA_PATH`)",
                nvcc.display()
            ));
            return Err(BuildError::NvccNotFound { searched });
        }
        searched.push("`CUDA_HOME` and `CUDA_PATH` (not set)".to_string());
        if let Some(p) = which("nvcc", env.path.as_deref()) {
            break 'found (p, "PATH");
        }
        searched.push("`nvcc` on `PATH`".to_string());
        for sp in site_packages {
            if let Some(p) = wheel_dirs(sp)
                .into_iter()
                .map(|d| d.join("bin").join("nvcc"))
                .find(|p| p.is_file())
            {
                break 'found (p, "pip wheel");
            }
            searched.push(format!(
                "`{}`",
                sp.join("nvidia")
                    .join("*")
                    .join("bin")
                    .join("nvcc")
                    .display()
            ));
        }
        return Err(BuildError::NvccNotFound { searched });
    };
    let output = probe_version(&path, "CUDA_HOME")?;
    let release = parse_nvcc_release(&output).ok_or_else(|| BuildError::ToolProbe {
        program: path.clone(),
        command: shell_join([path.display().to_string(), "--version".into()]),
        output: output.clone(),
        status: "no `release X.Y` in its output".into(),
        fix: "`CUDA_HOME`".into(),
    })?;
    let version_line = output
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or_default()
        .trim()
        .to_string();
    // `<root>/bin/nvcc`: the root is a CUDA toolkit or one of NVIDIA's wheels.
    let root = path
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let wheel_set = root
        .parent()
        .filter(|p| p.file_name() == Some(OsStr::new("nvidia")))
        .map(Path::to_path_buf);
    let mut include_dirs = Vec::new();
    let root_include = root.join("include");
    if root_include.is_dir() && root_include != Path::new("/usr/include") {
        include_dirs.push(root_include);
    }
    let mut lib_candidates = vec![root.join("lib64"), root.join("lib")];
    if let Some(nvidia) = &wheel_set {
        // NVIDIA's wheels split CUDA over `nvidia/<component>/`; all of them are headers
        // an extension may use (cu12: cuda_runtime, cublas, ...; cu13: cu13, cudnn, nccl).
        let site = nvidia.parent().unwrap_or(nvidia);
        for dir in wheel_dirs(site) {
            let inc = dir.join("include");
            if inc.is_dir() && !include_dirs.contains(&inc) {
                include_dirs.push(inc);
            }
            lib_candidates.push(dir.join("lib"));
        }
    }
    let (lib_dir, cudart_flag) = lib_candidates
        .iter()
        .find_map(|d| cudart_in(d).map(|flag| (Some(d.clone()), flag)))
        .unwrap_or((None, "-lcudart".to_string()));
    Ok(Nvcc {
        tool: Tool {
            path,
            version: version_line,
        },
        release,
        origin: origin.to_string(),
        include_dirs,
        lib_dir,
        cudart_flag,
    })
}

/// The `nvidia/*` directories of one site-packages directory, sorted by name.
fn wheel_dirs(site_packages: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(site_packages.join("nvidia"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The link flag for `libcudart` in `dir`, if it holds one.
fn cudart_in(dir: &Path) -> Option<String> {
    if dir.join("libcudart.so").exists() {
        return Some("-lcudart".into());
    }
    let mut versioned: Vec<(u32, String)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let v = name.strip_prefix("libcudart.so.")?;
            let major: u32 = v.split('.').next()?.parse().ok()?;
            Some((major, name))
        })
        .collect();
    versioned.sort();
    versioned.pop().map(|(_, name)| format!("-l:{name}"))
}

/// Parses `release 13.2,` out of `nvcc --version` output into `13.2`.
pub fn parse_nvcc_release(output: &str) -> Option<String> {
    let rest = &output[output.find("release ")? + "release ".len()..];
    let release: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = release.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    if major.is_empty() || minor.is_empty() {
        return None;
    }
    Some(format!("{major}.{minor}"))
}

/// A program given as a path (contains `/`) must exist; a bare name is looked up on `path`.
pub fn resolve_program(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then(|| std::path::absolute(&p).unwrap_or(p));
    }
    which(program, path)
}

/// The first executable file called `name` in the directories of `path` (a `PATH` value).
pub fn which(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Runs `<program> --version` and returns stdout+stderr.
/// `program --version`, run once per process per program file: a successful
/// answer is remembered with the program's stat stamp (trusted only outside
/// the racy window), so a rewritten or replaced program is asked again. A
/// warm CUDA load in Python builds a new session each time and would
/// otherwise spawn `nvcc --version` before its key is looked up.
fn probe_version(program: &Path, fix: &str) -> Result<String, BuildError> {
    static ANSWERS: Mutex<Vec<(PathBuf, FileStamp, String)>> = Mutex::new(Vec::new());
    let stamp = std::fs::metadata(program)
        .ok()
        .and_then(|meta| FileStamp::trusted(&meta, SystemTime::now()));
    if let Some(stamp) = stamp {
        let answers = ANSWERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, text)) = answers.iter().find(|(p, s, _)| p == program && *s == stamp) {
            return Ok(text.clone());
        }
    }
    let text = run_version(program, fix)?;
    if let Some(stamp) = stamp {
        let mut answers = ANSWERS.lock().unwrap_or_else(PoisonError::into_inner);
        answers.retain(|(p, _, _)| p != program);
        answers.push((program.to_path_buf(), stamp, text.clone()));
    }
    Ok(text)
}

/// Runs `program --version` and returns its stdout and stderr.
fn run_version(program: &Path, fix: &str) -> Result<String, BuildError> {
    run_probe(program, &["--version".to_owned()], fix)
}

/// Runs the probe `program args…` with `LC_ALL=C`, no stdin and no
/// [`crate::SECRET_VARIABLES`], and returns
/// its stdout and stderr; when it cannot start or fails, the error names the
/// command, its output and `fix` (the variable that picks the program).
pub(crate) fn run_probe(program: &Path, args: &[String], fix: &str) -> Result<String, BuildError> {
    let probe_error = |output: String, status: String| BuildError::ToolProbe {
        program: program.to_path_buf(),
        command: shell_join(
            std::iter::once(program.display().to_string()).chain(args.iter().cloned()),
        ),
        output,
        status,
        fix: format!("`{fix}`"),
    };
    let out = crate::run::without_secrets(&mut Command::new(program))
        .args(args)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| probe_error(String::new(), format!("could not start: {e}")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(probe_error(text, out.status.to_string()));
    }
    Ok(text)
}

/// Launchers that send gcc/clang command lines to other machines as given
/// (distcc, distcc's pump, icecream). They understand no nvcc command line,
/// so nvcc units are compiled without them, locally; and what they send must
/// not name this machine's paths.
const DISTRIBUTING_LAUNCHERS: &[&str] = &["distcc", "pump", "icecc", "icerun"];

/// Whether `launcher` sends compiles to other machines with the command
/// line it is given (`DISTRIBUTING_LAUNCHERS`): such compiles get relative
/// paths (see `launch_dir.rs`). ccache and sccache compile here; their
/// remote holds results, not command lines to run.
pub fn launcher_distributes(launcher: &Path) -> bool {
    let name = launcher
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    DISTRIBUTING_LAUNCHERS.contains(&name)
}

/// Whether `launcher` may be put before nvcc: every launcher but those that
/// distribute gcc/clang command lines (nvcc through distcc would fail or run
/// locally anyway). ccache and sccache handle nvcc.
pub fn launcher_compiles_cuda(launcher: &Path) -> bool {
    !launcher_distributes(launcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distcc_and_icecream_are_not_put_before_nvcc() {
        for host_only in ["distcc", "/usr/bin/distcc", "icecc", "pump"] {
            assert!(!launcher_compiles_cuda(Path::new(host_only)), "{host_only}");
        }
        for any in ["ccache", "/opt/bin/sccache"] {
            assert!(launcher_compiles_cuda(Path::new(any)), "{any}");
        }
    }

    #[test]
    fn a_version_probe_runs_once_per_unchanged_program() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("runs");
        let program = dir.path().join("tool");
        let script = |answer: &str| {
            format!(
                "#!/bin/sh\necho run >> '{}'\necho '{answer}'\n",
                log.display()
            )
        };
        std::fs::write(&program, script("release 1.0")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let runs = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .count()
        };
        // A program changed just now is not trusted: asked every time.
        probe_version(&program, "X").unwrap();
        probe_version(&program, "X").unwrap();
        assert_eq!(runs(), 2);
        // Outside the racy window: asked once, then answered from memory.
        std::thread::sleep(abicache_fs::RACY_WINDOW + std::time::Duration::from_millis(100));
        assert_eq!(probe_version(&program, "X").unwrap().trim(), "release 1.0");
        assert_eq!(probe_version(&program, "X").unwrap().trim(), "release 1.0");
        assert_eq!(runs(), 3);
        // Rewritten: asked again, and the new answer is returned.
        std::fs::write(&program, script("release 2.0")).unwrap();
        assert_eq!(probe_version(&program, "X").unwrap().trim(), "release 2.0");
        assert_eq!(runs(), 4);
    }

    #[test]
    fn nvcc_release_is_parsed_from_version_output() {
        let out = "nvcc: NVIDIA (R) Cuda compiler driver\n\
                   Cuda compilation tools, release 13.2, V13.2.86\n";
        assert_eq!(parse_nvcc_release(out).as_deref(), Some("13.2"));
        assert_eq!(
            parse_nvcc_release("release 12.8, V12.8.61").as_deref(),
            Some("12.8")
        );
        assert_eq!(parse_nvcc_release("no version here"), None);
        assert_eq!(parse_nvcc_release("release 13,"), None);
    }
}
