//! Offline mode and the miss report through the command line, on a real
//! one-unit library (`tests/fixtures/tiny`, no torch header): one build with
//! `-O1`, then the same extension with `-O2` asked for offline. Python's
//! paths (`TorchOpsExtension.load()`, `abicache.load`, `load_inline`,
//! `abicache run`, interception) are tested in `tests/python/test_offline.py`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;

/// A copy of the tiny fixture with two specs of extension `tiny`: `o1.toml`
/// (`-O1`) and `o2.toml` (`-O2`), sharing their directory (the fingerprint root).
fn tiny_with_two_flags(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::copy(
        repo_path("tests/fixtures/tiny/tiny.cpp"),
        dir.join("tiny.cpp"),
    )
    .unwrap();
    let spec = |flag: &str| {
        let path = dir.join(format!("o{}.toml", &flag[2..]));
        std::fs::write(
            &path,
            format!(
                "[[extension]]\nname = \"tiny\"\nsources = [\"tiny.cpp\"]\nextra_cflags = [\"{flag}\"]\n"
            ),
        )
        .unwrap();
        path
    };
    (spec("-O1"), spec("-O2"))
}

/// A `CXX` that appends one line to `log` per compile or link (`-c`,
/// `-shared`), then runs `c++`. Probes (`-dM -E`, `-E -v`, `--version`: the
/// predefined macros and version the key reads) compile nothing and are not
/// logged; a compiler file younger than the racy window is probed again by
/// every process, as this fresh wrapper is.
fn counting_cxx(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("counting-c++");
    let real = std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned());
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" -c \"*|*\" -shared \"*) echo start >> '{}';; esac\n\
             exec {real} \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

fn offline_build(cache: &Cache, spec: &Path, python: &Path, cxx: &Path, report: &Path) -> Output {
    cache
        .cmd(args![
            "build",
            spec,
            "--python",
            python,
            "--quiet",
            "--offline"
        ])
        .env("CXX", cxx)
        .env("ABICACHE_MISS_REPORT", report)
        .output()
        .unwrap()
}

#[test]
fn build_offline_exits_3_naming_the_changed_flag_and_eight_processes_append_eight_whole_lines() {
    let cache = Cache::new();
    let python = python();
    let work = tempfile::tempdir().unwrap();
    let (o1, o2) = tiny_with_two_flags(work.path());
    let log = work.path().join("compiler-starts.log");
    std::fs::write(&log, "").unwrap();
    let cxx = counting_cxx(work.path(), &log);
    let report = work.path().join("reports/misses.jsonl");

    // Built once with -O1 (through the counting compiler: it is seen).
    let built = cache
        .cmd(args![
            "build", &o1, "--python", &python, "--quiet", "--json"
        ])
        .env("CXX", &cxx)
        .output()
        .unwrap();
    assert_success(&built);
    let built: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
    let starts_after_build = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(starts_after_build > 0, "the wrapper saw no compile");

    // Offline, the same spec is a hit; -O2 is a miss: exit 3, nothing compiled.
    let hit = offline_build(&cache, &o1, &python, &cxx, &report);
    assert_success(&hit);
    let miss = offline_build(&cache, &o2, &python, &cxx, &report);
    assert_exit(&miss, 3);
    let err = stderr(&miss);
    let key = built["key"].as_str().unwrap();
    assert!(
        err.contains("cache miss in offline mode")
            && err.contains("extension `tiny` key ")
            && err.contains(&format!("closest entry {key} differs in:"))
            && err.contains("cflag: [-O1] -> [-O2]"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "`abicache build {} --extension tiny --python {}`",
            o2.display(),
            python.display()
        )),
        "{err}"
    );
    assert_eq!(cache.ls().len(), 1, "offline published nothing");

    // Eight processes missing at once: eight whole JSON lines.
    let children: Vec<_> = (0..8)
        .map(|_| {
            cache
                .cmd(args!["build", &o2, "--python", &python, "--quiet"])
                .env("CXX", &cxx)
                .env("ABICACHE_OFFLINE", "1")
                .env("ABICACHE_MISS_REPORT", &report)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }
    let text = std::fs::read_to_string(&report).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a whole line ({e}): {l}")))
        .collect();
    assert_eq!(lines.len(), 9, "one miss before, eight at once:\n{text}");
    let mut pids: Vec<u64> = lines.iter().map(|l| u64_of(l, "pid")).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 9, "{text}");
    for line in &lines {
        assert_eq!(
            (&line["extension"], &line["offline"], &line["reason"]),
            (&"tiny".into(), &"1".into(), &"key-differs".into()),
            "{line}"
        );
        assert_eq!(line["closest"]["key"], key, "{line}");
        assert_eq!(line["rebuild"]["spec"]["extra_cflags"][0], "-O2", "{line}");
    }
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().lines().count(),
        starts_after_build,
        "a compiler started offline"
    );

    // `abicache misses`: the report as a table, from the argument or the setting.
    let table = cache.run(args!["misses", &report]);
    assert_success(&table);
    let shown = stdout(&table);
    assert!(shown.starts_with("TIME "), "{shown}");
    assert_eq!(
        shown.lines().filter(|l| l.contains(" tiny ")).count(),
        9,
        "{shown}"
    );
    assert!(
        shown.contains("cflag: [-O1] -> [-O2]") && shown.contains("9 misses of 1 extension;"),
        "{shown}"
    );
    let from_setting = cache
        .cmd(args!["misses", "--json"])
        .env("ABICACHE_MISS_REPORT", &report)
        .output()
        .unwrap();
    assert_success(&from_setting);
    let json: serde_json::Value = serde_json::from_slice(&from_setting.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 9);
}

