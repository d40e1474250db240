//! A hit described for a process that takes it without this crate's code
//! (the Python package's warm path): the stat checks that prove
//! an entry is still the one a full lookup verified ([`HitRecipe`]), the
//! two writes a hit makes (mark the entry used, count the hit), and where
//! such descriptions are kept (`v1/warm/`).
//!
//! A recipe is only made from an entry whose library carries a trusted
//! stamp (`verified.json`, written after a full BLAKE3 check) and whose
//! manifest's stamp is trusted, so equal stamps later mean the very bytes
//! that were hashed (the racy rule of [`abicache_fs::FileStamp::trusted`]).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::SystemTime;

use abicache_fs::{read_bounded, FileStamp, Follow};
use serde::Deserialize;

use crate::entry_stamp;
use crate::layout::{current_uid, insecurity, validate_key, LAST_USED_FILE, MANIFEST_FILE};
use crate::manifest::Manifest;
use crate::private_file::write_atomic;
use crate::stats::Event;
use crate::stats_log::FOLD_AT;
use crate::store::{valid_library_name, Store};
use crate::MANIFEST_FORMAT;

/// Everything a warm hit of one entry checks and writes. Taking the hit
/// from it is equivalent to [`Store::lookup`] finding the entry verified
/// by its stamp, followed by counting the hit, provided:
/// - `lstat(dir)` is a directory with `dir_dev`, `dir_ino`, `dir_mode`
///   and `dir_uid` (what the lookup's ownership check read);
/// - `lstat` of each of `files` (the manifest, then the library) gives its
///   stamp;
/// - the hit then sets the mtime of `last_used` (created owner-only if
///   missing, never through a symlink; the Python reader leaves one set
///   in the last 10 s as it is, inside gc's default grace), and appends
///   `hit_line` to `stats_log` as the counter log's writers do (open `O_APPEND` without
///   following symlinks, shared `flock`, check the path still names the
///   opened file, one `write`), leaving the hit to the store instead when
///   the log is missing or longer than `fold_at` (the store creates and
///   folds it).
///
/// Restated in Python at `python/abicache/_warm_record.py:check_record`
/// (the checks) and `python/abicache/_warm_record.py:count_hit` (counting
/// the hit), tied by
/// `tests/python/test_warm_reader.py::test_a_hit_appended_by_the_reader_is_counted_by_rust`,
/// `tests/python/test_warm_reader.py::test_the_counter_log_is_left_to_rust_when_missing_replaced_or_due`
/// and `tests/python/test_warm_record.py::test_a_warm_load_takes_no_native_call_and_counts_its_hit`
/// (the checks: see [`Store::hit_recipe`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HitRecipe {
    /// The entry directory.
    pub dir: PathBuf,
    /// Its `st_dev`.
    pub dir_dev: u64,
    /// Its `st_ino`.
    pub dir_ino: u64,
    /// Its `st_mode` (type and permission bits).
    pub dir_mode: u32,
    /// Its owner.
    pub dir_uid: u32,
    /// The manifest and the library, each with the trusted stamp `lstat`
    /// must still give.
    pub files: Vec<(PathBuf, FileStamp)>,
    /// The library a hit returns.
    pub library: PathBuf,
    /// The file whose mtime marks the entry used (gc evicts the least
    /// recently used first).
    pub last_used: PathBuf,
    /// The counter log.
    pub stats_log: PathBuf,
    /// The line a hit appends to it, newline included.
    pub hit_line: String,
    /// Past this length the log is left to the store, which folds it.
    pub fold_at: u64,
    /// The instruction-set extensions the library requires (the
    /// manifest's), to be checked against the CPU before the load.
    pub isa: Vec<abicache_isa::Requirement>,
    /// The device-code images the library carries (the manifest's), to be
    /// compared with the visible GPUs before the load.
    pub device_images: Vec<String>,
}

