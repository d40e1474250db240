//! Times key computation in-process, without process start:
//! `key_time SPEC.toml ENV.toml [--extension NAME] [--runs N] [--floor] [--warm]`.
//!
//! Each run is one `Session::prepare` (scan, payload, key), exactly what
//! `abicache key` does after parsing its arguments:
//! - `median_ms` (cold): the stat cache (`v1/scan-facts.bin`) and the key
//!   memos (`v1/key-memo/`) are deleted before each run (not timed), so
//!   every file is read, hashed and lexed: a first key, ready when
//!   `prepare` returns; both caches are then written on another thread
//!   (`Session::settle` waits for them before the next run);
//!   `cold_settled_ms` is the same run until those writes are done too
//!   (what `abicache key`, which waits before it exits, pays);
//! - `uncached_ms`: the scan without any stat cache plus the key (what a key
//!   cost before the stat cache existed), for "a cold key no slower";
//! - `warm_ms` (with `--warm`): after waiting out the racy window
//!   (`RACY_WINDOW`) so the files' stamps can be trusted, and one untimed
//!   prepare to stamp them, each run is one `Session::key`: the key memo's
//!   `stat` per file and directory the scan depended on (what a warm hit
//!   pays); `warm_scan_ms`: a `Session::prepare` through the stat cache
//!   (the fallback when a dependency changed).
//!
//! `cpu_ms_per_run` gives the CPU time (all threads) per run of each phase,
//! which a loaded machine does not inflate as it does wall time.
//!
//! With `--floor` it also times the raw floor: read + BLAKE3 of the same
//! files (the scan's unique files), on one thread and on two, once in each
//! run, interleaved with its cold and uncached keys (so a burst of load
//! elsewhere weighs on both sides); `cold_vs_floor` is the median over the
//! runs of each run's cold key against the faster of its two floors.
//! Prints one JSON object (times in milliseconds, medians over the runs).

use std::path::{Path, PathBuf};
use std::time::Instant;

use abicache::key::{compute_key, Environment, SpecFile};
use abicache::store::Store;
use abicache::Session;
use abicache_fs::RACY_WINDOW;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn read_and_hash(files: &[PathBuf]) -> u64 {
    let mut bytes = 0;
    for f in files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("`{}`: {e}", f.display()));
        bytes += data.len() as u64;
        std::hint::black_box(blake3::hash(&data));
    }
    bytes
}

/// CPU time (user + system, every thread, dead ones included) this process
/// has used, in milliseconds, from `/proc/self/stat` (10 ms ticks: only
/// meaningful summed over many runs). On a loaded machine wall time mostly
/// measures waiting for a core; CPU time per run does not.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of the file (utime, stime) are 12 and 13 after the name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    ticks * 10.0
}

