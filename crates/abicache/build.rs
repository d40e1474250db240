//! Fingerprints the code that turns a scan into a key (this crate's and
//! `abicache-key`'s sources) into `ABICACHE_KEY_CODE_FINGERPRINT`, so a key
//! memo written by another version of that code is never answered.

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
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut hasher = DefaultHasher::new();
    for src in [manifest.join("src"), manifest.join("../abicache-key/src")] {
        println!("cargo:rerun-if-changed={}", src.display());
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        for file in &files {
            hasher.write(
                file.strip_prefix(manifest)
                    .unwrap_or(file)
                    .as_os_str()
                    .as_encoded_bytes(),
            );
            hasher.write(&std::fs::read(file).unwrap_or_default());
        }
    }
    println!(
        "cargo:rustc-env=ABICACHE_KEY_CODE_FINGERPRINT={}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        hasher.finish()
    );
}
