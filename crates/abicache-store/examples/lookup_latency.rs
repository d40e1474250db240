//! Measures the hit path: BLAKE3 of a library by buffered read vs mmap, and
//! a full verified `Store::lookup`, for a few library sizes.
//! Run: `cargo run -p abicache-store --example lookup_latency`.

use std::time::Instant;

use abicache_store::{Claim, Manifest, Store};

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
    println!(
        "{:>8} {:>10} {:>10} {:>10}",
        "size", "read ms", "mmap ms", "lookup ms"
    );
    for mib in [1usize, 4, 16, 64] {
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
        let read = best_of(20, || {
            let f = std::fs::File::open(&hit.library).unwrap();
            blake3::Hasher::new().update_reader(f).unwrap().finalize()
        });
        let mmap = best_of(20, || {
            blake3::Hasher::new()
                .update_mmap(&hit.library)
                .unwrap()
                .finalize()
        });
        let lookup = best_of(20, || store.lookup(&key).unwrap().hit.unwrap());
        println!("{:>5} MiB {read:>10.3} {mmap:>10.3} {lookup:>10.3}", mib);
    }
}
