//! Settings are resolved and checked once, before any work (issue 45): a
//! value that cannot be used fails the command before a spec is read, a
//! source scanned, an interpreter probed or the cache created, and the
//! error names the variable (or the config key and the file) and what to
//! set instead.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

/// A spec whose one source does not exist: any scan of it fails naming
/// `missing.cpp`, so an error that does not name it came before the scan.
fn spec_with_a_missing_source(dir: &Path) -> PathBuf {
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        "[[extension]]\nname = \"never_scanned\"\nsources = [\"missing.cpp\"]\n",
    )
    .unwrap();
    spec
}

#[test]
fn a_bad_variable_fails_before_any_scan_naming_the_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_a_missing_source(tmp.path());

    // The control: with good settings the same command fails on the source.
    let cache = Cache::new();
    let out = cache.run(args!["build", &spec, "--python", python(), "--quiet"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("missing.cpp"), "{}", stderr(&out));

    let refused = [
        (
            "ABICACHE_PCH",
            "bogus",
            "`ABICACHE_PCH=bogus` is not understood",
        ),
        (
            "ABICACHE_LOCK_TIMEOUT",
            "soon",
            "`ABICACHE_LOCK_TIMEOUT` is set to `soon`",
        ),
        (
            "ABICACHE_PCH_JOBS",
            "0",
            "`ABICACHE_PCH_JOBS` is set to `0`",
        ),
        (
            "ABICACHE_REMOTE_MODE",
            "sometimes",
            "invalid ABICACHE_REMOTE_MODE `sometimes`",
        ),
        (
            "ABICACHE_REMOTE_OBJECTS",
            "2",
            "`ABICACHE_REMOTE_OBJECTS=2` is not understood",
        ),
        (
            "ABICACHE_ISA_CHECK",
            "maybe",
            "`ABICACHE_ISA_CHECK=maybe` is not `1` or `0`",
        ),
    ];
    for (name, value, message) in refused {
        let cache = Cache::new();
        let mut cmd = cache.cmd(args!["build", &spec, "--python", python(), "--quiet"]);
        let out = cmd.env(name, value).output().expect("run abicache");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("error: {message}")),
            "{name}: {err}"
        );
        assert!(
            !err.contains("missing.cpp"),
            "{name}: the source was read: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(!cache.dir.exists(), "{name}: the cache was created");
    }

    // The exact wording for the example, with what to set instead.
    let cache = Cache::new();
    let mut cmd = cache.cmd(args!["key", &spec, "--python", python()]);
    let out = cmd.env("ABICACHE_PCH", "bogus").output().unwrap();
    assert_exit(&out, 2);
    assert_eq!(
        stderr(&out).trim_end(),
        "error: `ABICACHE_PCH=bogus` is not understood: use `0` to turn precompiled \
         headers off, or `auto` (the default)"
    );
}

#[test]
fn a_bad_config_file_value_fails_naming_the_key_and_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_a_missing_source(tmp.path());
    let config = tmp.path().join("config.toml");
    std::fs::write(&config, "remote_mode = \"sometimes\"\n").unwrap();
    let cache = Cache::new();
    let mut cmd = cache.cmd(args!["build", &spec, "--python", python(), "--quiet"]);
    let out = cmd.env("ABICACHE_CONFIG", &config).output().unwrap();
    assert_exit(&out, 2);
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: `remote_mode = \"sometimes\"` in the abicache config file `{}` cannot be \
             used: expected `read-write` or `read-only`; fix it there, or set \
             `ABICACHE_REMOTE_MODE` (which wins over the file)",
            config.display()
        )
    );
    assert!(!cache.dir.exists(), "the cache was created");

    // The variable wins over the file, so the file's bad value is not used.
    let mut cmd = cache.cmd(args!["build", &spec, "--python", python(), "--quiet"]);
    let out = cmd
        .env("ABICACHE_CONFIG", &config)
        .env("ABICACHE_REMOTE_MODE", "read-only")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("missing.cpp"), "{}", stderr(&out));
}

#[test]
fn abicache_config_still_shows_a_value_other_commands_refuse() {
    let cache = Cache::new();
    let mut cmd = cache.cmd(args!["config", "--json"]);
    let out = cmd.env("ABICACHE_PCH", "bogus").output().unwrap();
    assert_success(&out);
    let settings: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pch = settings
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "ABICACHE_PCH")
        .unwrap();
    assert_eq!(
        (&pch["value"], &pch["source"]),
        (&"bogus".into(), &"env".into())
    );
}
