//! Times the lexer alone, in-process, on every file under the given directories:
//! `lex_time DIR... [--runs N]`.
//!
//! Per run, over all files (already read into memory): `lex` (ordinary code skipped 16
//! bytes at a time), `lex_scalar` (the scalar reference loop, every byte classified) and
//! BLAKE3 of the same bytes (one thread), alternating which goes first. Prints one JSON
//! object: files, bytes, the medians in milliseconds, each lexer's throughput, and the
//! ratios `lex / blake3` and `lex_scalar / lex`.

use std::path::{Path, PathBuf};
use std::time::Instant;

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => files_under(&entry.path(), out),
            Ok(t) if t.is_file() => out.push(entry.path()),
            _ => {}
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time_ms(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let mut dirs = Vec::new();
    let mut runs = 7;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--runs" {
            runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N");
        } else {
            dirs.push(PathBuf::from(arg));
        }
    }
    assert!(!dirs.is_empty(), "usage: lex_time DIR... [--runs N]");
    let mut files = Vec::new();
    for dir in &dirs {
        files_under(dir, &mut files);
    }
    let texts: Vec<Vec<u8>> = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
    let bytes: usize = texts.iter().map(Vec::len).sum();
    let fast = || {
        for t in &texts {
            std::hint::black_box(abicache_scan::lex(t));
        }
    };
    let scalar = || {
        for t in &texts {
            std::hint::black_box(abicache_scan::lexer::lex_scalar(t));
        }
    };
    let hash = || {
        for t in &texts {
            std::hint::black_box(blake3::hash(t));
        }
    };
    // Warm-up.
    fast();
    scalar();
    hash();
    let (mut f, mut s, mut h) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        if run % 2 == 0 {
            f.push(time_ms(fast));
            s.push(time_ms(scalar));
        } else {
            s.push(time_ms(scalar));
            f.push(time_ms(fast));
        }
        h.push(time_ms(hash));
    }
    let (f, s, h) = (median(f), median(s), median(h));
    let mib = bytes as f64 / (1 << 20) as f64;
    println!(
        "{}",
        serde_json::json!({
            "files": texts.len(),
            "bytes": bytes,
            "runs": runs,
            "lex_ms": f,
            "lex_scalar_ms": s,
            "blake3_ms": h,
            "lex_mib_per_s": mib / f * 1e3,
            "lex_scalar_mib_per_s": mib / s * 1e3,
            "lex_vs_blake3": f / h,
            "scalar_vs_lex": s / f,
        })
    );
}
