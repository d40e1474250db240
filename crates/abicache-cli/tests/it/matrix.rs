//! `abicache prebuild --matrix`: the missing environments of a
//! `python=… torch=…` matrix are created with a real `uv` (from
//! `scripts/setup-uv.sh`), on a real interpreter installed on this machine,
//! with torch from the package index, and real libraries are built against
//! them. Torch wheels are per Python release (~900 MB each): the uv cache is
//! per machine (`scripts/setup-uv.sh --cache-dir`), so only the first run on
//! a machine downloads one; the matrix is the smallest that proves the point
//! (the venv's Python and one other × the venv's torch).

use crate::common;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use abicache_fleet::matrix::{InterpreterSearch, Uv};
use common::{assert_exit, assert_success, python, repo_path, stderr, stdout, u64_of, Cache};
use serde_json::Value;

/// The project's `uv` and the per-machine uv cache: what `scripts/test.sh`
/// set up before any test started (`ABICACHE_TEST_UV`,
/// `ABICACHE_TEST_UV_CACHE`), else from `scripts/setup-uv.sh` (safe to run
/// from tests that start at once: it creates the venv under a lock).
fn project_uv() -> (PathBuf, PathBuf) {
    if let (Some(uv), Some(cache)) = (
        std::env::var_os("ABICACHE_TEST_UV"),
        std::env::var_os("ABICACHE_TEST_UV_CACHE"),
    ) {
        return (PathBuf::from(uv), PathBuf::from(cache));
    }
    let script = repo_path("scripts/setup-uv.sh");
    let run = |args: &[&str]| {
        let out = Command::new(&script)
            .args(args)
            .output()
            .expect("run setup-uv.sh");
        assert_success(&out);
        PathBuf::from(stdout(&out).trim())
    };
    (run(&[]), run(&["--cache-dir"]))
}

/// `abicache ARGS` in `cache`, with the per-machine uv cache.
fn run_with_uv(cache: &Cache, uv_cache: &Path, args: Vec<OsString>) -> std::process::Output {
    cache
        .cmd(args)
        .env("UV_CACHE_DIR", uv_cache)
        .output()
        .expect("run abicache")
}

/// `prebuild SPEC... --matrix MATRIX --uv UV [--keep-envs DIR] [--json]`.
fn matrix_prebuild(
    specs: &[&Path],
    matrix: impl AsRef<OsStr>,
    uv: impl AsRef<OsStr>,
    keep_envs: Option<&Path>,
    json: bool,
) -> Vec<OsString> {
    let mut args = args!["prebuild"];
    args.extend(specs.iter().map(OsString::from));
    args.extend(args!["--matrix", matrix, "--uv", uv]);
    if let Some(dir) = keep_envs {
        args.extend(args!["--keep-envs", dir]);
    }
    if json {
        args.push("--json".into());
    }
    args
}

fn parse(out: &std::process::Output) -> Value {
    assert_success(out);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(out)))
}

/// The Python release (`3.11`) of the project venv.
fn venv_python_release() -> String {
    let out = Command::new(python())
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    stdout(&out).trim().to_owned()
}

/// A Python release installed on this machine other than the venv's, if any.
fn other_python_release(uv: &Uv, venv_release: &str) -> Option<String> {
    let search = InterpreterSearch::from_env();
    ["3.12", "3.13", "3.10", "3.14"]
        .into_iter()
        .filter(|r| *r != venv_release)
        .find(|r| search.find(r, uv).is_ok())
        .map(str::to_owned)
}

fn cell<'a>(coverage: &'a Value, environment: &str, extension: &str) -> &'a Value {
    coverage["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["environment"] == environment && c["extension"] == extension)
        .unwrap_or_else(|| panic!("no cell for {environment} × {extension} in {coverage}"))
}

