//! Issue 11, finding 2, through the real binary: a hit on a read-only cache
//! (a real read-only bind mount) and on a full one (a real tmpfs filled to
//! the last byte) exits 0 with the library, and says once that the
//! statistics were not updated. Used to exit 2 (`stats.lock: Read-only file
//! system`, `stats.json.tmp: No space left on device`). Needs root to mount;
//! skipped, loudly, without it.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const TINY: &str = "tests/fixtures/tiny/abicache.toml";

/// Runs `mount ARGS TARGET`; the returned guard lazily unmounts it.
fn mounted(args: &str, target: &Path) -> Option<Unmount> {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("mount {args} \"$0\" 2>/dev/null"))
        .arg(target)
        .status()
        .ok()?;
    status.success().then(|| Unmount(target.to_owned()))
}

struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// `abicache build tiny --json` again: must be a hit with exit 0, and carry
/// the one warning about the statistics.
fn assert_hit_despite_counters(cache: &Cache, first: &serde_json::Value) {
    let out = cache.run(args![
        "build",
        repo_path(TINY),
        "--python",
        python(),
        "--json",
        "--quiet"
    ]);
    assert_success(&out);
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["hit"], true, "{again}");
    assert_eq!(again["path"], first["path"]);
    let warnings = strings(&again["warnings"]);
    assert_eq!(
        warnings
            .iter()
            .filter(|w| w.contains("statistics not updated"))
            .count(),
        1,
        "{warnings:?}"
    );
    assert!(Path::new(again["path"].as_str().unwrap()).is_file());
}

#[test]
fn a_hit_on_a_read_only_cache_exits_0() {
    let cache = Cache::new();
    let first = cache.build(&repo_path(TINY), &python(), &[]);
    let Some(_bind) = mounted("--bind \"$0\"", &cache.dir) else {
        return abicache_test_support::skip("cannot bind-mount (not root?)");
    };
    let Some(_ro) = mounted("-o remount,ro,bind", &cache.dir) else {
        return abicache_test_support::skip("cannot remount read-only");
    };
    assert_hit_despite_counters(&cache, &first);
    // The counters are still readable.
    assert_eq!(u64_of(&cache.stats(), "builds"), 1);
}

#[test]
fn a_hit_on_a_full_cache_exits_0() {
    let cache = Cache::new();
    std::fs::create_dir_all(&cache.dir).unwrap();
    let Some(_tmpfs) = mounted("-t tmpfs -o size=64m,mode=0700 tmpfs", &cache.dir) else {
        return abicache_test_support::skip("cannot mount a tmpfs (not root?)");
    };
    let first = cache.build(&repo_path(TINY), &python(), &[]);
    // The next count must create a new log: no page of the old one is left.
    std::fs::remove_file(cache.dir.join("v1/stats.log")).unwrap();
    let mut filler = std::fs::File::create(cache.dir.join("filler")).unwrap();
    let chunk = vec![0u8; 1 << 16];
    while filler.write(&chunk).is_ok_and(|n| n > 0) {}
    // Page-sized leftovers too, so even the counters' log has no room.
    let mut small = std::fs::File::create(cache.dir.join("filler2")).unwrap();
    while small.write(&[0u8; 1]).is_ok_and(|n| n > 0) {}
    assert_hit_despite_counters(&cache, &first);
}
