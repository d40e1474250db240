//! The arch-free index: which entries differ only in their CUDA arch list,
//! and the device images each carries, so a lookup whose arch list came
//! from the visible GPUs can find an entry that covers them (docs/cache.md,
//! "Covering entries").
//!
//! Layout: `v1/arch-index/<arch-free key>/<key>`, one small file per entry
//! holding its images (`sm_80 sm_90\n`). The arch-free key is the key of
//! the payload without its `cuda_archs=` line ([`arch_free_key`]).
//!
//! Consistency, by construction rather than by locking:
//! - **derived**: every line is written from a published manifest
//!   ([`Store::index_arch_free`], called by every publish) and the whole
//!   index is rebuilt from the manifests when `v1/arch-index` is absent
//!   (deleting it is always safe);
//! - **one file per entry**, written atomically (a temporary file renamed
//!   into place), so concurrent publishes never write the same file, and a
//!   reader sees a line whole or not at all;
//! - **a stale line is a miss, never an error**: the index only names
//!   candidates; each is then looked up and verified like any entry, and a
//!   line whose entry is gone (gc, `rm`) is skipped and later swept by gc.
//!
//! The store still treats payloads as text: the one rule it knows is the
//! name of the field the arch list is in.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use crate::layout::{validate_key, Layout};
use crate::manifest::Manifest;
use crate::readonly::ReadOnlyLayer;
use crate::store::Store;

/// The directory under `v1` that holds the arch-free index.
pub const ARCH_INDEX_DIR: &str = "arch-index";

/// The payload field the arch list (`-gencode` flags) is in.
const ARCH_FIELD: &str = "cuda_archs=";

/// Domain separation: an arch-free key is never equal to an entry's key.
const ARCH_FREE_PREFIX: &str = "abicache-arch-free-v1\n";

/// Upper bound on an index line read (a few hundred images).
const MAX_LINE: u64 = 16 << 10;

/// One entry an arch-free key names, with the device images it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchIndexed {
    /// The entry's key.
    pub key: String,
    /// Its device images (`sm_80`, `compute_90`), as recorded.
    pub images: Vec<String>,
}

/// The key of `payload` without its arch list: the first 128 bits (hex) of
/// the BLAKE3 of a fixed prefix and the payload text with its `cuda_archs=`
/// line removed. Two payloads that differ only in that line have the same
/// arch-free key. `None` when the payload has no non-empty `cuda_archs=`
/// line (a CPU extension, or one whose own nvcc flags choose the archs).
pub fn arch_free_key(payload: &str) -> Option<String> {
    let mut found = false;
    let mut hasher = blake3::Hasher::new();
    hasher.update(ARCH_FREE_PREFIX.as_bytes());
    for line in payload.split_inclusive('\n') {
        match line.strip_prefix(ARCH_FIELD) {
            Some(value) => found |= !value.trim().is_empty(),
            None => {
                hasher.update(line.as_bytes());
            }
        }
    }
    found.then(|| hasher.finalize().to_hex()[..32].to_string())
}

/// The device images of the entry `manifest` describes: the images read
/// from its library (`device_images`) when recorded, else the ones its arch
/// list asks for (each `-gencode=arch=…,code=X` gives `X`), sorted and
/// de-duplicated. Empty for a CPU entry.
pub fn entry_images(manifest: &Manifest) -> Vec<String> {
    let mut images: Vec<String> = if manifest.device_images.is_empty() {
        manifest
            .payload
            .lines()
            .find_map(|l| l.strip_prefix(ARCH_FIELD))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|flag| flag.rsplit_once("code=").map(|(_, code)| code.to_owned()))
            .collect()
    } else {
        manifest.device_images.clone()
    };
    images.sort();
    images.dedup();
    images
}

impl Layout {
    /// `<root>/v1/arch-index`.
    pub fn arch_index_dir(&self) -> PathBuf {
        self.version_dir().join(ARCH_INDEX_DIR)
    }
}

impl Store {
    /// Records the entry `manifest` describes under its arch-free key (no
    /// line for an entry without one). Best effort: a read-only or full
    /// cache loses only the covering lookup, which then misses.
    pub fn index_arch_free(&self, manifest: &Manifest) {
        let Some(arch_free) = arch_free_key(&manifest.payload) else {
            return;
        };
        if validate_key(&manifest.key).is_err() {
            return;
        }
        let dir = self.layout().arch_index_dir().join(&arch_free);
        if create_private_dirs(&dir).is_err() {
            return;
        }
        let line = format!("{}\n", entry_images(manifest).join(" "));
        let _ = crate::private_file::write_atomic(
            &dir.join(&manifest.key),
            line.as_bytes(),
            &self.layout().tmp_dir(),
        );
    }