#[test]
fn matrix_creates_the_missing_environment_with_uv_and_builds_each_distinct_key_once() {
    let (uv, uv_cache) = project_uv();
    let venv_release = venv_python_release();
    let Some(other) = other_python_release(&Uv::locate(Some(&uv), None).unwrap(), &venv_release)
    else {
        return abicache_test_support::skip(&format!(
            "no Python release other than the venv's {venv_release} is installed \
             (pyenv, `uv python find`, `python3.X` on PATH), so a matrix over Pythons cannot be \
             created here"
        ));
    };
    let (cpu, stable) = (
        repo_path("examples/cpu_muladd/abicache.toml"),
        repo_path("examples/stable_scale/abicache.toml"),
    );
    let dev = ".venv/bin/python";
    let keep = tempfile::tempdir().unwrap();
    let created_label = keep
        .path()
        .join(format!("py{other}-torch2.15/bin/python"))
        .display()
        .to_string();

    // 1. The venv covers one cell; the other is created (kept, for step 2).
    let cache = Cache::new();
    let matrix = format!("python={venv_release},{other} torch=2.15");
    let out = run_with_uv(
        &cache,
        &uv_cache,
        args![
            "prebuild",
            cpu,
            stable,
            "--python",
            dev,
            "--matrix",
            matrix,
            "--uv",
            uv,
            "--keep-envs",
            keep.path(),
            "--json"
        ],
    );
    let coverage = parse(&out);
    let progress = stderr(&out);
    assert!(
        progress.contains(&format!(
            "matrix: python={venv_release} torch=2.15 is `{dev}`"
        )),
        "{progress}"
    );
    assert!(
        progress.contains(&format!("matrix: python={other} torch=2.15: creating")),
        "{progress}"
    );
    let envs = coverage["environments"].as_array().unwrap();
    assert_eq!(envs.len(), 2, "{coverage}");
    assert_eq!(envs[1]["label"], created_label.as_str());
    assert!(envs[1]["python_version"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{other}.")));
    assert!(envs[1]["torch_version"]
        .as_str()
        .unwrap()
        .starts_with("2.15."));
    assert_eq!(envs[1]["can_build"], true);
    // Four cells, two distinct keys: neither op depends on the Python ABI, so
    // each compiles once (with the venv, first in order) for both Pythons.
    assert_eq!(coverage["cells"].as_array().unwrap().len(), 4, "{coverage}");
    assert_eq!(u64_of(&coverage, "distinct_keys"), 2, "{coverage}");
    assert_eq!(u64_of(&coverage, "built"), 2, "{coverage}");
    assert_eq!(u64_of(&cache.stats(), "builds"), 2);
    for ext in ["muladd_example", "stable_scale"] {
        let (ours, theirs) = (
            cell(&coverage, dev, ext),
            cell(&coverage, &created_label, ext),
        );
        assert_eq!(ours["key"], theirs["key"], "{coverage}");
        assert_eq!(theirs["status"], "built");
        assert_eq!(theirs["built_by"], dev);
    }

    // 2. The created environment alone, into an empty cache: it is reused
    // (nothing downloaded or installed) and builds both keys with its own torch.
    let fresh = Cache::new();
    let out = run_with_uv(
        &fresh,
        &uv_cache,
        matrix_prebuild(
            &[&cpu, &stable],
            format!("python={other} torch=2.15"),
            &uv,
            Some(keep.path()),
            true,
        ),
    );
    let alone = parse(&out);
    assert!(stderr(&out).contains("reusing"), "{}", stderr(&out));
    assert_eq!(u64_of(&alone, "built"), 2, "{alone}");
    for ext in ["muladd_example", "stable_scale"] {
        let built = cell(&alone, &created_label, ext);
        assert_eq!(built["built_by"], created_label.as_str());
        assert_eq!(
            built["key"],
            cell(&coverage, dev, ext)["key"],
            "same key, whoever builds it"
        );
    }
    assert_eq!(u64_of(&fresh.stats(), "builds"), 2);

    // 3. Without `--keep-envs`: a throwaway environment under the cache,
    // removed at the end; the keys are cached, so nothing compiles.
    let out = run_with_uv(
        &fresh,
        &uv_cache,
        matrix_prebuild(
            &[&cpu, &stable],
            format!("python={other} torch=2.15"),
            &uv,
            None,
            false,
        ),
    );
    assert_success(&out);
    let table = stdout(&out);
    assert!(table.contains(&format!("py{other}-torch2.15")), "{table}");
    assert!(
        table.contains("2 distinct key(s) for 2 cell(s): 0 built, 2 already cached"),
        "{table}"
    );
    assert_eq!(u64_of(&fresh.stats(), "builds"), 2);
    let leftovers: Vec<_> = std::fs::read_dir(fresh.dir.join("v1/matrix-envs"))
        .unwrap()
        .collect();
    assert!(
        leftovers.is_empty(),
        "throwaway environments left: {leftovers:?}"
    );
}

#[test]
fn a_malformed_matrix_is_refused_before_anything_is_probed() {
    let cache = Cache::new();
    let spec = repo_path("examples/cpu_muladd/abicache.toml");
    let out = cache.run(args![
        "prebuild",
        spec,
        "--matrix",
        "python=3.12 torch=latest"
    ]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("`latest` in `torch=` is not a release like `2.15`"),
        "{err}"
    );
    assert!(
        err.contains("--matrix 'python=3.10,3.12 torch=2.12,2.15'"),
        "{err}"
    );
}

#[test]
fn a_matrix_without_uv_or_with_an_interpreter_that_is_not_installed_says_what_to_do() {
    let cache = Cache::new();
    let spec = repo_path("examples/cpu_muladd/abicache.toml");
    let empty = tempfile::tempdir().unwrap();
    let out = cache
        .cmd(args![
            "prebuild",
            spec,
            "--matrix",
            "python=3.12 torch=2.15"
        ])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("there is no `uv` on `PATH`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--uv PATH"), "{}", stderr(&out));

    let (uv, _) = project_uv();
    let out = cache.run(matrix_prebuild(
        &[&spec],
        "python=3.99 torch=2.15",
        &uv,
        None,
        false,
    ));
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("no Python 3.99 interpreter on this machine"),
        "{err}"
    );
    assert!(err.contains("never downloads interpreters"), "{err}");
}