#[test]
fn misses_without_a_report_says_how_to_name_one() {
    let cache = Cache::new();
    let out = cache.run(args!["misses"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("ABICACHE_MISS_REPORT")
            && stderr(&out).contains("abicache misses FILE"),
        "{}",
        stderr(&out)
    );
    let missing = cache.run(args!["misses", "/nonexistent/misses.jsonl"]);
    assert_exit(&missing, 2);
    assert!(
        stderr(&missing).contains("`/nonexistent/misses.jsonl`"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn run_offline_sets_the_variable_for_cmd() {
    let cache = Cache::new();
    let out = cache.run(args![
        "run",
        "--offline",
        "--",
        "sh",
        "-c",
        "printf %s \"$ABICACHE_OFFLINE\""
    ]);
    assert_success(&out);
    assert_eq!(stdout(&out), "1");
}

#[test]
fn an_offline_miss_names_the_changed_flag_when_the_entries_are_in_a_read_only_layer() {
    // A production node: its own cache is empty, the entries come from a
    // layer (an installed cache wheel is one); the closest entry is found there.
    let layer = Cache::new();
    let node = Cache::new();
    let python = python();
    let work = tempfile::tempdir().unwrap();
    let (o1, o2) = tiny_with_two_flags(work.path());
    let built = layer.build(&o1, &python, &[]);
    let key = built["key"].as_str().unwrap();
    let miss = node
        .cmd(args![
            "build",
            &o2,
            "--python",
            &python,
            "--quiet",
            "--offline"
        ])
        .env("ABICACHE_READONLY_DIRS", &layer.dir)
        .output()
        .unwrap();
    assert_exit(&miss, 3);
    let err = stderr(&miss);
    assert!(
        err.contains(&format!("closest entry {key} differs in:"))
            && err.contains("cflag: [-O1] -> [-O2]"),
        "the layer's entry is the closest one:\n{err}"
    );
    let hit = node
        .cmd(args![
            "build",
            &o1,
            "--python",
            &python,
            "--quiet",
            "--offline"
        ])
        .env("ABICACHE_READONLY_DIRS", &layer.dir)
        .output()
        .unwrap();
    assert_success(&hit);
}
