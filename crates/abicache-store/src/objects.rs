//! The object cache: compiled translation units under `v1/objects/`,
//! verified like entries before they are linked.
//!
//! Each object `<name>` (e.g. `<unit key>.o`) has a record `<name>.json`
//! holding its size, BLAKE3 and, once a full check was trusted, its stat
//! stamp. [`ObjectCache::publish`] fsyncs the object and writes the record
//! *before* renaming the object into place, so an object without a record
//! was never published whole (an older abicache, or a crash): it is
//! discarded. [`ObjectCache::check`] verifies an object through
//! [`abicache_fs::verify_file`] (no re-hash while the stamp matches) and
//! marks it used (the record's mtime is its last use, which gc respects);
//! a bad object is removed, with a warning, so the caller recompiles it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use abicache_fs::{open_regular, read_bounded, verify_file, Expected, FileStamp, Follow};
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::private_file::{write_atomic, FILE_MODE};

/// Suffix of an object's record file.
pub const OBJECT_RECORD_SUFFIX: &str = ".json";

/// The object cache of one store (see the module documentation).
#[derive(Clone, Debug)]
pub struct ObjectCache {
    dir: PathBuf,
    tmp_dir: PathBuf,
}

/// What [`ObjectCache::check`] found.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectCheck {
    /// The object matches its record: link it.
    Verified,
    /// No usable object (none, or only a record of one being published): compile it.
    Missing,
    /// The object was corrupt or unverifiable and was removed: compile it,
    /// and show the warning.
    Discarded(String),
}

/// The content of an object's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ObjectRecord {
    size: u64,
    blake3: String,
    #[serde(default)]
    stamp: Option<FileStamp>,
}

impl ObjectCache {
    /// The object cache in `dir`; `tmp_dir` (same filesystem) receives
    /// records while they are written.
    pub fn new(dir: impl Into<PathBuf>, tmp_dir: impl Into<PathBuf>) -> Self {
        ObjectCache {
            dir: dir.into(),
            tmp_dir: tmp_dir.into(),
        }
    }

    /// The directory objects live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the object `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The path of the record of the object `name`.
    pub fn record_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}{OBJECT_RECORD_SUFFIX}"))
    }

    /// Verifies the object `name` against its record and marks it used.
    /// Never fails: anything wrong is [`ObjectCheck::Missing`] or, for an
    /// object that exists but cannot be trusted, [`ObjectCheck::Discarded`].
    pub fn check(&self, name: &str) -> ObjectCheck {
        let object = self.path(name);
        let record_path = self.record_path(name);
        let record = read_bounded(&record_path, Follow::No, 4096)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<ObjectRecord>(&bytes).ok());
        let Some(record) = record else {
            return match std::fs::symlink_metadata(&object) {
                Err(_) => ObjectCheck::Missing,
                Ok(_) => self.discard(name, "it has no readable verification record"),
            };
        };
        let expected = Expected {
            size: record.size,
            blake3: record.blake3.clone(),
        };
        match verify_file(&object, &expected, record.stamp.as_ref(), Follow::No) {
            Ok(checked) => {
                match checked.stamp.filter(|s| Some(s) != record.stamp.as_ref()) {
                    Some(stamp) => {
                        let record = ObjectRecord {
                            stamp: Some(stamp),
                            ..record
                        };
                        self.write_record(name, &record).ok();
                    }
                    None => touch(&record_path),
                }
                ObjectCheck::Verified
            }
            Err(abicache_fs::Mismatch::Unreadable(e)) if e.is_not_found() => ObjectCheck::Missing,
            Err(mismatch) => self.discard(name, &mismatch.to_string()),
        }
    }

    /// Publishes `staged` (a freshly compiled object in [`ObjectCache::dir`])
    /// as `name`: owner-only (0600), fsynced, its size and BLAKE3 recorded,
    /// the record written first and the object renamed over `name` last.
    pub fn publish(&self, name: &str, staged: &Path) -> Result<PathBuf> {
        let (file, meta) = open_regular(staged, Follow::No)?;
        std::fs::set_permissions(staged, std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(StoreError::io_at("set the mode of", staged))?;
        file.sync_all()
            .map_err(StoreError::io_at("flush", staged))?;
        let blake3 = abicache_fs::hash_reader(&file).map_err(StoreError::io_at("hash", staged))?;
        let record = ObjectRecord {
            size: meta.len(),
            blake3,
            stamp: None,
        };
        self.write_record(name, &record)?;
        let object = self.path(name);
        fs_err::rename(staged, &object)?;
        fs_err::File::open(&self.dir)?.sync_all()?;
        Ok(object)
    }

    fn write_record(&self, name: &str, record: &ObjectRecord) -> Result<()> {
        let path = self.record_path(name);
        let mut json = serde_json::to_vec(record).expect("a record always serializes");
        json.push(b'\n');
        write_atomic(&path, &json, &self.tmp_dir).map_err(StoreError::io_at("write", &path))
    }

    /// Removes a bad object (unless it was replaced meanwhile) and its
    /// record; returns the warning to show.
    fn discard(&self, name: &str, why: &str) -> ObjectCheck {
        let object = self.path(name);
        let _ = std::fs::remove_file(&object);
        let _ = std::fs::remove_file(self.record_path(name));
        ObjectCheck::Discarded(format!(
            "cached object `{}` is corrupt ({why}); removed it, compiling the unit again",
            object.display()
        ))
    }
}

