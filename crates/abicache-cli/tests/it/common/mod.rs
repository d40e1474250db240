//! Shared helpers of the `abicache` command-line tests: locating the venvs,
//! running the binary against a private cache, loading libraries with torch,
//! and filtering snapshots.
//!
//! Every test owns its cache directory (a tempdir), so each test's counters
//! and entries are its own; real compiles are kept few by running related
//! steps inside one test function.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Command-line arguments from a mix of `&str`, `Path` and `PathBuf`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        vec![$(std::ffi::OsString::from(AsRef::<std::ffi::OsStr>::as_ref(&$arg))),*]
    };
}

/// The repository root.
pub use abicache_test_support::repo_root as repo;
use abicache_test_support::venv_python;

/// A file or directory of the repository.
pub fn repo_path(rel: &str) -> PathBuf {
    repo().join(rel)
}

/// `.venv/bin/python`: torch 2.15 and the pip nvcc.
pub fn python() -> PathBuf {
    venv_python(".venv")
}

/// `.venv-compat/bin/python`: torch 2.12.
pub fn python_compat() -> PathBuf {
    venv_python(".venv-compat")
}

/// Every variable abicache reads (`ENV_VARS`) is cleared for each run, so a
/// developer's shell cannot change a test's outcome, except the choice of
/// host compiler (`CXX`, `CC`), which is the developer's to make, and the
/// process basics (`PATH`, `HOME`) every run needs.
fn cleared_env() -> impl Iterator<Item = &'static str> {
    abicache::env_vars::ENV_VARS
        .iter()
        .map(|v| v.name)
        .filter(|n| !matches!(*n, "CXX" | "CC" | "PATH" | "HOME"))
}

/// A private cache directory and a way to run `abicache` against it.
pub struct Cache {
    _tmp: tempfile::TempDir,
    /// `ABICACHE_DIR` for every command run through this cache.
    pub dir: PathBuf,
}

impl Cache {
    /// A fresh, empty cache (the directory itself is created by abicache).
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("abicache-cli-test-")
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().canonicalize().unwrap().join("cache");
        Cache { _tmp: tmp, dir }
    }

    /// `abicache ARGS` with `ABICACHE_DIR` set to this cache, in the
    /// repository root, with the C locale (stable compiler messages).
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_abicache"));
        for var in cleared_env() {
            cmd.env_remove(var);
        }
        // No remote or trusted keys from the developer's ~/.config/abicache.
        cmd.env("XDG_CONFIG_HOME", self.dir.with_file_name("config"))
            .env("ABICACHE_DIR", &self.dir)
            .env("LC_ALL", "C")
            // No background precompiled-header build (~40 s, ~800 MB) per throw-away cache.
            .env("ABICACHE_PCH", "0")
            .current_dir(repo())
            .args(args);
        cmd
    }

    /// Runs `abicache ARGS` to completion.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd(args).output().expect("run abicache")
    }

    /// Runs `abicache ARGS`, asserts success and parses stdout as JSON.
    pub fn json<I, S>(&self, args: I) -> Value
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let out = self.run(args);
        assert_success(&out);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(&out)))
    }

    /// `abicache build SPEC --python PYTHON --json --quiet [EXTRA]`, asserted successful.
    pub fn build(&self, spec: &Path, python: &Path, extra: &[&str]) -> Value {
        let mut args: Vec<std::ffi::OsString> = vec![
            "build".into(),
            spec.into(),
            "--python".into(),
            python.into(),
            "--json".into(),
            "--quiet".into(),
        ];
        args.extend(extra.iter().map(Into::into));
        self.json(args)
    }

    /// `abicache stats --json`.
    pub fn stats(&self) -> Value {
        self.json(["stats", "--json"])
    }

    /// `abicache ls --json`, as a list.
    pub fn ls(&self) -> Vec<Value> {
        self.json(["ls", "--json"])
            .as_array()
            .expect("ls --json is a list")
            .clone()
    }

    /// Snapshot settings filtering this cache's path (`[CACHE]`) and
    /// everything [`settings`] filters.
    pub fn settings(&self) -> insta::Settings {
        settings(&[(&self.dir, "[CACHE]")])
    }
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a zero exit status, showing both streams otherwise.
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "abicache failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
}

/// Asserts `json` (a `build --json` answer) names a library below `root`.
pub fn assert_path_under(json: &Value, root: &Path) {
    let path = json["path"].as_str().unwrap_or_default();
    assert!(
        Path::new(path).starts_with(root),
        "expected a library below `{}`: {json}",
        root.display()
    );
}

/// The answer of a `build --json` run (`out`) after asserting it succeeded
/// as a hit for `key` whose library lies below `root` (a read-only layer's
/// hit is served in place).
pub fn assert_hit_under(out: &Output, key: &Value, root: &Path) -> Value {
    assert_success(out);
    let hit: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hit["hit"], true, "{hit}");
    assert_eq!(&hit["key"], key, "{hit}");
    assert_path_under(&hit, root);
    hit
}

/// Asserts an exit code, showing both streams otherwise.
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "expected exit {code}, got {}:\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
}

/// Snapshot settings that replace, in order: the given paths, the
/// repository root (`[REPO]`), temporary directories (`[TMP]`), the Python
/// include dir, 64-hex hashes (`[HASH]`), 32-hex keys (`[KEY]`), sizes
/// (`[SIZE]`), durations (`[TIME]`) and library sizes in corruption warnings.
pub fn settings(paths: &[(&Path, &str)]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    for (path, name) in paths {
        settings.add_filter(&regex_escape(&path.to_string_lossy()), *name);
    }
    settings.add_filter(&regex_escape(&repo().to_string_lossy()), "[REPO]");
    let tmp = std::env::temp_dir();
    let tmp = tmp.canonicalize().unwrap_or(tmp);
    settings.add_filter(
        &format!(r#"{}/[^\s`'"]*"#, regex_escape(&tmp.to_string_lossy())),
        "[TMP]",
    );
    settings.add_filter(
        r"-isystem \S*/include/python3\.\d+t?\b",
        "-isystem [PYTHON_INCLUDE]",
    );
    // The mode line of `abicache stats` names this machine's filesystem.
    settings.add_filter(r"(cache mode +)(local|shared): [^\n]*", "$1$2: [WHY]");
    settings.add_filter(r"\b[0-9a-f]{64}\b", "[HASH]");
    settings.add_filter(r"\b[0-9a-f]{32}\b", "[KEY]");
    settings.add_filter(r"\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b", "[SIZE]");
    settings.add_filter(r"\b\d+\.\d+ ?s\b", "[TIME]");
    settings.add_filter(
        r"\b\d+ bytes but the manifest says \d+",
        "[N] bytes but the manifest says [M]",
    );
    settings
}

/// `text` with regex metacharacters escaped.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Copies a directory tree into `to` (one definition, in the test support).
#[allow(unused_imports)] // not every test binary copies a tree
pub use abicache_test_support::copy_dir;

/// Runs `code` with `python -c` (the library path is `sys.argv[1]`),
/// asserts success and returns its stdout, trimmed.
pub fn python_run(python: &Path, code: &str, library: &Path) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(code)
        .arg(library)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

/// The string values of a JSON array.
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// A JSON field as `u64`.
pub fn u64_of(value: &Value, field: &str) -> u64 {
    value[field]
        .as_u64()
        .unwrap_or_else(|| panic!("`{field}` is not a number in {value}"))
}
