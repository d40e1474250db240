//! Hit latency of a shared cache against a local one, in one run: the same
//! library published in a local-mode store (hits checked by stat stamp) and
//! in a store at a shared root in shared mode (every hit re-hashes the
//! library), then `Store::lookup` timed on each (median and best of N).
//!
//! Run: `cargo run --release -p abicache-store --example shared_hit_latency
//! -- SHARED_DIR [LOCAL_DIR] [MIB] [N]` (SHARED_DIR: a directory on the
//! cluster filesystem or FUSE mount; LOCAL_DIR defaults to a temporary
//! directory; MIB, the library size, to 8; N to 200). Prints one line per
//! store and their ratio.

use std::path::{Path, PathBuf};
use std::time::Instant;

use abicache_store::{CacheMode, Claim, Manifest, Store};

fn publish(store: &Store, key: &str, bytes: &[u8]) {
    match store.lookup_or_lock(key).unwrap() {
        Claim::Hit { .. } => {}
        Claim::Build { guard, .. } => {
            std::fs::write(guard.temp_dir().join("lib.so"), bytes).unwrap();
            let _ = guard
                .publish("lib.so", Manifest::new(key, "x", "p"))
                .unwrap();
        }
    }
}

/// (median, best) milliseconds of `n` lookups of `key`.
fn time_lookups(store: &Store, key: &str, n: usize) -> (f64, f64) {
    let mut ms: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let hit = store.lookup(key).unwrap().hit.expect("a hit");
            std::hint::black_box(hit);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[n / 2], ms[0])
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(shared_dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: shared_hit_latency SHARED_DIR [LOCAL_DIR] [MIB] [N]");
        std::process::exit(2);
    };
    let temp = tempfile::tempdir().unwrap();
    let local_dir = args
        .get(1)
        .filter(|a| !a.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| temp.path().to_owned());
    let mib: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(8);
    let n: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(200);
    let bytes: Vec<u8> = (0..mib << 20).map(|i| (i * 31 % 251) as u8).collect();
    let key = blake3::hash(format!("shared-hit-latency-{mib}").as_bytes())
        .to_hex()
        .to_string();

    let open = |root: &Path| Store::open(root.join("abicache-latency")).unwrap();
    let local = open(&local_dir).with_mode(CacheMode::local());
    let shared = open(&shared_dir);
    let shared = if shared.mode().shared {
        shared
    } else {
        shared.with_mode(CacheMode::forced_shared())
    };
    for store in [&local, &shared] {
        publish(store, &key, &bytes);
    }
    // Past the racy window, so the local store trusts its stamp after one hash.
    std::thread::sleep(abicache_fs::RACY_WINDOW + std::time::Duration::from_millis(100));
    let _ = local.lookup(&key).unwrap();

    let (local_median, local_best) = time_lookups(&local, &key, n);
    let (shared_median, shared_best) = time_lookups(&shared, &key, n);
    println!(
        "local  {:<40} {mib} MiB library: median {local_median:.3} ms, best {local_best:.3} ms ({})",
        local.root().display(),
        local.mode().reason
    );
    println!(
        "shared {:<40} {mib} MiB library: median {shared_median:.3} ms, best {shared_best:.3} ms ({})",
        shared.root().display(),
        shared.mode().reason
    );
    println!(
        "shared/local median ratio: {:.1}x over {n} hits each",
        shared_median / local_median
    );
}
