//! Peak memory of compiles, remembered per unit and flags, so the next build
//! of the same unit knows how many of it fit in memory at once.
//!
//! Layout: `<root>/v1/peaks/<key>` (beside the object directory, not in it:
//! that one holds objects and their records only), one file per unit and
//! flags holding the peak resident set size in bytes (decimal text). The key is
//! the caller's ([`peak_key`]: the compile command without its output, not
//! the unit's contents, so an edited unit keeps its estimate). Writes are a
//! temporary file renamed into place; a file that does not parse reads as
//! "not measured". They are a few bytes each and are kept.

use std::path::{Path, PathBuf};

/// The name of the directory of the peak records, beside the object directory.
pub const PEAKS_DIR: &str = "peaks";

/// The record key of a compile: BLAKE3 over its argv without the output
/// path (length-prefixed fields, so no two argvs collide).
pub fn peak_key(argv_without_output: &[String]) -> String {
    let mut h = abicache_fs::FieldHasher::new();
    h.named("format", "peak-1");
    for arg in argv_without_output {
        h.named("arg", arg);
    }
    h.finalize().to_hex().to_string()
}

/// The peak records of one object directory.
#[derive(Debug, Clone)]
pub struct PeakRecords {
    dir: PathBuf,
}

impl PeakRecords {
    /// The records of the compiles whose objects go to `objects_dir`, kept
    /// beside it in [`PEAKS_DIR`] (created on the first write).
    pub fn new(objects_dir: &Path) -> PeakRecords {
        PeakRecords {
            dir: objects_dir.with_file_name(PEAKS_DIR),
        }
    }

    /// The peak recorded for `key`, in bytes; `None` when never measured or
    /// unreadable.
    pub fn get(&self, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join(key)).ok()?;
        text.trim().parse().ok().filter(|&bytes| bytes > 0)
    }

    /// Records `bytes` as the peak of `key`, replacing the last one (the
    /// newest compile is the best estimate of the next). Best effort: a
    /// failure leaves the old record (or none) and is not reported, since
    /// the build it measured succeeded.
    pub fn record(&self, key: &str, bytes: u64) {
        if bytes == 0 || std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let temp = unique(self.dir.join(format!(".{key}.{}.tmp", std::process::id())));
        if std::fs::write(&temp, format!("{bytes}\n")).is_err()
            || std::fs::rename(&temp, self.dir.join(key)).is_err()
        {
            let _ = std::fs::remove_file(&temp);
        }
    }

    /// The largest peak recorded in this directory, in bytes (for
    /// `abicache stats`); `None` when nothing was measured.
    pub fn largest(&self) -> Option<u64> {
        std::fs::read_dir(&self.dir)
            .ok()?
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|text| text.trim().parse::<u64>().ok())
            .max()
    }
}

/// `path` with a process-wide counter appended, so two threads of one
/// process never share a temporary file.
fn unique(path: PathBuf) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.into_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_back_replaced_and_the_largest_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let peaks = PeakRecords::new(&dir.path().join("objects"));
        let a = peak_key(&["c++".into(), "-O2".into(), "a.cpp".into()]);
        let b = peak_key(&["c++".into(), "-O3".into(), "a.cpp".into()]);
        assert_ne!(a, b, "other flags are another record");
        assert_eq!(peaks.get(&a), None);
        assert_eq!(peaks.largest(), None);
        peaks.record(&a, 500 << 20);
        peaks.record(&b, 300 << 20);
        assert_eq!(peaks.get(&a), Some(500 << 20));
        peaks.record(&a, 200 << 20);
        assert_eq!(peaks.get(&a), Some(200 << 20));
        assert_eq!(peaks.largest(), Some(300 << 20));
        std::fs::write(dir.path().join(PEAKS_DIR).join(&b), "garbage").unwrap();
        assert_eq!(peaks.get(&b), None, "an unparseable record is not measured");
        assert_eq!(peaks.largest(), Some(200 << 20));
    }
}
