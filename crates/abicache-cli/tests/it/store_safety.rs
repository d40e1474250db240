//! The store under stress, through the real binary: concurrent builders of
//! one key, a builder SIGKILLed mid-compile, a library corrupted on disk.
//!
//! All use `tests/fixtures/tiny` (no torch header: compiles in a fraction of
//! a second) and `tests/fixtures/slow-launcher.sh` as the compiler launcher,
//! which records every compile in a marker file and sleeps before it, so that
//! builds overlap and a compile is reliably running when the test kills it.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const TINY: &str = "tests/fixtures/tiny/abicache.toml";

fn launcher() -> PathBuf {
    repo_path("tests/fixtures/slow-launcher.sh")
}

/// `abicache build tiny` with the slow launcher recording into `marker`.
fn slow_build(cache: &Cache, marker: &Path, sleep_s: u32) -> Command {
    let mut cmd = cache.cmd(args![
        "build",
        TINY,
        "--python",
        python(),
        "--json",
        "--quiet"
    ]);
    cmd.env("ABICACHE_COMPILER_LAUNCHER", launcher())
        .env("ABICACHE_TEST_MARKER", marker)
        .env("ABICACHE_TEST_SLEEP", sleep_s.to_string());
    cmd
}

/// How many compiles the launcher has started.
fn compiles_started(marker: &Path) -> usize {
    std::fs::read_to_string(marker)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn eight_processes_building_one_uncached_key_compile_once_and_agree_on_the_path() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("compiles");
    // The one compile sleeps 2 s, so the other seven are waiting on the lock meanwhile.
    let children: Vec<Child> = (0..8)
        .map(|_| {
            slow_build(&cache, &marker, 2)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outcomes: Vec<serde_json::Value> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert_success(&out);
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();

    assert_eq!(
        compiles_started(&marker),
        1,
        "the compiler ran more than once"
    );
    let paths: Vec<&str> = outcomes
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.iter().all(|p| *p == paths[0]),
        "different paths: {paths:?}"
    );
    let built: Vec<&serde_json::Value> = outcomes.iter().filter(|o| o["hit"] == false).collect();
    assert_eq!(built.len(), 1, "exactly one process builds: {outcomes:?}");
    assert_eq!(strings(&built[0]["compiled"]), ["tiny.cpp"]);
    let stats = cache.stats();
    assert_eq!(u64_of(&stats, "builds"), 1, "{stats}");
    assert_eq!(
        u64_of(&stats, "hits"),
        7,
        "the seven waiters re-check and hit: {stats}"
    );
    // Issue 11, finding 9: one miss per build, not one per waiter (was 8).
    assert_eq!(u64_of(&stats, "misses"), 1, "{stats}");
    assert_eq!(u64_of(&stats, "entries"), 1, "{stats}");
    assert_eq!(cache.ls().len(), 1);
}

#[test]
fn sigkilled_build_leaves_no_stale_lock_and_no_partial_entry() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("compiles");
    // Its own process group, so killing the group kills the launcher and compiler too.
    let mut victim = slow_build(&cache, &marker, 60)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while compiles_started(&marker) == 0 {
        assert!(
            victim.try_wait().unwrap().is_none(),
            "the build ended before compiling"
        );
        assert!(Instant::now() < deadline, "the compile never started");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Mid-compile: the build lives in a private temporary directory, and
    // nothing is visible as an entry.
    let tmp_dir = cache.dir.join("v1/tmp");
    assert_eq!(
        std::fs::read_dir(&tmp_dir).unwrap().count(),
        1,
        "one build directory in `{}`",
        tmp_dir.display()
    );
    assert_eq!(
        cache.ls(),
        Vec::<serde_json::Value>::new(),
        "a partial entry is visible while building"
    );

    let group = format!("-{}", victim.id());
    let kill = Command::new("kill")
        .args(["-KILL", "--", &group])
        .status()
        .unwrap();
    assert!(kill.success());
    victim.wait().unwrap();
    assert_eq!(
        cache.ls(),
        Vec::<serde_json::Value>::new(),
        "a partial entry is visible after the kill"
    );

    // The next build takes the lock at once: with a stale lock file it would
    // wait for its holder and fail after the (short) lock time-out.
    let out = cache
        .cmd(args![
            "build",
            TINY,
            "--python",
            python(),
            "--json",
            "--quiet"
        ])
        .env("ABICACHE_LOCK_TIMEOUT", "10")
        .output()
        .unwrap();
    assert_success(&out);
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["hit"], false);
    assert_eq!(
        strings(&outcome["compiled"]),
        ["tiny.cpp"],
        "the killed compile left no object behind"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&tmp_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        leftovers.is_empty(),
        "the killed build's temporary directory was not swept: {leftovers:?}"
    );
    let entries = cache.ls();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["library"], outcome["path"]);
    assert!(
        entries[0]["audit"].is_object(),
        "a published entry carries its audit"
    );
    let audit = cache.json(args!["audit", outcome["path"].as_str().unwrap(), "--json"]);
    assert_eq!(entries[0]["audit"], audit);
}

#[test]
fn truncated_library_in_the_cache_is_removed_and_rebuilt_never_returned() {
    let cache = Cache::new();
    let python = python();
    let spec = repo_path(TINY);
    let first = cache.build(&spec, &python, &[]);
    let library = PathBuf::from(first["path"].as_str().unwrap());
    let good = std::fs::read(&library).unwrap();

    // Truncate it in place, as a full disk or a crashed copy would.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&library)
        .unwrap();
    file.set_len(good.len() as u64 / 2).unwrap();
    drop(file);

    let out = cache.run(args![
        "build", spec, "--python", python, "--json", "--quiet"
    ]);
    assert_success(&out);
    let second: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(second["hit"], false, "a corrupt entry is a miss: {second}");
    assert_eq!(second["key"], first["key"]);
    assert_eq!(
        strings(&second["compiled"]),
        Vec::<String>::new(),
        "the object cache still has the unit"
    );
    assert_eq!(second["cached_units"], 1);
    let returned = std::fs::read(second["path"].as_str().unwrap()).unwrap();
    assert_eq!(
        returned.len(),
        good.len(),
        "the returned library is not the truncated one"
    );
    assert_eq!(
        returned, good,
        "relinking the cached object gives the same library"
    );

    let stats = cache.stats();
    assert_eq!(u64_of(&stats, "corrupt"), 1, "{stats}");
    assert_eq!(u64_of(&stats, "builds"), 2, "{stats}");
    assert_eq!(u64_of(&stats, "entries"), 1, "{stats}");
    assert!(
        !strings(&second["warnings"]).is_empty(),
        "the JSON outcome carries the warning: {second}"
    );
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("warning_truncated_library", stderr(&out)));
}
