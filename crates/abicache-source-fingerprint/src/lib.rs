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

/// Hashes every `.rs` file below each of `roots` (a directory, searched
/// recursively, or one Rust file), in sorted order per root: its path
/// relative to `base` and its contents. Any edit, addition, removal or
/// rename of a Rust file changes the result (up to hash collisions);
/// unreadable files count as empty.
pub fn fingerprint(base: &Path, roots: &[PathBuf]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for root in roots {
        let mut files = Vec::new();
        if root.is_file() {
            files.push(root.clone());
        } else {
            rust_files(root, &mut files);
        }
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
/// `<version>-<fingerprint of roots>` and asks cargo to rerun the script when
/// anything below `roots` (directories or Rust files) changes.
///
/// Panics (failing the build) when one of `roots` is neither a directory
/// nor a file: a fingerprint of code that is not there would be the same
/// for every version of it. (A build script compiled in another checkout and reused
/// from a shared target directory would name that checkout's paths if it
/// took them from `env!("CARGO_MANIFEST_DIR")`; read it at run time.)
pub fn emit(var: &str, version: &str, base: &Path, roots: &[PathBuf]) {
    for root in roots {
        assert!(
            root.is_dir() || root.is_file(),
            "abicache-source-fingerprint: `{}` is not a directory or a file, so its code cannot be \
             fingerprinted; pass the build script's paths from \
             `std::env::var_os(\"CARGO_MANIFEST_DIR\")` at run time",
            root.display()
        );
        println!("cargo:rerun-if-changed={}", root.display());
    }
    let hash = fingerprint(base, roots);
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
    fn a_file_root_covers_that_file_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let (keyed, other) = (dir.path().join("keyed.rs"), dir.path().join("other.rs"));
        std::fs::write(&keyed, "fn a() {}").unwrap();
        std::fs::write(&other, "fn b() {}").unwrap();
        let roots = [keyed.clone()];
        let before = super::fingerprint(dir.path(), &roots);
        std::fs::write(&other, "fn c() {}").unwrap();
        assert_eq!(super::fingerprint(dir.path(), &roots), before);
        std::fs::write(&keyed, "fn d() {}").unwrap();
        assert_ne!(super::fingerprint(dir.path(), &roots), before);
    }

    #[test]
    #[should_panic(expected = "is not a directory or a file")]
    fn a_directory_that_is_not_there_fails_the_build() {
        let dir = tempfile::tempdir().unwrap();
        super::emit("UNUSED", "0", dir.path(), &[dir.path().join("gone")]);
    }
}
