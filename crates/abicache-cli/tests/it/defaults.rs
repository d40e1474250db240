//! Issue 14: the defaults a user of uv, pip, ccache or sccache expects.
//! - no `--python`: the active venv (`VIRTUAL_ENV`), else `python3` on `PATH`,
//!   named by `-v` and `explain`;
//! - `abicache stats --zero` resets the counters;
//! - `abicache config` shows every setting and where it came from.

use crate::common;

use std::path::Path;

use abicache::store::{Event, Store};
use common::{assert_exit, assert_success, python, repo, stderr, stdout, Cache};
use serde_json::Value;

const SPEC: &str = "examples/cpu_muladd/abicache.toml";

fn key_of(out: &std::process::Output) -> String {
    assert_success(out);
    let json: Value = serde_json::from_slice(&out.stdout).expect("key --json");
    json["key"].as_str().expect("a key").to_string()
}

#[test]
fn without_python_the_active_venv_then_python3_on_path_is_probed() {
    let cache = Cache::new();
    let venv = repo().join(".venv");
    let expected = key_of(&cache.run(args!["key", SPEC, "--python", python(), "--json"]));

    // An activated venv: `abicache key SPEC` needs no flag, and `-v` says which.
    let out = cache
        .cmd(args!["-v", "key", SPEC, "--json"])
        .env("VIRTUAL_ENV", &venv)
        .output()
        .unwrap();
    assert_eq!(key_of(&out), expected);
    let line = format!(
        "python: {} (from $VIRTUAL_ENV)",
        venv.join("bin/python").display()
    );
    assert!(stderr(&out).contains(&line), "{}", stderr(&out));

    // `explain` names a default interpreter in its output.
    let out = cache
        .cmd(args!["explain", SPEC])
        .env("VIRTUAL_ENV", &venv)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(stdout(&out).contains(&line), "{}", stdout(&out));

    // No venv: `python3` on PATH.
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out = cache
        .cmd(args!["-v", "key", SPEC, "--json"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(key_of(&out), expected);
    let line = format!(
        "python: {} (from `python3` on PATH)",
        venv.join("bin/python3").display()
    );
    assert!(stderr(&out).contains(&line), "{}", stderr(&out));
}

#[test]
fn a_stale_virtual_env_is_bad_input_naming_the_fix() {
    let cache = Cache::new();
    let out = cache
        .cmd(args!["key", SPEC])
        .env("VIRTUAL_ENV", "/nonexistent/venv")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("`/nonexistent/venv/bin/python` does not exist") && err.contains("--python"),
        "{err}"
    );
}

#[test]
fn stats_zero_resets_the_counters_and_keeps_the_entries() {
    let cache = Cache::new();
    let store = Store::open(&cache.dir).unwrap();
    store
        .record_all(&[
            Event::Miss,
            Event::Hit {
                compile_seconds: 2.0,
            },
            Event::Error,
        ])
        .unwrap();
    let before = cache.stats();
    assert_eq!(
        (before["hits"].as_u64(), before["misses"].as_u64()),
        (Some(1), Some(1))
    );

    let zeroed = cache.json(["stats", "-z", "--json"]);
    for field in ["hits", "misses", "errors", "builds"] {
        assert_eq!(
            zeroed[field].as_u64(),
            Some(0),
            "{field} after --zero: {zeroed}"
        );
    }
    assert_eq!(zeroed["entries"], before["entries"]);
    assert_eq!(cache.stats(), zeroed, "the reset is persistent");
    assert_success(&cache.run(["stats", "--zero"]));
}

#[test]
fn config_shows_every_setting_and_where_it_came_from() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python3 = bin.join("python3");
    std::fs::write(&python3, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        &python3,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let config_dir = cache.dir.with_file_name("config").join("abicache");
    std::fs::create_dir_all(&config_dir).unwrap();
    let secret = "ab".repeat(32);
    std::fs::write(
        config_dir.join("config.toml"),
        format!(
            "remote = \"file:///srv/abicache\"\nremote_timeout = 3.0\nsigning_key = \"{secret}\"\n"
        ),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["config"];
        args.extend(extra);
        cache
            .cmd(args)
            .env("PATH", &bin)
            .env("HOME", "/home/someone")
            .env("ABICACHE_REMOTE_MODE", "read-only")
            .env("ABICACHE_LOCK_TIMEOUT", "  ")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        !text.contains(&secret),
        "a secret is never printed:\n{text}"
    );
    let settings = common::settings(&[(&cache.dir, "[CACHE]"), (Path::new(&bin), "[BIN]")]);
    settings.bind(|| insta::assert_snapshot!("config_sources", text));

    let json = run(&["--json", "--remote", "none"]);
    assert_success(&json);
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    let find = |name: &str| {
        json.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no `{name}` in {json}"))
            .clone()
    };
    assert_eq!(find("ABICACHE_REMOTE")["source"], "flag");
    assert_eq!(find("ABICACHE_REMOTE_TIMEOUT")["source"], "config file");
    assert_eq!(find("ABICACHE_REMOTE_MODE")["value"], "read-only");
    assert_eq!(
        find("ABICACHE_LOCK_TIMEOUT")["source"],
        "default",
        "blank means unset"
    );
    assert_eq!(find("ABICACHE_SIGNING_KEY")["value"], "(set, hidden)");
    assert_eq!(find("cache_dir")["value"], cache.dir.display().to_string());
    assert_eq!(find("python")["value"], python3.display().to_string());
}
