//! Times a scan: `scan_tree ROOT SOURCE [-I DIR]... [-S DIR]... [--summary]`.
//!
//! Used to measure the scanner on large header trees (e.g. torch's own
//! include dir given as `-I`, so that every header is followed).

use std::path::PathBuf;
use std::time::Instant;

use abicache_scan::{render_summary, scan, ScanConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(args.next().expect("ROOT"));
    let mut sources = Vec::new();
    let mut config = ScanConfig::new(&root);
    let mut summary = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "-I" => config = config.include_path(args.next().expect("-I DIR")),
            "-S" => config = config.system_root(args.next().expect("-S DIR")),
            "--summary" => summary = true,
            _ => sources.push(PathBuf::from(a)),
        }
    }
    let runs = 5;
    let mut best = f64::MAX;
    let mut report = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = scan(&sources, &config).unwrap_or_else(|e| panic!("{e}"));
        best = best.min(t.elapsed().as_secs_f64());
        report = Some(r);
    }
    let report = report.expect("one run");
    let bytes: u64 = report
        .unique_files()
        .iter()
        .map(|f| {
            let p = root.join(&*f.path);
            std::fs::metadata(if p.exists() {
                p
            } else {
                PathBuf::from(&*f.path)
            })
            .map(|m| m.len())
            .unwrap_or(0)
        })
        .sum();
    if summary {
        print!("{}", render_summary(&report));
    }
    println!(
        "{} files, {:.1} MiB, best of {runs}: {:.1} ms",
        report.unique_files().len(),
        bytes as f64 / (1 << 20) as f64,
        best * 1e3
    );
}
