//! A fingerprint of Rust source trees, for build scripts.
//!
//! abicache keeps caches of derived facts (the scanner's stat cache, the key
//! memo) whose meaning depends on the code that computed them. A build script
//! calls [`emit`] to hash that code into a compile-time variable; a cache file
//! stamped with another value is ignored.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("lib.rs"), "fn a() {}").unwrap();
//! let before = abicache_source_fingerprint::fingerprint(dir.path(), &[dir.path().to_path_buf()]);
//! std::fs::write(dir.path().join("lib.rs"), "fn b() {}").unwrap();
//! let after = abicache_source_fingerprint::fingerprint(dir.path(), &[dir.path().to_path_buf()]);
//! assert_ne!(before, after);
//! ```

#![deny(missing_docs)]

use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};

/// Hashes every `.rs` file below each of `dirs`, in sorted order: its path
/// relative to `base` and its contents. Any edit, addition, removal or rename
/// of a Rust file changes the result (up to hash collisions); unreadable
/// files count as empty.
pub fn fingerprint(base: &Path, dirs: &[PathBuf]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for dir in dirs {
        let mut files = Vec::new();
        rust_files(dir, &mut files);
        files.sort();
        for file in &files {
            let relative = file.strip_prefix(base).unwrap_or(file);
            hasher.write(relative.as_os_str().as_encoded_bytes());
            hasher.write(&std::fs::read(file).unwrap_or_default());
        }
    }
    hasher.finish()
}

/// For a build script: sets the compile-time variable `var` to
/// `<version>-<fingerprint of dirs>` and asks cargo to rerun the script when
/// anything below `dirs` changes.
///
/// Panics (failing the build) when one of `dirs` is not a directory: a
/// fingerprint of code that is not there would be the same for every
/// version of it. (A build script compiled in another checkout and reused
/// from a shared target directory would name that checkout's paths if it
/// took them from `env!("CARGO_MANIFEST_DIR")`; read it at run time.)
pub fn emit(var: &str, version: &str, base: &Path, dirs: &[PathBuf]) {
    for dir in dirs {
        assert!(
            dir.is_dir(),
            "abicache-source-fingerprint: `{}` is not a directory, so its code cannot be \
             fingerprinted; pass the build script's directories from \
             `std::env::var_os(\"CARGO_MANIFEST_DIR\")` at run time",
            dir.display()
        );
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let hash = fingerprint(base, dirs);
    println!("cargo:rustc-env={var}={version}-{hash:016x}");
}

/// Appends every `.rs` file below `dir` (recursively, in directory order)
/// to `out`; an unreadable directory adds nothing.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

#[cfg(test)]
mod tests {
    #[test]
    #[should_panic(expected = "is not a directory")]
    fn a_directory_that_is_not_there_fails_the_build() {
        let dir = tempfile::tempdir().unwrap();
        super::emit("UNUSED", "0", dir.path(), &[dir.path().join("gone")]);
    }
}