#[test]
fn an_unknown_torch_release_or_no_network_surfaces_uvs_error() {
    let (uv, uv_cache) = project_uv();
    let release = venv_python_release();
    let cache = Cache::new();
    let spec = repo_path("examples/cpu_muladd/abicache.toml");
    // A torch release that does not exist: uv's resolver says so.
    let out = run_with_uv(
        &cache,
        &uv_cache,
        matrix_prebuild(
            &[&spec],
            format!("python={release} torch=2.99"),
            &uv,
            None,
            false,
        ),
    );
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("torch==2.99.*"), "{err}");
    assert!(err.contains("fix the matrix's `torch=`"), "{err}");
    assert!(
        err.ends_with(
            "the matrix is `--matrix`; existing environments are passed with `--python`\n"
        ),
        "{err}"
    );
    // No network (uv offline with an empty cache): the hint says what to do.
    let empty_cache = tempfile::tempdir().unwrap();
    let out = cache
        .cmd(matrix_prebuild(
            &[&spec],
            format!("python={release} torch=2.15"),
            &uv,
            None,
            false,
        ))
        .env("UV_CACHE_DIR", empty_cache.path())
        .env("UV_OFFLINE", "1")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("without network access to the package index"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(cache.dir.join("v1/matrix-envs"))
            .unwrap()
            .next()
            .is_none(),
        "a failed run leaves no environment behind"
    );
}

