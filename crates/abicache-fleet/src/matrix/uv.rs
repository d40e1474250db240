//! Driving `uv` to create a matrix environment: a venv on an installed
//! interpreter, torch without its CUDA dependencies, and the small
//! pure-Python packages `import torch` needs. uv never downloads an
//! interpreter here (`UV_PYTHON_DOWNLOADS=never`); packages come from the
//! index uv is configured with and land in uv's own cache (`UV_CACHE_DIR`,
//! default `~/.cache/uv`), so a rerun downloads nothing.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::MatrixError;

/// Packages torch depends on that a CPU or stable-ABI build never needs:
/// the CUDA runtime wheels and triton (several GB together).
const HEAVY_PREFIXES: &[&str] = &["nvidia-", "cuda-", "triton", "pytorch-triton"];

/// The `uv` program matrix environments are created with.
#[derive(Debug, Clone)]
pub struct Uv {
    program: PathBuf,
}

impl Uv {
    /// `flag` (`--uv PATH`) when given, else `uv` on `path` (a `PATH` value).
    pub fn locate(flag: Option<&Path>, path: Option<&OsStr>) -> Result<Uv, MatrixError> {
        match flag {
            Some(program) if program.is_file() => Ok(Uv {
                program: program.to_path_buf(),
            }),
            Some(program) => Err(MatrixError::UvMissing {
                path: program.to_path_buf(),
            }),
            None => abicache_build::which("uv", path)
                .map(|program| Uv { program })
                .ok_or(MatrixError::NoUv),
        }
    }

    /// The program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// `uv SUBCOMMAND --no-config` run in `cwd` (a private directory: the
    /// environment's own, or a fresh temporary one) that never fetches an
    /// interpreter: no `uv.toml` or `pyproject.toml` of any directory, and no
    /// user or system configuration, can redirect the package index.
    fn command(&self, cwd: &Path, subcommand: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(subcommand)
            .arg("--no-config")
            .current_dir(cwd)
            .env("UV_NO_CONFIG", "1")
            .env("UV_PYTHON_DOWNLOADS", "never");
        cmd
    }

    /// `uv python find --system --no-python-downloads VERSION`: an
    /// interpreter uv knows of (its managed installs, `PATH`), if any.
    pub fn find_python(&self, version: &str) -> Option<PathBuf> {
        let cwd = tempfile::tempdir().ok()?;
        let out = self
            .command(cwd.path(), &["python", "find"])
            .args(["--system", "--no-python-downloads", version])
            .output()
            .ok()?;
        let path = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
    }

    /// Creates a venv at `dir` on `interpreter`.
    pub fn create_venv(&self, interpreter: &Path, dir: &Path) -> Result<(), MatrixError> {
        let cwd = dir.parent().unwrap_or(dir);
        let mut cmd = self.command(cwd, &["venv"]);
        cmd.args(["--no-python-downloads", "--python"])
            .arg(interpreter)
            .arg(dir);
        run(
            cmd,
            "check that the interpreter runs, and that the directory is writable",
        )
    }

    /// Installs `requirements` into the venv of `python`, with `--no-deps`
    /// when `no_deps`.
    pub fn install(
        &self,
        python: &Path,
        requirements: &[String],
        no_deps: bool,
    ) -> Result<(), MatrixError> {
        let mut cmd = self.command(python.parent().unwrap_or(python), &["pip", "install"]);
        cmd.arg("--python").arg(python);
        if no_deps {
            cmd.arg("--no-deps");
        }
        cmd.args(requirements);
        run(
            cmd,
            "an unknown release is named in uv's message (fix the matrix's `torch=`); without \
             network access to the package index, create the environments on a machine that has \
             it and pass them as interpreters, or rerun offline with a uv cache that already holds \
             the wheels (`UV_CACHE_DIR`, `UV_OFFLINE=1`)",
        )
    }
}

/// Runs `cmd`, turning a failure into an error that quotes uv's output.
fn run(mut cmd: Command, hint: &str) -> Result<(), MatrixError> {
    let command = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| abicache_build::shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd.output().map_err(|e| MatrixError::UvRun {
        command: command.clone(),
        message: e.to_string(),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if output.is_empty() {
        output = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    }
    Err(MatrixError::UvFailed {
        command,
        status: out.status.to_string(),
        output,
        hint: hint.to_owned(),
    })
}

/// The requirements of torch's `METADATA` (its `Requires-Dist` lines) that
/// `import torch` needs and that are small and pure Python: no extras, no
/// CUDA runtime wheels, no triton. Environment markers are kept for uv to
/// evaluate.
pub fn pure_python_requirements(metadata: &str) -> Vec<String> {
    metadata
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.strip_prefix("Requires-Dist:"))
        .map(str::trim)
        .filter(|req| !req.contains("extra =="))
        .filter(|req| {
            let name = req
                .split(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase()
                .replace('_', "-");
            !HEAVY_PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// torch's `METADATA` in the venv `dir`.
pub fn torch_metadata(dir: &Path) -> Option<PathBuf> {
    let lib = std::fs::read_dir(dir.join("lib")).ok()?;
    lib.flatten()
        .map(|python| python.path().join("site-packages"))
        .filter_map(|site| std::fs::read_dir(site).ok())
        .flat_map(|entries| entries.flatten())
        .find(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("torch-") && name.ends_with(".dist-info")
        })
        .map(|e| e.path().join("METADATA"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_small_pure_python_requirements_of_torch() {
        let metadata = "Metadata-Version: 2.4\nName: torch\n\
Requires-Dist: filelock\n\
Requires-Dist: typing-extensions>=4.13.0\n\
Requires-Dist: sympy>=1.13.3\n\
Requires-Dist: cuda-toolkit[cublas,cudart]==13.2.2; platform_system == \"Linux\"\n\
Requires-Dist: nvidia-cudnn-cu13==9.26.0.51; platform_system == \"Linux\"\n\
Requires-Dist: nvidia_nccl_cu13==2.30.7\n\
Requires-Dist: triton~=3.9.0; platform_system == \"Linux\"\n\
Requires-Dist: jinja2; python_version >= \"3.10\"\n\
Requires-Dist: optree>=0.13.0; extra == \"optree\"\n\
\nRequires-Dist: not-a-header\n";
        assert_eq!(
            pure_python_requirements(metadata),
            [
                "filelock",
                "typing-extensions>=4.13.0",
                "sympy>=1.13.3",
                "jinja2; python_version >= \"3.10\""
            ]
        );
    }
}