impl Store {
    /// The recipe of a warm hit of `key`, when its entry is present,
    /// private, audited, and its manifest and library carry trusted stamps
    /// that still match; `None` otherwise (then nothing can be taken
    /// without a lookup), and always `None` in shared mode. Reads the manifest and the stamp record; hashes
    /// nothing and writes nothing.
    ///
    /// Restated in Python as the `entry` and `entry_files` checks of
    /// `python/abicache/_warm_record.py:check_record` (the directory's
    /// identity, mode and owner, the manifest's and library's trusted
    /// stamps), tied by
    /// `tests/python/test_warm_reader.py::test_each_recorded_check_refuses_when_it_differs`,
    /// `tests/python/test_warm_reader.py::test_a_tampered_library_fails_the_entry_stamps`,
    /// `tests/python/test_warm_record.py::test_a_tampered_library_is_never_loaded_from_the_record`
    /// and `tests/python/test_warm_record.py::test_a_library_swapped_after_its_checks_is_never_what_is_loaded`.
    pub fn hit_recipe(&self, key: &str) -> Option<HitRecipe> {
        // Shared mode trusts no stat stamp (another node may replace a file
        // behind this node's attribute caches): every hit is a lookup that
        // hashes the library.
        if self.mode().shared {
            return None;
        }
        validate_key(key).ok()?;
        let dir = self.layout().entry_dir(key);
        let dir_meta = std::fs::symlink_metadata(&dir).ok()?;
        if !dir_meta.is_dir() || insecurity(&dir_meta, current_uid().ok()?).is_some() {
            return None;
        }
        let manifest_path = dir.join(MANIFEST_FILE);
        let manifest_meta = std::fs::symlink_metadata(&manifest_path).ok()?;
        let manifest_stamp = FileStamp::trusted(&manifest_meta, SystemTime::now())?;
        let manifest = Manifest::read(&manifest_path).ok()?;
        let consistent = manifest.format == MANIFEST_FORMAT
            && manifest.key == key
            && valid_library_name(&manifest.library)
            && manifest.audit.is_some();
        // The manifest read must be the one stamped.
        let unchanged = std::fs::symlink_metadata(&manifest_path)
            .is_ok_and(|m| FileStamp::of(&m) == manifest_stamp);
        if !consistent || !unchanged {
            return None;
        }
        let library = dir.join(&manifest.library);
        let library_stamp = entry_stamp::read(&dir)?;
        let library_meta = std::fs::symlink_metadata(&library).ok()?;
        if !library_meta.is_file()
            || library_meta.len() != manifest.size
            || FileStamp::of(&library_meta) != library_stamp
        {
            return None;
        }
        let event = Event::Hit {
            compile_seconds: manifest.compile_seconds,
        };
        let mut hit_line = serde_json::to_string(&event).ok()?;
        hit_line.push('\n');
        Some(HitRecipe {
            dir_dev: dir_meta.dev(),
            dir_ino: dir_meta.ino(),
            dir_mode: dir_meta.mode(),
            dir_uid: dir_meta.uid(),
            files: vec![
                (manifest_path, manifest_stamp),
                (library.clone(), library_stamp),
            ],
            library,
            last_used: dir.join(LAST_USED_FILE),
            stats_log: self.layout().stats_log_path(),
            hit_line,
            fold_at: FOLD_AT,
            isa: manifest.isa,
            device_images: manifest.device_images,
            dir,
        })
    }

    /// Where warm-hit descriptions named `name` are kept: `v1/warm/<name>`
    /// (`name`: 1 to 128 characters of `[A-Za-z0-9_-]`, else `None`).
    pub fn warm_record_path(&self, name: &str) -> Option<PathBuf> {
        validate_key(name).ok()?;
        Some(self.layout().warm_dir().join(name))
    }

    /// Replaces the warm-hit description `name` with `bytes`, atomically,
    /// owner-only. `bytes` is a JSON object whose `key` names the entry it
    /// describes: gc removes the record once that entry is gone. Best
    /// effort: the error is for the caller to ignore.
    pub fn save_warm_record(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self
            .warm_record_path(name)
            .ok_or_else(|| std::io::Error::other(format!("invalid record name `{name}`")))?;
        let dir = self.layout().warm_dir();
        if !dir.is_dir() {
            crate::layout::create_dir_0700(&dir).map_err(std::io::Error::other)?;
        }
        write_atomic(&path, bytes, &self.layout().tmp_dir())
    }

