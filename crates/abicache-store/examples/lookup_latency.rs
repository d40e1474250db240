//! Measures the hit path for a few library sizes: BLAKE3 of a library by
//! buffered read vs mmap, a verified `Store::lookup` that hashes the library
//! (no stamp), and one whose stat stamp matches (no re-hash), with
//! the ratio of the two measured in the same run.
//! Run: `cargo run --release -p abicache-store --example lookup_latency`
//! (`scripts/bench.sh` runs it).

use std::time::Instant;

use abicache_store::{Claim, Manifest, Store, STAMP_FILE};

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> f64 {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("cache"))
        .unwrap()
        .with_max_size(None);
    let sizes = [1usize, 4, 16, 64, 256];
    let mut hits = Vec::new();
    for mib in sizes {
        let key = blake3::hash(format!("k{mib}").as_bytes())
            .to_hex()
            .to_string();
        let bytes: Vec<u8> = (0..mib << 20).map(|i| (i * 31 % 251) as u8).collect();
        let Claim::Build { guard, .. } = store.lookup_or_lock(&key).unwrap() else {
            unreachable!()
        };
        std::fs::write(guard.temp_dir().join("lib.so"), &bytes).unwrap();
        let hit = guard
            .publish("lib.so", Manifest::new(&key, "x", "p"))
            .unwrap()
            .hit;
        hits.push((mib, key, hit));
    }
    // Stamps are trusted only once the files are older than the racy window.
    std::thread::sleep(abicache_fs::RACY_WINDOW + std::time::Duration::from_millis(100));
    println!(
        "{:>8} {:>10} {:>10} {:>12} {:>12} {:>8}",
        "size", "read ms", "mmap ms", "hashed ms", "stamped ms", "ratio"
    );
    for (mib, key, hit) in hits {
        let read = best_of(10, || {
            let f = std::fs::File::open(&hit.library).unwrap();
            blake3::Hasher::new().update_reader(f).unwrap().finalize()
        });
        let mmap = best_of(10, || {
            blake3::Hasher::new()
                .update_mmap(&hit.library)
                .unwrap()
                .finalize()
        });
        let hashed = best_of(10, || {
            let _ = std::fs::remove_file(hit.dir.join(STAMP_FILE));
            let found = store.lookup(&key).unwrap().hit.unwrap();
            assert!(found.rehashed);
        });
        let stamped = best_of(50, || {
            let found = store.lookup(&key).unwrap().hit.unwrap();
            assert!(!found.rehashed, "the stamp did not spare the hash");
        });
        println!(
            "{:>5} MiB {read:>10.3} {mmap:>10.3} {hashed:>12.3} {stamped:>12.3} {:>7.0}x",
            mib,
            hashed / stamped
        );
    }
}
