//! Read-only cache layers: cache roots consulted after the local cache and
//! never written (`ABICACHE_READONLY_DIRS`, installed cache wheels), like
//! ccache's secondary storage and sccache's read-only mode.
//!
//! A layer is someone else's cache (populated by CI, on NFS or in a container
//! image layer), so its trust rules differ from the local cache's:
//! - every directory from the layer root down to the entry, the manifest and
//!   the library are owned by root or by this user, are not writable by group
//!   or others, and are not symlinks (the root itself may be reached through
//!   one);
//! - the manifest is for this layout and this key, was audited at publish,
//!   and names a valid library file;
//! - when the layer carries an index (`abicache-index.json`, as a cache wheel
//!   does), the manifest's bytes have the size and BLAKE3 it lists;
//! - the library has the manifest's size and BLAKE3: hashed in full the
//!   first time in a process, then remembered *in memory* by its stat stamp
//!   (device, inode, size, mtime, ctime), since a layer holds no stamps;
//! - nothing is written: no `last-used`, no stamp file, no lock, no counter.
//!   A hit is served in place (its library path is inside the layer).
//!
//! A failed check is a [`LayerWarning`] and a miss; the entry is left as it
//! is (the layer is not ours to repair).

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use abicache_fs::{read_bounded, verify_file, Expected, FileStamp, Follow};

use crate::bundle::BundleIndex;
use crate::layout::{
    current_uid, trusted_owner, validate_key, Layout, MANIFEST_FILE, MANIFEST_FORMAT,
};
use crate::manifest::{Manifest, MAX_MANIFEST_SIZE};
use crate::store::{valid_library_name, Hit};
use crate::warning::Corruption;

/// The file at a layer's root that lists every entry file's size and BLAKE3
/// (a [`crate::BundleIndex`]), written by `abicache export --wheel`.
pub const LAYER_INDEX_FILE: &str = "abicache-index.json";
/// The signature of [`LAYER_INDEX_FILE`] (opaque to the store).
pub const LAYER_SIGNATURE_FILE: &str = "abicache-index.sig";

/// The largest layer index read.
const MAX_INDEX_SIZE: u64 = 64 << 20;

/// One read-only cache root. Cheap to clone; reads only.
#[derive(Clone, Debug)]
pub struct ReadOnlyLayer {
    layout: Layout,
}

/// A layer entry that was skipped: reported to the caller, never fatal,
/// and never repaired (the layer is read-only).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerWarning {
    /// The layer's root.
    pub layer: PathBuf,
    /// The entry's key.
    pub key: String,
    /// What was wrong.
    pub problem: Corruption,
}

impl LayerWarning {
    /// The warning with `fix` as what to do: a configured layer's remedy
    /// (the [`fmt::Display`] text) names `ABICACHE_READONLY_DIRS`, which an
    /// installed cache wheel is not in; its caller names a wheel's.
    pub fn with_fix(&self, fix: &str) -> String {
        format!(
            "read-only cache layer `{}`: entry `{}` skipped: {}; it is built locally instead \
             ({fix})",
            self.layer.display(),
            self.key,
            self.problem
        )
    }
}

impl fmt::Display for LayerWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            &self.with_fix(
                "fix or re-populate the layer, or remove it from `ABICACHE_READONLY_DIRS`",
            ),
        )
    }
}

/// The answer of [`ReadOnlyLayer::lookup`].
#[derive(Debug, Default)]
#[must_use]
pub struct LayerLookup {
    /// The verified entry, served in place.
    pub hit: Option<Hit>,
    /// Why an entry present in the layer was skipped.
    pub warning: Option<LayerWarning>,
}

/// The stamps of layer libraries hashed in this process (a layer has no
/// stamp files): path → the stamp it had when its BLAKE3 matched.
fn verified_in_process() -> &'static Mutex<HashMap<PathBuf, FileStamp>> {
    static VERIFIED: OnceLock<Mutex<HashMap<PathBuf, FileStamp>>> = OnceLock::new();
    VERIFIED.get_or_init(Default::default)
}

