//! `abicache run [--cache-dir DIR] [--verbose] [--offline] -- CMD [ARGS…]`: runs `CMD`
//! with interception on for every Python process it starts.
//!
//! This command only sets up the environment and replaces itself with `CMD`
//! (`exec`, so the exit status and a terminating signal are `CMD`'s own, and
//! the standard streams are untouched):
//! - `ABICACHE_INTERCEPT=1` (`verbose` with `--verbose`), which the wheel's
//!   start-up hook (`abicache-intercept.pth`) reads in every interpreter that
//!   has abicache installed;
//! - the package's `sitecustomize` directory first on `PYTHONPATH`, so an
//!   interpreter that finds abicache on `PYTHONPATH` rather than in a site
//!   directory (which is where `.pth` files are read) turns it on too;
//! - `--cache-dir` as `ABICACHE_DIR` (made absolute: `CMD` may change
//!   directory);
//! - `--record PLAN` as `ABICACHE_RECORD` (made absolute, the directory
//!   created): every load of every Python process is recorded into that
//!   prebuild plan (`abicache_fleet::plan`);
//! - `--offline` as `ABICACHE_OFFLINE=1`.
//!
//! The interception itself is Python (`python/_abicache_intercept.py`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use abicache::env_vars::{
    self, ABICACHE_DIR, ABICACHE_INTERCEPT, ABICACHE_OFFLINE, ABICACHE_RECORD, PYTHONPATH,
};
use clap::Args;

/// The directory, inside the installed `abicache` package, that holds the
/// `sitecustomize.py` `abicache run` puts first on `PYTHONPATH`.
pub const SITECUSTOMIZE_DIR: &str = "_sitecustomize";

/// `abicache run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Record every extension the run loads (hit or build) into the prebuild plan directory
    /// PLAN (created; entries already there are kept): build it with `abicache prebuild --plan PLAN`.
    #[arg(long, value_name = "PLAN")]
    pub record: Option<PathBuf>,
    /// Never compile in `CMD`: sets `ABICACHE_OFFLINE=1`, so a cache miss raises
    /// `abicache.CacheMiss` in the program instead of building (torch's own build included).
    #[arg(long)]
    pub offline: bool,
    /// The command and its arguments (after `--` when an argument starts with `-`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// The variables `CMD` runs with, in the order they are set, given the
/// current values of `ABICACHE_INTERCEPT` and `PYTHONPATH`, the
/// `sitecustomize` directory (`None`: unknown, only the `.pth` hook turns
/// interception on) and the flags (`record`: the plan directory).
pub fn environment(
    intercept: Option<&str>,
    pythonpath: Option<OsString>,
    sitecustomize: Option<&Path>,
    cache_dir: Option<&Path>,
    record: Option<&Path>,
    verbose: bool,
) -> std::io::Result<Vec<(&'static str, OsString)>> {
    let verbose =
        verbose || env_vars::parse_intercept(intercept) == Some(env_vars::Intercept::Verbose);
    let mut vars = vec![(
        ABICACHE_INTERCEPT,
        OsString::from(if verbose { "verbose" } else { "1" }),
    )];
    if let Some(dir) = sitecustomize {
        let dir = std::path::absolute(dir)?;
        let mut value = dir.clone().into_os_string();
        match pythonpath {
            // Already first (an `abicache run` inside another): as it is.
            Some(old) if std::env::split_paths(&old).next().as_deref() == Some(dir.as_path()) => {
                value = old
            }
            Some(old) if !old.is_empty() => {
                value.push(":");
                value.push(old);
            }
            _ => {}
        }
        vars.push((PYTHONPATH, value));
    }
    if let Some(dir) = cache_dir {
        vars.push((ABICACHE_DIR, std::path::absolute(dir)?.into_os_string()));
    }
    if let Some(plan) = record {
        vars.push((ABICACHE_RECORD, std::path::absolute(plan)?.into_os_string()));
    }
    Ok(vars)
}

