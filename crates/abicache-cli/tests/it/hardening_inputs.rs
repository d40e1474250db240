//! Regressions of issue 11 (hardening), findings 5, 6 and 9, through the
//! real binary: hostile inputs (FIFOs, `/dev/zero`, interpreters that hang
//! or flood), a planted remote entry, and exit codes.
//!
//! Every command runs under a deadline: before the fixes several of these
//! hung forever, so a test that would hang fails instead.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use abicache::remote::{entry_blob, Mode, Remote, RemoteConfig, DEFAULT_MAX_SIZE};
use common::*;
use serde_json::Value;

const TINY: &str = "tests/fixtures/tiny/abicache.toml";

/// Runs `cmd` to completion, or kills it and fails after `limit`.
fn run_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?} (a hang), killed; stderr:\n{}",
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An environment file for `abicache key --env` (no toolchain needed).
const ENV: &str = r#"
python_version = "3.13.1"
torch_version = "2.15.0+cpu"
cxx11_abi = true
"#;

/// A spec of one extension whose source is `source` (relative to the spec).
fn spec_dir(source: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("abicache.toml");
    std::fs::write(
        &spec,
        format!("[[extension]]\nname = \"fifo_ext\"\nsources = [\"{source}\"]\n"),
    )
    .unwrap();
    let env = dir.path().join("env.toml");
    std::fs::write(&env, ENV).unwrap();
    (dir, spec, env)
}

/// Finding 6: a FIFO as a source, as the spec or as the environment file
/// blocked `abicache key` forever (the open waited for a writer). Each is
/// now refused at once, naming the file and what it is.
#[test]
fn fifo_as_source_spec_or_environment_is_refused_at_once() {
    let cache = Cache::new();
    let (dir, spec, env) = spec_dir("src.cpp");
    mkfifo(&dir.path().join("src.cpp"));
    let mut report = String::new();
    let mut case = |title: &str, spec: &Path, env: &Path| {
        let out = run_within(
            cache.cmd(args!["key", spec, "--env", env]),
            Duration::from_secs(20),
        );
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains("FIFO, not a regular file"), "{err}");
        report.push_str(&format!("## {title}\n{err}\n"));
    };
    case("FIFO source", &spec, &env);
    let fifo_spec = dir.path().join("fifo.toml");
    mkfifo(&fifo_spec);
    case("FIFO spec", &fifo_spec, &env);
    let fifo_env = dir.path().join("fifo-env.toml");
    mkfifo(&fifo_env);
    let (ok_dir, ok_spec, _) = spec_dir("ok.cpp");
    std::fs::write(ok_dir.path().join("ok.cpp"), "int f() { return 1; }\n").unwrap();
    case("FIFO environment file", &ok_spec, &fifo_env);
    settings(&[(dir.path(), "[DIR]"), (ok_dir.path(), "[DIR2]")])
        .bind(|| insta::assert_snapshot!("fifo_inputs_are_refused", report));
}

/// Finding 6: a source symlinked to `/dev/zero` was read without bound.
#[test]
fn source_symlinked_to_dev_zero_is_refused_not_read_forever() {
    let cache = Cache::new();
    let (dir, spec, env) = spec_dir("zero.cpp");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.cpp")).unwrap();
    let out = run_within(
        cache.cmd(args!["key", spec, "--env", env]),
        Duration::from_secs(20),
    );
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        // The source is named as it resolves.
        err.contains("`/dev/zero` is a character device, not a regular file"),
        "{err}"
    );
}