/// Sets `path`'s mtime to now (its object's last use); best effort.
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// One object and its record, as gc sees them.
#[derive(Debug)]
pub(crate) struct ObjectFiles {
    pub(crate) object: PathBuf,
    pub(crate) record: PathBuf,
    pub(crate) size: u64,
    pub(crate) last_used: SystemTime,
}

impl ObjectFiles {
    /// The newest modification of the object or its record, now.
    pub(crate) fn last_used_now(&self) -> SystemTime {
        [&self.object, &self.record]
            .iter()
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .filter_map(|m| m.modified().ok())
            .max()
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// Groups the files of an object directory into objects with their
/// records; temporary files (leading `.`) are returned separately.
pub(crate) fn scan_objects(dir: &Path) -> (Vec<ObjectFiles>, Vec<(PathBuf, SystemTime)>) {
    let mut temps = Vec::new();
    let mut by_name: std::collections::BTreeMap<String, ObjectFiles> = Default::default();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (Vec::new(), temps);
    };
    for entry in rd.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') {
            temps.push((entry.path(), modified));
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        let name = file_name
            .strip_suffix(OBJECT_RECORD_SUFFIX)
            .unwrap_or(&file_name)
            .to_owned();
        let files = by_name.entry(name.clone()).or_insert_with(|| ObjectFiles {
            object: dir.join(&name),
            record: dir.join(format!("{name}{OBJECT_RECORD_SUFFIX}")),
            size: 0,
            last_used: SystemTime::UNIX_EPOCH,
        });
        files.size += meta.size();
        files.last_used = files.last_used.max(modified);
    }
    (by_name.into_values().collect(), temps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn cache() -> (tempfile::TempDir, ObjectCache) {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&objects).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        (dir, ObjectCache::new(objects, tmp))
    }

    fn stage(cache: &ObjectCache, bytes: &[u8]) -> PathBuf {
        let staged = cache.dir().join(".staged.tmp.o");
        std::fs::File::create(&staged)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        staged
    }

    #[test]
    fn a_published_object_verifies_and_is_owner_only() {
        let (_d, cache) = cache();
        let path = cache.publish("k.o", &stage(&cache, b"object")).unwrap();
        assert_eq!(cache.check("k.o"), ObjectCheck::Verified);
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(cache.check("other.o"), ObjectCheck::Missing);
    }

    #[test]
    fn an_emptied_or_flipped_object_or_one_without_record_is_discarded() {
        let (_d, cache) = cache();
        for damage in [
            |p: &Path| std::fs::write(p, b"").unwrap(),
            |p: &Path| std::fs::write(p, b"objecT").unwrap(),
            |p: &Path| std::fs::remove_file(format!("{}.json", p.display())).unwrap(),
        ] {
            let path = cache.publish("k.o", &stage(&cache, b"object")).unwrap();
            damage(&path);
            let ObjectCheck::Discarded(warning) = cache.check("k.o") else {
                panic!("damage not caught")
            };
            assert!(warning.contains("compiling the unit again"), "{warning}");
            assert!(!path.exists());
            assert_eq!(cache.check("k.o"), ObjectCheck::Missing);
        }
    }
}
