//! Precedence (flag, then variable, then config file) and refusals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

/// Settings from `vars` alone (the process's environment is not read).
fn resolve(flags: &Flags, vars: &[(&str, &str)]) -> Result<Settings> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    Settings::resolve_with(flags, &|name| vars.get(name).cloned())
}

/// A config file holding `text`, in a directory removed when dropped.
fn config(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap().to_owned();
    (dir, file)
}

#[test]
fn nothing_set_gives_every_default() {
    let settings = resolve(&Flags::default(), &[]).unwrap();
    assert_eq!(settings, Settings::default());
}

#[test]
fn remote_url_flag_beats_variable_beats_config_file() {
    let (_dir, file) = config(
        "remote = \"file:///from/file\"\nremote_mode = \"read-only\"\nremote_timeout = 2.5\n",
    );
    let s = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap();
    assert_eq!(s.config_file, Some(PathBuf::from(&file)));
    assert_eq!(
        (s.remote.url.as_deref(), s.remote.mode, s.remote.timeout),
        (
            Some("file:///from/file"),
            RemoteMode::ReadOnly,
            Duration::from_millis(2500)
        )
    );
    let vars = [
        ("ABICACHE_CONFIG", file.as_str()),
        ("ABICACHE_REMOTE", "redis://h:1/0"),
        ("ABICACHE_REMOTE_MODE", "read-write"),
    ];
    let s = resolve(&Flags::default(), &vars).unwrap();
    assert_eq!(
        (s.remote.url.as_deref(), s.remote.mode),
        (Some("redis://h:1/0"), RemoteMode::ReadWrite)
    );
    // The variable left unset falls through to the file's key.
    assert_eq!(s.remote.timeout, Duration::from_millis(2500));
    let flag = |url: &str| Flags {
        remote: Some(url.into()),
        ..Flags::default()
    };
    let s = resolve(&flag("s3://b/p"), &vars).unwrap();
    assert_eq!(s.remote.url.as_deref(), Some("s3://b/p"));
    assert_eq!(resolve(&flag("none"), &vars).unwrap().remote.url, None);
    assert_eq!(
        s.remote.with_url("off").url,
        None,
        "a later --remote none turns it off"
    );
}

#[test]
fn cache_dir_flag_beats_abicache_dir_beats_xdg_beats_home() {
    let root = |flags: &Flags, vars: &[(&str, &str)]| resolve(flags, vars).unwrap().store.root;
    let home = [("HOME", "/h")];
    assert_eq!(
        root(&Flags::default(), &home),
        Some(PathBuf::from("/h/.cache/abicache"))
    );
    let relative_xdg = [("HOME", "/h"), ("XDG_CACHE_HOME", "rel")];
    assert_eq!(
        root(&Flags::default(), &relative_xdg),
        Some(PathBuf::from("/h/.cache/abicache")),
        "a relative XDG_CACHE_HOME is ignored, as the XDG spec says"
    );
    let xdg = [("HOME", "/h"), ("XDG_CACHE_HOME", "/x")];
    assert_eq!(
        root(&Flags::default(), &xdg),
        Some(PathBuf::from("/x/abicache"))
    );
    let dir = [
        ("HOME", "/h"),
        ("XDG_CACHE_HOME", "/x"),
        ("ABICACHE_DIR", "/d"),
    ];
    assert_eq!(root(&Flags::default(), &dir), Some(PathBuf::from("/d")));
    let flag = Flags {
        cache_dir: Some("/flag".into()),
        ..Flags::default()
    };
    assert_eq!(root(&flag, &dir), Some(PathBuf::from("/flag")));
    assert_eq!(root(&Flags::default(), &[("ABICACHE_DIR", "  ")]), None);
}

#[test]
fn readonly_dirs_come_from_the_variable_else_the_config_file() {
    let (_dir, file) = config("readonly_dirs = [\"/mnt/a\", \"/mnt/b\"]\n");
    let dirs = |vars: &[(&str, &str)]| {
        resolve(&Flags::default(), vars)
            .unwrap()
            .layers
            .readonly_dirs
    };
    assert_eq!(
        dirs(&[("ABICACHE_CONFIG", &file)]),
        [PathBuf::from("/mnt/a"), PathBuf::from("/mnt/b")]
    );
    assert_eq!(
        dirs(&[
            ("ABICACHE_CONFIG", &file),
            ("ABICACHE_READONLY_DIRS", "/nfs/x::/img/y")
        ]),
        [PathBuf::from("/nfs/x"), PathBuf::from("/img/y")]
    );
    let shown = config_file_settings(Path::new(&file)).unwrap();
    assert!(shown.contains(&("ABICACHE_READONLY_DIRS", "/mnt/a:/mnt/b".to_owned())));
}