/// Finding 6: a `--python` that never exits blocked `abicache key` forever
/// (the probe had no time-out). It is stopped after `ABICACHE_PROBE_TIMEOUT`.
#[test]
fn python_that_never_exits_is_stopped_after_the_probe_timeout() {
    let cache = Cache::new();
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python");
    write_executable(&python, "#!/bin/sh\nexec sleep 600\n");
    let mut cmd = cache.cmd(args!["key", TINY, "--python", &python]);
    cmd.env("ABICACHE_PROBE_TIMEOUT", "1");
    let started = Instant::now();
    let out = run_within(cmd, Duration::from_secs(30));
    assert_exit(&out, 2);
    assert!(started.elapsed() < Duration::from_secs(15));
    let err = stderr(&out);
    assert!(
        err.contains("did not answer within 1 s") && err.contains("ABICACHE_PROBE_TIMEOUT"),
        "{err}"
    );
    // An unusable value is refused, naming the variable.
    let mut cmd = cache.cmd(args!["key", TINY, "--python", &python]);
    cmd.env("ABICACHE_PROBE_TIMEOUT", "soon");
    let out = run_within(cmd, Duration::from_secs(30));
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("`ABICACHE_PROBE_TIMEOUT=soon` is not a positive number"),
        "{}",
        stderr(&out)
    );
}

/// Finding 6: a `--python` flooding stdout aborted abicache with
/// "memory allocation of 4294967296 bytes failed". Its output is capped.
#[test]
fn python_that_floods_stdout_is_stopped_at_the_output_cap() {
    let cache = Cache::new();
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python");
    write_executable(&python, "#!/bin/sh\nexec yes flood\n");
    let out = run_within(
        cache.cmd(args!["key", TINY, "--python", &python]),
        Duration::from_secs(60),
    );
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("printed more than 4 MiB to stdout, so it was stopped"),
        "{err}"
    );
    assert!(!err.contains("memory allocation"), "{err}");
}

/// Finding 6: a FIFO in place of a cached entry's library or
/// `manifest.json` blocked every lookup, whatever the lock time-out. Now
/// it is a corrupt entry: reported, removed and rebuilt.
#[test]
fn fifo_in_place_of_an_entrys_library_or_manifest_is_a_corrupt_entry() {
    let cache = Cache::new();
    let built = cache.build(&repo_path(TINY), &python(), &[]);
    let library = PathBuf::from(built["path"].as_str().unwrap());
    for victim in [library.clone(), library.with_file_name("manifest.json")] {
        std::fs::remove_file(&victim).unwrap();
        mkfifo(&victim);
        let out = run_within(
            cache.cmd(args![
                "build",
                TINY,
                "--python",
                python(),
                "--json",
                "--quiet"
            ]),
            Duration::from_secs(120),
        );
        assert_success(&out);
        let again: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(again["hit"], false, "rebuilt after {}", victim.display());
        assert!(
            stderr(&out).contains("warning:"),
            "the corrupt entry is reported: {}",
            stderr(&out)
        );
        let kind = std::fs::symlink_metadata(&victim).unwrap().file_type();
        assert!(
            kind.is_file(),
            "{} is a regular file again",
            victim.display()
        );
    }
    // A FIFO as `last-used` blocked the hit's touch (an open for writing
    // waits for a reader); the hit is served without it.
    let last_used = library.with_file_name("last-used");
    std::fs::remove_file(&last_used).unwrap();
    mkfifo(&last_used);
    let out = run_within(
        cache.cmd(args![
            "build",
            TINY,
            "--python",
            python(),
            "--json",
            "--quiet"
        ]),
        Duration::from_secs(60),
    );
    assert_success(&out);
    let hit: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hit["hit"], true);
}

/// Finding 9: `--jobs 0` was accepted while `MAX_JOBS=0` was refused; both
/// are bad input now, before anything runs.
#[test]
fn jobs_zero_is_refused_like_max_jobs_zero() {
    let cache = Cache::new();
    let out = cache.run(args!["build", TINY, "--python", python(), "--jobs", "0"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("`0` is not a positive whole number"),
        "{}",
        stderr(&out)
    );
    let mut cmd = cache.cmd(args!["build", TINY, "--python", python(), "--quiet"]);
    cmd.env("MAX_JOBS", "0");
    let out = cmd.output().unwrap();
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("MAX_JOBS=0"), "{}", stderr(&out));
}