    /// The entries the index names under `arch_free`, sorted by key, each
    /// with its images; lines whose entry directory is gone are left out.
    /// When the index does not exist yet, it is first rebuilt from the
    /// entries' manifests. Nothing here is verified: the caller looks each
    /// candidate up as it would any key.
    pub fn arch_free_entries(&self, arch_free: &str) -> Vec<ArchIndexed> {
        if validate_key(arch_free).is_err() {
            return Vec::new();
        }
        let index = self.layout().arch_index_dir();
        if std::fs::symlink_metadata(&index).is_err() {
            self.rebuild_arch_index();
        }
        read_lines(&index.join(arch_free))
            .into_iter()
            .filter(|e| self.layout().entry_dir(&e.key).is_dir())
            .collect()
    }

    /// Rebuilds the index from every readable manifest (lines are added,
    /// never removed; see [`Store::sweep_arch_index`]). Returns how many
    /// entries it indexed.
    pub fn rebuild_arch_index(&self) -> usize {
        let Ok(dirs) = self.entry_dirs() else {
            return 0;
        };
        let _ = create_private_dirs(&self.layout().arch_index_dir());
        let mut indexed = 0;
        for (_, dir) in dirs {
            if let Ok(manifest) = Manifest::read(&dir.join(crate::MANIFEST_FILE)) {
                if arch_free_key(&manifest.payload).is_some() {
                    self.index_arch_free(&manifest);
                    indexed += 1;
                }
            }
        }
        indexed
    }

    /// Removes the index lines whose entry is gone, and the arch-free
    /// directories left empty (gc calls it). Returns how many lines it removed.
    pub fn sweep_arch_index(&self) -> usize {
        let Ok(groups) = std::fs::read_dir(self.layout().arch_index_dir()) else {
            return 0;
        };
        let mut removed = 0;
        for group in groups.flatten() {
            let Ok(lines) = std::fs::read_dir(group.path()) else {
                continue;
            };
            for line in lines.flatten() {
                let name = line.file_name();
                let Some(key) = name.to_str() else { continue };
                if validate_key(key).is_ok()
                    && !self.layout().entry_dir(key).is_dir()
                    && std::fs::remove_file(line.path()).is_ok()
                {
                    removed += 1;
                }
            }
            // Fails while not empty; a publish racing this re-creates it.
            let _ = std::fs::remove_dir(group.path());
        }
        removed
    }
}

/// A layer's entries by arch-free key.
type Groups = BTreeMap<String, Vec<ArchIndexed>>;
/// A layer's groups and the mtime of its `entries` directory when read.
type Grouped = (Option<SystemTime>, Arc<Groups>);

impl ReadOnlyLayer {
    /// The layer's entries under `arch_free`, sorted by key, each with its
    /// images. A layer is never written, so it has no index of its own: its
    /// manifests are read once per process (again when its `entries`
    /// directory changes) and grouped. Nothing here is verified: the
    /// caller looks each candidate up as it would any key.
    pub fn arch_free_entries(&self, arch_free: &str) -> Vec<ArchIndexed> {
        static GROUPED: OnceLock<Mutex<HashMap<PathBuf, Grouped>>> = OnceLock::new();
        let entries = Layout::new(self.root()).entries_dir();
        let stamp = std::fs::metadata(&entries).and_then(|m| m.modified()).ok();
        let memo = GROUPED.get_or_init(Default::default);
        let known = memo
            .lock()
            .ok()
            .and_then(|m| m.get(&entries).cloned())
            .filter(|(at, _)| *at == stamp);
        let groups = match known {
            Some((_, groups)) => groups,
            None => {
                let mut groups = Groups::new();
                for entry in std::fs::read_dir(&entries).into_iter().flatten().flatten() {
                    let manifest = entry.path().join(crate::MANIFEST_FILE);
                    let Ok(manifest) = Manifest::read(&manifest) else {
                        continue;
                    };
                    if let Some(group) = arch_free_key(&manifest.payload) {
                        groups.entry(group).or_default().push(ArchIndexed {
                            images: entry_images(&manifest),
                            key: manifest.key,
                        });
                    }
                }
                for group in groups.values_mut() {
                    group.sort_by(|a, b| a.key.cmp(&b.key));
                }
                let groups = Arc::new(groups);
                if let Ok(mut memo) = memo.lock() {
                    memo.insert(entries, (stamp, Arc::clone(&groups)));
                }
                groups
            }
        };
        groups.get(arch_free).cloned().unwrap_or_default()
    }
}

