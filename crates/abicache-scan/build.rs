//! Fingerprints the scanner's own source (every `src/**/*.rs`) into
//! `ABICACHE_SCAN_FINGERPRINT`, so the stat cache never serves per-file
//! facts computed by a different lexer: any edit to the crate's code changes
//! the fingerprint, and a cache file with another one is ignored.

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn main() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap_or(file);
        hasher.write(rel.to_string_lossy().as_bytes());
        hasher.write(&std::fs::read(file).unwrap_or_default());
    }
    println!(
        "cargo:rustc-env=ABICACHE_SCAN_FINGERPRINT={}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        hasher.finish()
    );
}