/// Finding 9: a `torch_dir` that does not exist gave exit 1 (a compile
/// error about missing torch headers); it is bad input, exit 2.
#[test]
fn nonexistent_torch_dir_is_bad_input() {
    let cache = Cache::new();
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env.toml");
    std::fs::write(
        &env,
        format!("{ENV}torch_dir = \"{}/no/torch\"\n", dir.path().display()),
    )
    .unwrap();
    let out = cache.run(args!["build", TINY, "--env", &env, "--quiet"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("`torch_dir`") && err.contains("does not exist"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(cache.dir.join("v1/objects"))
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "no compiler ran"
    );
}

/// Finding 9: a lock time-out exited 2 (the bad-input code); nothing was
/// wrong with the request, so it is 1.
#[test]
fn lock_time_out_exits_1() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("compiles");
    let holder = cache
        .cmd(args!["build", TINY, "--python", python(), "--quiet"])
        .env(
            "ABICACHE_COMPILER_LAUNCHER",
            repo_path("tests/fixtures/slow-launcher.sh"),
        )
        .env("ABICACHE_TEST_MARKER", &marker)
        .env("ABICACHE_TEST_SLEEP", "8")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the holder never compiled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut waiter = cache.cmd(args!["build", TINY, "--python", python(), "--quiet"]);
    waiter.env("ABICACHE_LOCK_TIMEOUT", "0.5");
    let out = run_within(waiter, Duration::from_secs(60));
    let mut holder = holder;
    let _ = holder.wait();
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("ABICACHE_LOCK_TIMEOUT"),
        "{}",
        stderr(&out)
    );
}

/// Finding 5: a remote entry whose manifest names its library `last-used`
/// (anyone who can write to the bucket can plant one) failed every build
/// with exit 2 ("invalid library file name") and `pull` the same way. It
/// is now one warning: the build builds locally (and repairs the remote),
/// and `pull` skips it.
#[test]
fn remote_entry_naming_its_library_last_used_is_a_warning_and_a_local_build() {
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().display());
    let node = |cache: &Cache, argv: Vec<std::ffi::OsString>| {
        let mut cmd = cache.cmd(argv);
        cmd.env("ABICACHE_REMOTE", &url)
            .env("ABICACHE_CONFIG", "/nonexistent/abicache.toml");
        run_within(cmd, Duration::from_secs(180))
    };
    let build_args = || args!["build", TINY, "--python", python(), "--json", "--quiet"];

    // Node A builds and uploads.
    let a = Cache::new();
    let out = node(&a, build_args());
    assert_success(&out);
    let key = serde_json::from_slice::<Value>(&out.stdout).unwrap()["key"]
        .as_str()
        .unwrap()
        .to_string();

    // Someone with write access renames the library inside the entry blob.
    let remote = Remote::open(RemoteConfig {
        url: url.clone(),
        mode: Mode::ReadWrite,
        timeout: Duration::from_secs(10),
        trusted_keys: Vec::new(),
        signing_key: None,
        max_size: DEFAULT_MAX_SIZE,
    })
    .unwrap();
    let bytes = remote.read_entry(&key).unwrap().expect("node A uploaded");
    let (header, library) = entry_blob::decode(&bytes).unwrap();
    let mut manifest = header.manifest.clone();
    manifest.library = "last-used".into();
    let planted = entry_blob::encode(&entry_blob::Header::new(&manifest, None), library);
    remote.write_entry(&key, planted).unwrap();

    // `pull` warns and skips it.
    let c = Cache::new();
    let out = node(&c, args!["pull", &key, "--json"]);
    assert_success(&out);
    let pulled: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pulled[0]["result"], "rejected", "{pulled}");
    let err = stderr(&out);
    assert!(
        err.starts_with("warning: remote cache: ")
            && err.contains("invalid library file name `last-used`"),
        "{err}"
    );
    assert!(c.ls().is_empty(), "nothing was published");

    // Node B builds locally, with one warning, and uploads over the bad entry.
    let b = Cache::new();
    let out = node(&b, build_args());
    assert_success(&out);
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["hit"], false);
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{}", stderr(&out));
    assert!(
        warnings[0].contains("last-used") && warnings[0].ends_with("building locally"),
        "{}",
        warnings[0]
    );
    let repaired = entry_blob::decode(&remote.read_entry(&key).unwrap().unwrap())
        .unwrap()
        .0;
    assert_eq!(repaired.manifest.library, "tiny.so");
}