/// A stand-in for `uv` (a shell script) that logs each call's working
/// directory, `UV_NO_CONFIG` and arguments to `log`, finds no interpreter,
/// and runs `venv` as `venv_body` says.
fn fake_uv(dir: &Path, log: &Path, venv_body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let uv = dir.join("uv");
    std::fs::write(
        &uv,
        format!(
            "#!/bin/sh\necho \"$PWD|${{UV_NO_CONFIG:-}}|$*\" >> '{}'\n\
             case \"$1\" in python) exit 1;; venv) {venv_body};; esac\nexit 1\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&uv, std::fs::Permissions::from_mode(0o755)).unwrap();
    uv
}

/// The venv's Python release as a `--matrix` (found through pyenv or `PATH`
/// without uv), with a spec.
fn venv_matrix() -> (String, PathBuf) {
    (
        format!("python={} torch=2.15", venv_python_release()),
        repo_path("examples/cpu_muladd/abicache.toml"),
    )
}

/// A run against [`fake_uv`] whose `uv venv` runs `venv_body`: a fresh
/// cache, a temporary directory holding the stand-in `uv` and its log, and
/// [`venv_matrix`], as (cache, dir, matrix, spec, log, uv).
fn fake_uv_run(venv_body: &str) -> (Cache, tempfile::TempDir, String, PathBuf, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let (matrix, spec) = venv_matrix();
    let log = t.path().join("uv.log");
    let uv = fake_uv(t.path(), &log, venv_body);
    (Cache::new(), t, matrix, spec, log, uv)
}

/// A co-tenant could plant `/tmp/envs/<cell>/bin/python` in a `--keep-envs`
/// directory others can write, and prebuild ran it.
#[test]
fn a_keep_envs_directory_others_can_write_is_refused_before_anything_runs() {
    use std::os::unix::fs::PermissionsExt;
    let (cache, t, matrix, spec, log, uv) = fake_uv_run("exit 1");
    let shared = t.path().join("envs");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = cache.run(matrix_prebuild(
        &[&spec],
        &matrix,
        &uv,
        Some(shared.as_path()),
        false,
    ));
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("is writable by others (mode 777)"), "{err}");
    assert!(
        err.contains("must be a private directory of yours"),
        "{err}"
    );
    assert!(!log.exists(), "uv never ran");
    // A symlink to a private directory is refused too; a missing one is created private.
    let private = t.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::os::unix::fs::symlink(&private, t.path().join("link")).unwrap();
    let out = cache.run(matrix_prebuild(
        &[&spec],
        &matrix,
        &uv,
        Some(t.path().join("link").as_path()),
        false,
    ));
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("is a symbolic link"),
        "{}",
        stderr(&out)
    );
    let fresh = t.path().join("fresh/envs");
    let _ = cache.run(matrix_prebuild(
        &[&spec],
        &matrix,
        &uv,
        Some(fresh.as_path()),
        false,
    ));
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// Issue 46, finding 13: with every cell of the matrix served by `--python`,
/// a `--keep-envs` directory others can write was accepted (it was checked
/// only when an environment was to be created there). It is checked before
/// anything runs: the interpreter given (a wrapper that logs each run) is
/// never started, and nothing is built.
#[test]
fn a_keep_envs_directory_others_can_write_is_refused_when_python_serves_the_matrix() {
    use std::os::unix::fs::PermissionsExt;
    let (cache, t, matrix, _, log, uv) = fake_uv_run("exit 1");
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    let ran = t.path().join("python-ran.log");
    let wrapper = t.path().join("python");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho ran >> '{}'\nexec '{}' \"$@\"\n",
            ran.display(),
            python().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared = t.path().join("envs");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut args = matrix_prebuild(&[&spec], &matrix, &uv, Some(shared.as_path()), false);
    args.extend(args!["--python", &wrapper]);
    let out = cache.run(args);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("is writable by others (mode 777)"), "{err}");
    assert!(
        err.contains("must be a private directory of yours"),
        "{err}"
    );
    assert!(!ran.exists(), "the interpreter ran before the check");
    assert!(!log.exists(), "uv never ran");
    assert!(cache.ls().is_empty(), "nothing was built");
}