/// Runs `abicache run` and returns an exit code only when `CMD` could not
/// be started (127 not found, 126 not runnable; on Unix a started `CMD`
/// replaces this process). `package_dir`: the installed `abicache` package
/// (the Python entry point knows it; the cargo binary passes `None`).
pub fn run(
    args: RunArgs,
    cache_dir: Option<PathBuf>,
    verbose: bool,
    package_dir: Option<&Path>,
) -> u8 {
    let sitecustomize = package_dir
        .map(|dir| dir.join(SITECUSTOMIZE_DIR))
        .filter(|dir| dir.join("sitecustomize.py").is_file());
    let vars = match environment(
        env_vars::var(ABICACHE_INTERCEPT).as_deref(),
        env_vars::var_os(PYTHONPATH),
        sitecustomize.as_deref(),
        cache_dir.as_deref(),
        args.record.as_deref(),
        verbose,
    ) {
        Ok(mut vars) => {
            if args.offline {
                vars.push((ABICACHE_OFFLINE, OsString::from("1")));
            }
            vars
        }
        Err(e) => {
            eprintln!("error: abicache run: cannot make the cache or package path absolute: {e}");
            return 2;
        }
    };
    if let Some(plan) = &args.record {
        if let Err(e) = std::fs::create_dir_all(plan) {
            eprintln!(
                "error: abicache run: cannot create the plan directory `{}`: {e}; pass a \
                 writable `--record` directory",
                plan.display()
            );
            return 2;
        }
    }
    let (program, rest) = args
        .command
        .split_first()
        .expect("clap requires at least one CMD argument");
    if verbose {
        let shown: Vec<String> = vars
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_string_lossy()))
            .collect();
        eprintln!("abicache run: {}", shown.join(" "));
        if sitecustomize.is_none() {
            eprintln!(
                "abicache run: no `sitecustomize` directory (this `abicache` is not the Python \
                 package's console script): only interpreters with the abicache wheel installed \
                 intercept (its `abicache-intercept.pth`)"
            );
        }
    }
    let mut command = std::process::Command::new(program);
    command.args(rest).envs(vars.iter().map(|(k, v)| (k, v)));
    let error = exec(command);
    let code = match error.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    eprintln!(
        "error: abicache run: cannot run `{}`: {error}; check the command's name, `PATH` and permissions",
        program.to_string_lossy()
    );
    code
}

/// Replaces this process with `command`; returns only on failure. The
/// standard library resets `SIGPIPE` (which it ignores) to its default and
/// clears the signal mask first, so `CMD` starts as a shell would start it
/// (the wheel's console script resets Python's ignored `SIGXFSZ` before
/// calling in).
#[cfg(unix)]
fn exec(mut command: std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    command.exec()
}

/// Runs `command` and exits with its code (no `exec` outside Unix).
#[cfg(not(unix))]
fn exec(mut command: std::process::Command) -> std::io::Error {
    match command.status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(vars: &'a [(&str, OsString)], name: &str) -> Option<&'a str> {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_str().unwrap())
    }

    #[test]
    fn sitecustomize_goes_first_on_pythonpath_and_the_cache_dir_is_made_absolute() {
        let vars = environment(
            None,
            Some("/a:/b".into()),
            Some(Path::new("/pkg/_sitecustomize")),
            Some(Path::new("rel/cache")),
            Some(Path::new("rel/plan")),
            false,
        )
        .unwrap();
        assert_eq!(value(&vars, ABICACHE_INTERCEPT), Some("1"));
        let plan = PathBuf::from(value(&vars, ABICACHE_RECORD).unwrap());
        assert!(plan.is_absolute() && plan.ends_with("rel/plan"), "{plan:?}");
        assert_eq!(value(&vars, PYTHONPATH), Some("/pkg/_sitecustomize:/a:/b"));
        let cache = PathBuf::from(value(&vars, ABICACHE_DIR).unwrap());
        assert!(
            cache.is_absolute() && cache.ends_with("rel/cache"),
            "{cache:?}"
        );
    }

    #[test]
    fn a_nested_run_does_not_repeat_the_directory_and_keeps_verbose() {
        let vars = environment(
            Some("verbose"),
            Some("/pkg/_sitecustomize:/a".into()),
            Some(Path::new("/pkg/_sitecustomize")),
            None,
            None,
            false,
        )
        .unwrap();
        assert_eq!(value(&vars, ABICACHE_INTERCEPT), Some("verbose"));
        assert_eq!(value(&vars, PYTHONPATH), Some("/pkg/_sitecustomize:/a"));
        assert_eq!(value(&vars, ABICACHE_DIR), None);
    }

    #[test]
    fn without_a_package_only_the_variable_is_set() {
        let vars = environment(None, None, None, None, None, true).unwrap();
        assert_eq!(vars, vec![(ABICACHE_INTERCEPT, OsString::from("verbose"))]);
    }
}
