//! Writing the files a test's project is made of.

use std::path::{Path, PathBuf};

/// Writes `text` to `path`, creating its parent directories first, and
/// returns `path`. Panics (failing the test) when either cannot be done.
pub fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|e| panic!("cannot create `{}`: {e}", parent.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("cannot write `{}`: {e}", path.display()));
    path.to_path_buf()
}