fn time_ms(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let mut args = std::env::args().skip(1);
    let spec_path = PathBuf::from(
        args.next()
            .expect("usage: key_time SPEC.toml ENV.toml [--extension NAME] [--runs N] [--floor]"),
    );
    let env_path = PathBuf::from(args.next().expect("ENV.toml"));
    let (mut extension, mut runs, mut floor, mut warm) = (None, 5usize, false, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--extension" => extension = args.next(),
            "--runs" => runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N"),
            "--floor" => floor = true,
            "--warm" => warm = true,
            other => panic!("unknown argument `{other}`"),
        }
    }
    let file = SpecFile::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let spec = file
        .extension(extension.as_deref())
        .unwrap_or_else(|e| panic!("{e}"));
    let env = Environment::load(&env_path).unwrap_or_else(|e| panic!("{e}"));
    let cache = tempfile::tempdir().expect("temp dir");
    let store = Store::open(cache.path().join("cache")).unwrap_or_else(|e| panic!("{e}"));
    let session = Session::new(store, env);

    // Warm-up (page cache, nvcc probe if the environment lacks it): not timed.
    let prepared = session
        .prepare(spec, &file.root)
        .unwrap_or_else(|e| panic!("{e}"));
    session.settle();
    // The files the key reads (the floor reads and hashes the same ones).
    let resolve = |p: &str| -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            file.root.join(path)
        }
    };
    let files: Vec<PathBuf> = prepared
        .scan
        .unique_files()
        .iter()
        .map(|f| resolve(&f.path))
        .collect();
    let floor_1t = || {
        time_ms(|| {
            read_and_hash(&files);
        })
    };
    let floor_2t = || {
        let half = files.len().div_ceil(2).max(1);
        time_ms(|| {
            std::thread::scope(|s| {
                for chunk in files.chunks(half) {
                    s.spawn(move || read_and_hash(chunk));
                }
            });
        })
    };
    let facts_file = session.scan_facts_path().unwrap_or_else(|e| panic!("{e}"));
    let memo_dir = facts_file.with_file_name("key-memo");
    // Cold and uncached keys alternate (cold first on even runs, uncached
    // first on odd ones), so neither profits from running later.
    let env = prepared.env.clone();
    let cold_key = || {
        let _ = std::fs::remove_file(&facts_file);
        let _ = std::fs::remove_dir_all(&memo_dir);
        let cpu = cpu_ms();
        let t = Instant::now();
        let keyed = session
            .prepare(spec, &file.root)
            .unwrap_or_else(|e| panic!("{e}"));
        let ready = t.elapsed().as_secs_f64() * 1e3;
        session.settle();
        let settled = t.elapsed().as_secs_f64() * 1e3;
        (ready, settled, cpu_ms() - cpu, keyed)
    };
    // Today's path before the stat cache: the plain scan, then the key.
    let uncached_key = || {
        let cpu = cpu_ms();
        let ms = time_ms(|| {
            let config = spec.scan_config(Some(&env), &file.root);
            let scan = abicache::scan::scan(&spec.sources, &config).expect("scan");
            let keyed = compute_key(spec, &env, &scan, &file.root).expect("key");
            assert_eq!(keyed.key, prepared.keyed.key, "uncached key differs");
        });
        (ms, cpu_ms() - cpu)
    };
    let (mut times, mut uncached) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    let mut settled_times = Vec::with_capacity(runs);
    let (mut one, mut two) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    let (mut cold_cpu, mut uncached_cpu) = (0.0, 0.0);
    let mut last = None;
    for run in 0..runs {
        let mut cold = || {
            let (ms, settled, cpu, keyed) = cold_key();
            times.push(ms);
            settled_times.push(settled);
            cold_cpu += cpu;
            last = Some(keyed);
        };
        let mut plain = || {
            let (ms, cpu) = uncached_key();
            uncached.push(ms);
            uncached_cpu += cpu;
        };
        let mut floors = || {
            if floor {
                one.push(floor_1t());
                two.push(floor_2t());
            }
        };
        if run % 2 == 0 {
            cold();
            plain();
            floors();
        } else {
            floors();
            plain();
            cold();
        }
    }
    let prepared = last.unwrap_or(prepared);
    let (mut warm_cpu, mut warm_scan_cpu) = (0.0, 0.0);
    let warm_times: Option<(Vec<f64>, Vec<f64>)> = warm.then(|| {
        std::thread::sleep(RACY_WINDOW + std::time::Duration::from_millis(100));
        session.prepare(spec, &file.root).expect("stamping run");
        session.settle();
        let cpu = cpu_ms();
        let times = (0..runs)
            .map(|_| {
                time_ms(|| {
                    let key = session.key(spec, &file.root).expect("warm run");
                    assert_eq!(key, prepared.keyed.key, "warm key differs");
                })
            })
            .collect();
        warm_cpu = cpu_ms() - cpu;
        let cpu = cpu_ms();
        let scans = (0..runs)
            .map(|_| {
                time_ms(|| {
                    let again = session.prepare(spec, &file.root).expect("warm scan");
                    session.settle();
                    assert_eq!(
                        again.keyed.key, prepared.keyed.key,
                        "warm scan's key differs"
                    );
                })
            })
            .collect();
        warm_scan_cpu = cpu_ms() - cpu;
        (times, scans)
    });
    let per_source_visits: usize = prepared.scan.sources.iter().map(|s| s.files.len()).sum();
    let bytes = read_and_hash(&files);

    // Each run's cold key against the faster floor of the same run.
    let cold_vs_floor: Vec<f64> = (0..one.len())
        .map(|i| times[i] / one[i].min(two[i]))
        .collect();
    let mut out = serde_json::json!({
        "name": prepared.keyed.name,
        "key": prepared.keyed.key,
        "python_abi": prepared.keyed.python_abi,
        "torch_abi": prepared.keyed.torch_abi,
        "runs": runs,
        "times_ms": times,
        "median_ms": median(times.clone()),
        "cold_settled_ms": median(settled_times),
        "uncached_ms": median(uncached),
        "cpu_ms_per_run": {
            "cold": cold_cpu / runs as f64,
            "uncached": uncached_cpu / runs as f64,
            "warm": warm_cpu / runs as f64,
            "warm_scan": warm_scan_cpu / runs as f64,
        },
        "files": files.len(),
        "file_visits": per_source_visits,
        "bytes": bytes,
        "python_abi_detected": prepared.scan.python_abi_dependent(),
        "python_markers": prepared.scan.python_markers,
        "visited": prepared.scan.unique_files().iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
    });
    if let Some((warm_times, scan_times)) = warm_times {
        out["warm_times_ms"] = warm_times.clone().into();
        out["warm_ms"] = median(warm_times).into();
        out["warm_scan_ms"] = median(scan_times).into();
    }
    if floor {
        out["floor_1t_ms"] = median(one).into();
        out["floor_2t_ms"] = median(two).into();
        out["cold_vs_floor"] = median(cold_vs_floor).into();
    }
    println!("{out}");
}