#[test]
fn keys_come_from_the_variable_else_the_config_file_with_their_origin() {
    let (_dir, file) = config("trusted_keys = [\"/k/a.pub\"]\nsigning_key = \"/k/s.key\"\n");
    let s = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap();
    assert_eq!(s.remote.trusted_keys, ["/k/a.pub"]);
    assert_eq!(s.remote.trusted_keys_origin, TRUSTED_KEYS_FROM_FILE);
    assert_eq!(s.remote.signing_key.as_deref(), Some("/k/s.key"));
    let vars = [
        ("ABICACHE_CONFIG", file.as_str()),
        ("ABICACHE_TRUSTED_KEYS", "aa, bb cc"),
        ("ABICACHE_SIGNING_KEY", "/env/s.key"),
    ];
    let s = resolve(&Flags::default(), &vars).unwrap();
    assert_eq!(s.remote.trusted_keys, ["aa", "bb", "cc"]);
    assert_eq!(s.remote.trusted_keys_origin, TRUSTED_KEYS_FROM_ENV);
    assert_eq!(s.remote.signing_key.as_deref(), Some("/env/s.key"));
}

#[test]
fn store_values_are_parsed_once() {
    let s = resolve(
        &Flags::default(),
        &[
            ("ABICACHE_LOCK_TIMEOUT", "0.5"),
            ("ABICACHE_MAX_SIZE", "10G"),
            ("ABICACHE_PCH_MAX_SIZE", "500M"),
            ("ABICACHE_GC_GRACE", "0"),
            ("ABICACHE_PCH_JOBS", "3"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
        ],
    )
    .unwrap()
    .store;
    assert_eq!(s.lock_timeout, Duration::from_millis(500));
    assert_eq!(
        (s.max_size, s.pch_max_size),
        (Some(10 << 30), Some(500 << 20))
    );
    assert_eq!((s.gc_grace, s.pch_jobs), (Duration::ZERO, 3));
    assert_eq!(s.runtime_dir, Some(PathBuf::from("/run/user/1")));
}

#[test]
fn a_bad_variable_is_refused_naming_it_and_what_to_set() {
    let refusal = |name: &str, value: &str| {
        let err = resolve(&Flags::default(), &[(name, value)]).unwrap_err();
        assert_eq!(err.variable(), Some(name), "{err}");
        err.to_string()
    };
    assert_eq!(
        refusal("ABICACHE_PCH", "bogus"),
        "`ABICACHE_PCH=bogus` is not understood: use `0` to turn precompiled headers off, \
         or `auto` (the default)"
    );
    assert_eq!(
        refusal("ABICACHE_LOCK_TIMEOUT", "soon"),
        "`ABICACHE_LOCK_TIMEOUT` is set to `soon`, which is not a non-negative number of \
         seconds; fix or unset `ABICACHE_LOCK_TIMEOUT`"
    );
    assert_eq!(
        refusal("ABICACHE_REMOTE_MODE", "sometimes"),
        "invalid ABICACHE_REMOTE_MODE `sometimes`: expected `read-write` or `read-only`"
    );
    assert_eq!(
        refusal("ABICACHE_REMOTE_TIMEOUT", "-1"),
        "invalid ABICACHE_REMOTE_TIMEOUT `-1`: expected a positive number of seconds"
    );
    assert_eq!(
        refusal("ABICACHE_ISA_CHECK", "maybe"),
        "`ABICACHE_ISA_CHECK=maybe` is not `1` or `0`; unset it (the guard is on by default) \
         or set it to `0` to load libraries without comparing their instruction sets with this \
         CPU's"
    );
    for (name, value) in [
        ("ABICACHE_MAX_SIZE", "lots"),
        ("ABICACHE_PCH_MAX_SIZE", "lots"),
        ("ABICACHE_GC_GRACE", "-1"),
        ("ABICACHE_PCH_JOBS", "0"),
        ("ABICACHE_REMOTE_MAX_SIZE", "0"),
        ("ABICACHE_REMOTE_OBJECTS", "sometimes"),
    ] {
        let text = refusal(name, value);
        assert!(text.contains(name) && text.contains(value), "{text}");
    }
}

#[test]
fn a_bad_config_value_is_refused_naming_the_key_the_file_and_the_variable() {
    let (_dir, file) = config("remote_mode = \"sometimes\"\n");
    let err = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap_err();
    assert_eq!(err.variable(), Some("ABICACHE_REMOTE_MODE"));
    assert_eq!(
        err.to_string(),
        format!(
            "`remote_mode = \"sometimes\"` in the abicache config file `{file}` cannot be used: \
             expected `read-write` or `read-only`; fix it there, or set `ABICACHE_REMOTE_MODE` \
             (which wins over the file)"
        )
    );
    // The variable wins, so the file's bad value is never used.
    let vars = [
        ("ABICACHE_CONFIG", file.as_str()),
        ("ABICACHE_REMOTE_MODE", "ro"),
    ];
    assert_eq!(
        resolve(&Flags::default(), &vars).unwrap().remote.mode,
        RemoteMode::ReadOnly
    );
    let (_dir, file) = config("remote_timeout = 0\n");
    let err = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap_err();
    assert!(err.to_string().contains("`remote_timeout = 0`"), "{err}");
}

#[test]
fn an_unreadable_config_file_is_refused_naming_it() {
    let (_dir, file) = config("remote = [\n");
    let err = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap_err();
    assert!(
        matches!(err, SettingsError::ConfigFile { .. }) && err.to_string().contains(&file),
        "{err}"
    );
    let missing = resolve(
        &Flags::default(),
        &[("ABICACHE_CONFIG", "/nonexistent/config.toml")],
    )
    .unwrap();
    assert_eq!(
        missing.remote,
        RemoteSettings::default(),
        "a missing file sets nothing"
    );
}

#[test]
fn offline_flag_beats_variable_beats_config_file_and_the_report_comes_from_either() {
    let (_dir, file) = config("offline = true\nmiss_report = \"/r/from-file.jsonl\"\n");
    let s = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap();
    assert_eq!(s.misses.offline, OfflineMode::On);
    assert_eq!(
        s.misses.report.as_deref(),
        Some(Path::new("/r/from-file.jsonl"))
    );
    let vars = [
        ("ABICACHE_CONFIG", file.as_str()),
        ("ABICACHE_OFFLINE", " WARN "),
        ("ABICACHE_MISS_REPORT", "/r/var.jsonl"),
    ];
    let s = resolve(&Flags::default(), &vars).unwrap();
    assert_eq!(s.misses.offline, OfflineMode::Warn);
    assert_eq!(s.misses.report.as_deref(), Some(Path::new("/r/var.jsonl")));
    let flag = Flags {
        offline: Some(OfflineMode::On),
        ..Flags::default()
    };
    assert_eq!(
        resolve(&flag, &vars).unwrap().misses.offline,
        OfflineMode::On
    );
    let (_dir, warn_file) = config("offline = \"warn\"\n");
    let s = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &warn_file)]).unwrap();
    assert_eq!(s.misses.offline, OfflineMode::Warn);
    let s = resolve(&Flags::default(), &[("ABICACHE_OFFLINE", "0")]).unwrap();
    assert_eq!(s.misses, MissSettings::default());
    let shown = config_file_settings(Path::new(&file)).unwrap();
    assert!(
        shown.contains(&("ABICACHE_OFFLINE", "true".to_owned())),
        "{shown:?}"
    );
}