/// Creates `dir` and its missing parents owner-only (0700), whatever the umask.
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(crate::private_file::DIR_MODE)
        .create(dir)
}

/// The lines of one arch-free directory, sorted by key; unreadable or
/// oversized lines are skipped.
fn read_lines(dir: &Path) -> Vec<ArchIndexed> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = BTreeMap::new();
    for line in read.flatten() {
        let name = line.file_name();
        let Some(key) = name.to_str().filter(|k| validate_key(k).is_ok()) else {
            continue;
        };
        let Ok(bytes) = abicache_fs::read_bounded(&line.path(), abicache_fs::Follow::No, MAX_LINE)
        else {
            continue;
        };
        let images = String::from_utf8_lossy(&bytes)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        out.insert(key.to_owned(), images);
    }
    out.into_iter()
        .map(|(key, images)| ArchIndexed { key, images })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAYLOAD: &str = "format=1\nname=ext\ncuda_archs=-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=compute_90 -gencode=arch=compute_90,code=sm_90\nnvcc=12.8\n";

    fn other_archs() -> String {
        PAYLOAD.replace(
            "cuda_archs=-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=compute_90 ",
            "cuda_archs=",
        )
    }

    #[test]
    fn the_arch_free_key_ignores_only_the_arch_list() {
        let key = arch_free_key(PAYLOAD).unwrap();
        assert_eq!(key.len(), 32);
        assert_eq!(arch_free_key(&other_archs()), Some(key.clone()));
        assert_ne!(
            arch_free_key(&PAYLOAD.replace("nvcc=12.8", "nvcc=12.9")),
            Some(key)
        );
        // No arch list (CPU), or an empty one (the user's flags choose): none.
        assert_eq!(arch_free_key("format=1\nname=ext\n"), None);
        assert_eq!(arch_free_key("format=1\ncuda_archs=\nname=ext\n"), None);
    }

    #[test]
    fn images_come_from_the_library_else_from_the_arch_list() {
        let mut m = Manifest::new("k", "ext", PAYLOAD);
        assert_eq!(entry_images(&m), ["compute_90", "sm_80", "sm_90"]);
        m.device_images = vec!["sm_90".into(), "sm_80".into()];
        assert_eq!(entry_images(&m), ["sm_80", "sm_90"]);
    }

    fn publish(store: &Store, key: &str, payload: &str) {
        let guard = store.begin_build(key).unwrap();
        std::fs::write(guard.temp_dir().join("libx.so"), b"lib").unwrap();
        let _ = guard
            .publish("libx.so", Manifest::new(key, "ext", payload))
            .unwrap();
    }

    #[test]
    fn publish_indexes_gc_sweeps_and_a_deleted_index_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("c")).unwrap();
        let (a, b) = ("a".repeat(32), "b".repeat(32));
        publish(&store, &a, PAYLOAD);
        publish(&store, &b, &other_archs());
        let arch_free = arch_free_key(PAYLOAD).unwrap();
        let listed = store.arch_free_entries(&arch_free);
        assert_eq!(
            listed,
            [
                ArchIndexed {
                    key: a.clone(),
                    images: vec!["compute_90".into(), "sm_80".into(), "sm_90".into()]
                },
                ArchIndexed {
                    key: b.clone(),
                    images: vec!["sm_90".into()]
                }
            ]
        );
        // A removed entry's line is a miss at once, and swept by gc.
        assert_eq!(store.remove(&a).unwrap(), 1);
        assert_eq!(store.arch_free_entries(&arch_free).len(), 1);
        assert_eq!(store.sweep_arch_index(), 1);
        // The index is derived: deleting it loses nothing.
        std::fs::remove_dir_all(store.layout().arch_index_dir()).unwrap();
        assert_eq!(store.arch_free_entries(&arch_free)[0].key, b);
        assert!(store.arch_free_entries("not a key").is_empty());
        // A layer groups its manifests itself.
        let layer = ReadOnlyLayer::new(store.root());
        assert_eq!(
            layer.arch_free_entries(&arch_free),
            store.arch_free_entries(&arch_free)
        );
    }
}