impl ReadOnlyLayer {
    /// The layer at `root` (nothing is read yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ReadOnlyLayer {
            layout: Layout::new(root),
        }
    }

    /// The layer's root.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }

    /// The layer's index (`abicache-index.json`) as bytes, with its
    /// signature (`abicache-index.sig`) if any; `None` when it has no index.
    pub fn index_bytes(&self) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let root = self.layout.root();
        let index = read_bounded(&root.join(LAYER_INDEX_FILE), Follow::No, MAX_INDEX_SIZE).ok()?;
        let signature =
            read_bounded(&root.join(LAYER_SIGNATURE_FILE), Follow::No, MAX_INDEX_SIZE).ok();
        Some((index, signature))
    }

    /// Looks `key` up without writing anything (see the module doc for
    /// the checks). An absent entry is a plain miss; one that fails a check
    /// is a miss with a [`LayerWarning`].
    pub fn lookup(&self, key: &str) -> LayerLookup {
        if validate_key(key).is_err() {
            return LayerLookup::default();
        }
        let dir = self.layout.entry_dir(key);
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return LayerLookup::default(),
            _ => {}
        }
        match self.verify(key, &dir) {
            Ok(Some(hit)) => LayerLookup {
                hit: Some(hit),
                warning: None,
            },
            Ok(None) => LayerLookup::default(),
            Err(problem) => LayerLookup {
                hit: None,
                warning: Some(LayerWarning {
                    layer: self.layout.root().to_owned(),
                    key: key.to_owned(),
                    problem,
                }),
            },
        }
    }

    fn verify(&self, key: &str, dir: &Path) -> Result<Option<Hit>, Corruption> {
        let uid = current_uid().map_err(|e| insecure(e.to_string()))?;
        // The root may be reached through a symlink (a mount point, a
        // `current` link); everything below it may not.
        let root_meta = std::fs::metadata(self.layout.root())
            .map_err(|e| insecure(format!("`{}`: {e}", self.layout.root().display())))?;
        check_trusted(self.layout.root(), &root_meta, uid, true)?;
        for path in [
            self.layout.version_dir().to_path_buf(),
            self.layout.entries_dir(),
            dir.to_path_buf(),
        ] {
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| insecure(format!("`{}`: {e}", path.display())))?;
            check_trusted(&path, &meta, uid, true)?;
        }
        let manifest_path = dir.join(MANIFEST_FILE);
        let manifest_meta = match std::fs::symlink_metadata(&manifest_path) {
            Ok(meta) => meta,
            // An entry without its manifest does not exist.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(insecure(format!("`{}`: {e}", manifest_path.display()))),
        };
        check_trusted(&manifest_path, &manifest_meta, uid, false)?;
        let bytes = read_bounded(&manifest_path, Follow::No, MAX_MANIFEST_SIZE).map_err(|e| {
            Corruption::UnreadableManifest {
                error: e.to_string(),
            }
        })?;
        self.check_indexed(key, &bytes)?;
        let manifest = Manifest::from_json(&bytes, &manifest_path).map_err(|e| {
            match Manifest::unknown_requirements(&bytes) {
                Some(format) => Corruption::UnknownRequirements { format },
                None => Corruption::UnreadableManifest {
                    error: e.to_string(),
                },
            }
        })?;
        if manifest.format < MANIFEST_FORMAT {
            return Err(Corruption::UnknownRequirements {
                format: manifest.format,
            });
        }
        if manifest.format != MANIFEST_FORMAT
            || manifest.key != key
            || !valid_library_name(&manifest.library)
            || manifest.audit.is_none()
        {
            return Err(Corruption::InconsistentManifest {
                format: manifest.format,
                key: manifest.key,
                library: manifest.library,
            });
        }
        let library = dir.join(&manifest.library);
        let library_meta =
            std::fs::symlink_metadata(&library).map_err(|_| Corruption::MissingLibrary {
                library: library.clone(),
            })?;
        check_trusted(&library, &library_meta, uid, false)?;
        let expected = Expected {
            size: manifest.size,
            blake3: manifest.library_blake3.clone(),
        };
        let known = verified_in_process()
            .lock()
            .ok()
            .and_then(|m| m.get(&library).copied());
        let checked = verify_file(&library, &expected, known.as_ref(), Follow::No)
            .map_err(|mismatch| Corruption::of_library(library.clone(), mismatch))?;
        if let (Some(stamp), Ok(mut memo)) = (checked.stamp, verified_in_process().lock()) {
            memo.insert(library.clone(), stamp);
        }
        Ok(Some(Hit {
            dir: dir.to_owned(),
            library,
            manifest,
            rehashed: checked.rehashed,
            stamp: checked.opened,
        }))
    }

    /// When the layer has an index, the manifest's bytes must be listed in it.
    fn check_indexed(&self, key: &str, manifest: &[u8]) -> Result<(), Corruption> {
        let index_path = self.layout.root().join(LAYER_INDEX_FILE);
        let bytes = match read_bounded(&index_path, Follow::No, MAX_INDEX_SIZE) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(insecure(format!("its index is unreadable: {e}"))),
        };
        let index: BundleIndex = serde_json::from_slice(&bytes).map_err(|e| {
            insecure(format!(
                "its index `{}` is invalid: {e}",
                index_path.display()
            ))
        })?;
        let listed = index
            .entries
            .iter()
            .find(|e| e.key == key)
            .and_then(|e| e.files.iter().find(|f| f.name == MANIFEST_FILE));
        match listed {
            Some(file)
                if file.size == manifest.len() as u64
                    && file.blake3 == abicache_fs::blake3_hex(manifest) =>
            {
                Ok(())
            }
            Some(_) => Err(insecure(
                "its manifest differs from the one the layer's index lists (tampered?)".into(),
            )),
            None => Err(insecure("the layer's index does not list it".into())),
        }
    }
}

fn insecure(reason: String) -> Corruption {
    Corruption::Insecure { reason }
}

/// A layer's file or directory must be owned by root or by `uid`, must not be
/// writable by group or others, must not be a symlink, and must be a
/// directory (`dir`) or a regular file.
fn check_trusted(
    path: &Path,
    meta: &std::fs::Metadata,
    uid: u32,
    dir: bool,
) -> Result<(), Corruption> {
    let kind_ok = if dir {
        meta.is_dir()
    } else {
        meta.file_type().is_file()
    };
    if !kind_ok {
        let what = if dir { "a directory" } else { "a regular file" };
        return Err(insecure(format!("`{}` is not {what}", path.display())));
    }
    if !trusted_owner(meta.uid(), uid, true) {
        return Err(insecure(format!(
            "`{}` is owned by uid {}, neither root nor uid {uid} (this process)",
            path.display(),
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(insecure(format!(
            "`{}` has mode {mode:04o}, which lets other users write it",
            path.display()
        )));
    }
    Ok(())
}