#[test]
fn a_bad_offline_value_is_refused_naming_the_variable_or_the_key() {
    let err = resolve(&Flags::default(), &[("ABICACHE_OFFLINE", "yes")]).unwrap_err();
    assert_eq!(err.variable(), Some("ABICACHE_OFFLINE"));
    assert!(
        err.to_string().contains("`ABICACHE_OFFLINE=yes`") && err.to_string().contains("`warn`"),
        "{err}"
    );
    let (_dir, file) = config("offline = \"sometimes\"\n");
    let err = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`offline = \"sometimes\"`") && err.contains("ABICACHE_OFFLINE"),
        "{err}"
    );
}

#[test]
fn shared_mode_comes_from_the_variable_else_the_config_file_else_auto() {
    let s = resolve(&Flags::default(), &[]).unwrap();
    assert_eq!(s.store.shared, SharedSetting::Auto);
    assert_eq!(s.store.lease_timeout, DEFAULT_LEASE_TIMEOUT);
    let (_dir, file) = config("shared = \"on\"\n");
    let s = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)]).unwrap();
    assert_eq!(s.store.shared, SharedSetting::On);
    let s = resolve(
        &Flags::default(),
        &[
            ("ABICACHE_CONFIG", &file),
            ("ABICACHE_SHARED", "off"),
            ("ABICACHE_LEASE_TIMEOUT", "0.5"),
        ],
    )
    .unwrap();
    assert_eq!(s.store.shared, SharedSetting::Off);
    assert_eq!(s.store.lease_timeout, Duration::from_millis(500));
    let shown = config_file_settings(Path::new(&file)).unwrap();
    assert!(
        shown.contains(&("ABICACHE_SHARED", "on".to_owned())),
        "{shown:?}"
    );
}

#[test]
fn a_bad_shared_mode_is_refused_naming_the_variable_or_the_file() {
    let err = resolve(&Flags::default(), &[("ABICACHE_SHARED", "sometimes")]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("ABICACHE_SHARED") && text.contains("sometimes") && text.contains("`auto`"),
        "{text}"
    );
    let (_dir, file) = config("shared = \"maybe\"\n");
    let text = resolve(&Flags::default(), &[("ABICACHE_CONFIG", &file)])
        .unwrap_err()
        .to_string();
    assert!(text.contains(&file) && text.contains("maybe"), "{text}");
}