    /// Removes the warm-hit descriptions whose entry is not among `keys`
    /// (or that cannot be read), once older than the grace period (a record
    /// may be written just before its entry is published). Best effort;
    /// returns how many were removed.
    pub(crate) fn gc_warm_records(&self, keys: &HashSet<&str>) -> usize {
        #[derive(Deserialize)]
        struct Described {
            key: String,
        }
        let Ok(rd) = std::fs::read_dir(self.layout().warm_dir()) else {
            return 0;
        };
        let mut removed = 0;
        for entry in rd.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if self.is_recent(meta.modified().unwrap_or(SystemTime::now())) {
                continue;
            }
            let described = read_bounded(&path, Follow::No, MAX_RECORD_BYTES)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Described>(&bytes).ok());
            let live = described.is_some_and(|d| keys.contains(d.key.as_str()));
            if !live && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// Longest warm-hit description gc reads.
const MAX_RECORD_BYTES: u64 = 64 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn published(store: &Store, key: &str) {
        let guard = store.begin_build(key).unwrap();
        std::fs::write(guard.temp_dir().join("libx.so"), b"library bytes").unwrap();
        let mut manifest = Manifest::new(key, "x", "payload");
        manifest.audit = Some(serde_json::json!({"verdict": "ok"}));
        let _published = guard.publish("libx.so", manifest).unwrap();
    }

    #[test]
    fn a_recipe_needs_a_stamped_library_and_matches_the_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path().join("cache")).unwrap();
        let key = "0123456789abcdef0123456789abcdef";
        published(&store, key);
        // Fresh files are racy: no recipe yet, whatever the lookup did.
        assert!(store.hit_recipe(key).is_none());
        std::thread::sleep(abicache_fs::RACY_WINDOW + Duration::from_millis(100));
        // The first lookup hashes the library and records its stamp.
        assert!(store.lookup(key).unwrap().hit.is_some());
        let recipe = store.hit_recipe(key).expect("a recipe once stamped");
        assert_eq!(
            recipe.library,
            store.layout().entry_dir(key).join("libx.so")
        );
        assert_eq!(recipe.files.len(), 2);
        assert!(recipe.hit_line.ends_with('\n'));
        let event: Event = serde_json::from_str(recipe.hit_line.trim_end()).unwrap();
        assert!(matches!(event, Event::Hit { .. }));
        // A library rewritten since no longer matches its stamp: no recipe.
        std::fs::write(&recipe.library, b"other bytes!!").unwrap();
        assert!(store.hit_recipe(key).is_none());
    }

    #[test]
    fn gc_removes_records_of_gone_entries_once_past_the_grace_period() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path().join("cache")).unwrap();
        store.save_warm_record("live", br#"{"key":"k1"}"#).unwrap();
        store.save_warm_record("gone", br#"{"key":"k2"}"#).unwrap();
        store.save_warm_record("garbled", b"not json").unwrap();
        let keys: HashSet<&str> = ["k1"].into();
        assert_eq!(store.gc_warm_records(&keys), 0, "young records are kept");
        let old = SystemTime::now() - Duration::from_secs(3600);
        for name in ["live", "gone", "garbled"] {
            let f = std::fs::File::options()
                .write(true)
                .open(store.warm_record_path(name).unwrap())
                .unwrap();
            f.set_modified(old).unwrap();
        }
        assert_eq!(store.gc_warm_records(&keys), 2);
        assert!(store.warm_record_path("live").unwrap().is_file());
    }

    #[test]
    fn record_names_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path().join("cache")).unwrap();
        assert!(store.warm_record_path("../x").is_none());
        assert!(store.save_warm_record("a/b", b"{}").is_err());
        store.save_warm_record("abc", b"{}").unwrap();
        let path = store.warm_record_path("abc").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
