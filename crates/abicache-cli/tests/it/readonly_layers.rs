//! Read-only cache layers end to end: a cache populated by "CI" is used by
//! another cache as `ABICACHE_READONLY_DIRS`; a hit from it is served in
//! place, counted in the local cache, and writes nothing to the layer.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

use abicache_test_support::{make_read_only, tree};

/// A "CI" cache holding the tiny fixture's entry.
fn populated_layer(python: &Path) -> (Cache, serde_json::Value) {
    let ci = Cache::new();
    let built = ci.build(&repo_path("tests/fixtures/tiny/abicache.toml"), python, &[]);
    assert_eq!(built["hit"], false, "{built}");
    (ci, built)
}

/// `abicache build` of the tiny fixture in `local` with `layer` as its only read-only layer.
fn build_with_layer(local: &Cache, layer: &Path, python: &Path) -> std::process::Output {
    local
        .cmd(args![
            "build",
            repo_path("tests/fixtures/tiny/abicache.toml"),
            "--python",
            python,
            "--json",
            "--quiet"
        ])
        .env("ABICACHE_READONLY_DIRS", layer)
        .output()
        .unwrap()
}

#[test]
fn a_read_only_layer_of_read_only_files_serves_a_hit_and_stays_byte_and_mtime_identical() {
    let python = python();
    let (ci, built) = populated_layer(&python);
    make_read_only(&ci.dir);
    let before = tree(&ci.dir);

    let local = Cache::new();
    for _ in 0..2 {
        let out = build_with_layer(&local, &ci.dir, &python);
        assert_success(&out);
        let hit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(hit["hit"], true, "{hit}");
        assert_eq!(hit["key"], built["key"]);
        assert_eq!(hit["path"], built["path"], "served in place, not copied");
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    }
    assert_eq!(tree(&ci.dir), before, "the layer is unchanged");
    let stats = local.stats();
    assert_eq!(u64_of(&stats, "layer_hits"), 2, "{stats}");
    assert_eq!(u64_of(&stats, "entries"), 0, "nothing copied: {stats}");
    // The library works where it lies.
    let ran = python_run(
        &python,
        "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print('ok')",
        Path::new(built["path"].as_str().unwrap()),
    );
    assert_eq!(ran, "ok");
}

#[test]
fn a_read_only_bind_mount_serves_a_hit_and_a_miss_builds_locally() {
    let python = python();
    let (ci, built) = populated_layer(&python);
    let mount = tempfile::tempdir().unwrap();
    let point = mount.path().join("layer");
    std::fs::create_dir(&point).unwrap();
    let mounted = Command::new("mount")
        .arg("--bind")
        .arg(&ci.dir)
        .arg(&point)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        abicache_test_support::skip_for_privilege(
            "a read-only bind mount needs CAP_SYS_ADMIN (`mount --bind`); \
             the chmod a-w test covers the same rule without it",
        );
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(point.clone());
    let remounted = Command::new("mount")
        .args(["-o", "remount,ro,bind"])
        .arg(&point)
        .status()
        .is_ok_and(|s| s.success());
    assert!(remounted, "remount read-only");
    assert!(
        std::fs::write(point.join("probe"), b"x").is_err(),
        "the mount is read-only"
    );
    let before = tree(&point);

    let local = Cache::new();
    let out = build_with_layer(&local, &point, &python);
    assert_hit_under(&out, &built["key"], &point);
    assert_eq!(tree(&point), before, "the layer is unchanged");

    // A key the layer lacks (a rebuild) builds into the local cache.
    let rebuilt = local.json(args![
        "build",
        repo_path("tests/fixtures/tiny/abicache.toml"),
        "--python",
        python,
        "--json",
        "--quiet",
        "--rebuild"
    ]);
    assert_eq!(rebuilt["hit"], false);
    assert_path_under(&rebuilt, &local.dir);
    assert_eq!(tree(&point), before, "the layer is still unchanged");
}

#[test]
fn a_tampered_layer_entry_is_skipped_with_one_warning_and_built_locally() {
    let python = python();
    let (ci, built) = populated_layer(&python);
    let library = PathBuf::from(built["path"].as_str().unwrap());
    let mut bytes = std::fs::read(&library).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&library, &bytes).unwrap();
    let local = Cache::new();
    let out = build_with_layer(&local, &ci.dir, &python);
    assert_success(&out);
    let rebuilt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rebuilt["hit"], false, "{rebuilt}");
    let warnings = rebuilt["warnings"].as_array().cloned().unwrap_or_default();
    let about_layer: Vec<_> = warnings
        .iter()
        .filter(|w| w.as_str().unwrap().contains("read-only cache layer"))
        .collect();
    assert_eq!(about_layer.len(), 1, "{rebuilt}");
    assert!(
        about_layer[0].as_str().unwrap().contains("BLAKE3"),
        "{rebuilt}"
    );
    assert_eq!(std::fs::read(&library).unwrap(), bytes, "left as it is");
}
