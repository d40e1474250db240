//! Which Python interpreter a command probes: `--python`, else the active
//! venv (`$VIRTUAL_ENV/bin/python`), else `python3` on `PATH` (as uv, pip
//! and ruff choose).

use std::fmt;
use std::path::{Path, PathBuf};

use abicache::env_vars::{self, PATH, VIRTUAL_ENV};
use anyhow::{bail, Result};

/// Where the interpreter came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--python PATH`.
    Flag,
    /// `$VIRTUAL_ENV/bin/python`.
    VirtualEnv,
    /// `python3` found on `PATH`.
    Path,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Flag => "--python",
            Source::VirtualEnv => "$VIRTUAL_ENV",
            Source::Path => "`python3` on PATH",
        })
    }
}

/// The interpreter to probe and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The interpreter's path.
    pub path: PathBuf,
    /// How it was chosen.
    pub source: Source,
}

impl Chosen {
    /// `python: PATH (from SOURCE)`, as `-v` and `explain` print it.
    pub fn describe(&self) -> String {
        format!("python: {} (from {})", self.path.display(), self.source)
    }
}

/// The interpreter for `flag` (`--python`) and this process's environment.
pub fn choose(flag: Option<&Path>) -> Result<Chosen> {
    choose_with(
        flag,
        env_vars::var_os(VIRTUAL_ENV).map(PathBuf::from),
        env_vars::var_os(PATH),
    )
}

/// [`choose`] with the variables given (for tests).
pub fn choose_with(
    flag: Option<&Path>,
    virtual_env: Option<PathBuf>,
    path: Option<std::ffi::OsString>,
) -> Result<Chosen> {
    if let Some(flag) = flag {
        return Ok(Chosen {
            path: flag.to_owned(),
            source: Source::Flag,
        });
    }
    if let Some(venv) = virtual_env {
        let python = venv.join("bin").join("python");
        if !python.is_file() {
            bail!(
                "`VIRTUAL_ENV` is `{}` but `{}` does not exist: activate an existing venv, \
                 unset `VIRTUAL_ENV`, or pass `--python PATH` (or `--env ENV.toml`)",
                venv.display(),
                python.display()
            );
        }
        return Ok(Chosen {
            path: python,
            source: Source::VirtualEnv,
        });
    }
    let found = path
        .as_deref()
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("python3"))
        .find(|candidate| is_executable(candidate));
    match found {
        Some(path) => Ok(Chosen {
            path,
            source: Source::Path,
        }),
        None => bail!(
            "no Python interpreter: `VIRTUAL_ENV` is unset and there is no `python3` on `PATH`; \
             activate a venv that has torch, or pass `--python PATH` or `--env ENV.toml`"
        ),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_then_virtual_env_then_python3_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        let python3 = bin.join("python3");
        std::fs::write(&python3, "").unwrap();
        std::fs::set_permissions(
            &python3,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let path = Some(std::env::join_paths([dir.path().join("empty"), bin.clone()]).unwrap());

        let flag = choose_with(
            Some(Path::new("/x/python")),
            Some(venv.clone()),
            path.clone(),
        );
        assert_eq!(flag.unwrap().source, Source::Flag);
        let from_venv = choose_with(None, Some(venv.clone()), path.clone()).unwrap();
        assert_eq!(
            (from_venv.path, from_venv.source),
            (venv.join("bin/python"), Source::VirtualEnv)
        );
        let from_path = choose_with(None, None, path).unwrap();
        assert_eq!((from_path.path, from_path.source), (python3, Source::Path));
    }

    #[test]
    fn a_stale_virtual_env_or_no_python_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let stale = choose_with(None, Some(dir.path().join("gone")), None).unwrap_err();
        assert!(
            stale.to_string().contains("pass `--python PATH`"),
            "{stale}"
        );
        let none = choose_with(None, None, Some(dir.path().into())).unwrap_err();
        assert!(
            none.to_string().contains("no `python3` on `PATH`"),
            "{none}"
        );
    }
}