/// uv ran from a directory under `$TMPDIR` and read configuration files: a
/// planted `uv.toml` could redirect the package index.
#[test]
fn uv_runs_with_no_config_in_private_directories() {
    let (cache, t, matrix, spec, log, uv) = fake_uv_run("exit 1");
    let keep = t.path().join("keep");
    let out = cache.run(matrix_prebuild(
        &[&spec],
        &matrix,
        &uv,
        Some(keep.as_path()),
        false,
    ));
    assert_exit(&out, 2);
    let calls = std::fs::read_to_string(&log).unwrap();
    let venv = calls
        .lines()
        .find(|l| l.contains("|venv "))
        .unwrap_or_else(|| panic!("{calls}"));
    for call in calls.lines() {
        let [cwd, no_config, argv] = call.splitn(3, '|').collect::<Vec<_>>()[..] else {
            panic!("{call}");
        };
        assert_eq!(no_config, "1", "{call}");
        assert!(argv.contains(" --no-config"), "{call}");
        if argv.starts_with("python find") {
            // A fresh private directory (the search runs before any environment exists).
            assert_ne!(Path::new(cwd), std::env::temp_dir(), "{call}");
        }
    }
    assert!(venv.starts_with(&format!("{}|", keep.display())), "{venv}");
}

/// Two runs on one `--keep-envs` directory deleted each other's venvs.
#[test]
fn a_second_run_on_one_keep_envs_directory_waits_for_the_cells_lock() {
    let (cache, t, matrix, spec, log, uv) = fake_uv_run("exit 1");
    let keep = t.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    let cell = format!("py{}-torch2.15", venv_python_release());
    let lock = abicache::store::FileLock::try_acquire(&keep.join(format!("{cell}.lock")))
        .unwrap()
        .unwrap();
    let out = cache
        .cmd(matrix_prebuild(
            &[&spec],
            &matrix,
            &uv,
            Some(keep.as_path()),
            false,
        ))
        .env("ABICACHE_LOCK_TIMEOUT", "1")
        .output()
        .unwrap();
    drop(lock);
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "the matrix environment `{}`",
            keep.join(&cell).display()
        )),
        "{err}"
    );
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("|venv "),
        "uv never touched the locked cell"
    );
}

/// A killed run left gigabytes in `v1/matrix-envs/run.*`.
#[test]
fn an_interrupted_matrix_run_leaves_no_environment_behind() {
    // `uv venv` fills the environment a little, then hangs until interrupted.
    let (cache, _dir, matrix, spec, log, uv) = fake_uv_run(
        "mkdir -p \"$6/lib\" && head -c 1000000 /dev/zero > \"$6/lib/big\" && exec sleep 60",
    );
    let mut child = cache
        .cmd(matrix_prebuild(&[&spec], &matrix, &uv, None, false))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let runs = cache.dir.join("v1/matrix-envs");
    let started = std::time::Instant::now();
    let big = loop {
        let found = std::fs::read_dir(&runs).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| {
                    e.path()
                        .join(format!("py{}-torch2.15/lib/big", venv_python_release()))
                })
                .find(|p| p.is_file())
        });
        if let Some(big) = found {
            break big;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "the run never started: {:?}",
            std::fs::read_to_string(&log)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // SIGTERM, as a job scheduler sends (Ctrl-C's SIGINT ends it the same way).
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    // The run's watcher (`flock LOCK rm -rf DIR`) removes the directory once
    // the run is gone: files first, the directory last, so the test waits
    // for the directory itself, not only for the big file in it.
    let started = std::time::Instant::now();
    loop {
        let left: Vec<_> = std::fs::read_dir(&runs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 10,
            "left behind: {left:?} (the big file {})",
            if big.exists() { "too" } else { "removed" }
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
