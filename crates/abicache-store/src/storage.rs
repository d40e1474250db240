//! The `Storage` trait: the minimal interface a remote backend can implement
//! to sit behind the local store.

use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::library_name::LibraryName;
use crate::manifest::Manifest;
use crate::store::{Claim, Store};

/// A verified entry as handed out by a [`Storage`].
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEntry {
    /// The manifest's JSON bytes.
    pub manifest: Vec<u8>,
    /// A local path to the library, whose BLAKE3 matches the manifest.
    pub library: PathBuf,
}

/// Somewhere entries can be fetched from and stored to, by key.
pub trait Storage {
    /// The entry for `key` if present and intact; `Ok(None)` on a miss.
    fn get(&self, key: &str) -> Result<Option<StoredEntry>>;
    /// Stores `library` under `key` with `manifest` (JSON bytes of a
    /// [`Manifest`] for that key). Idempotent: an intact existing entry is kept.
    fn put(&self, key: &str, manifest: &[u8], library: &Path) -> Result<()>;
}

impl Storage for Store {
    /// [`Store::lookup`] (corrupt entries are removed; their warnings are dropped,
    /// use `lookup` to see them).
    fn get(&self, key: &str) -> Result<Option<StoredEntry>> {
        Ok(self.lookup(key)?.hit.map(|hit| StoredEntry {
            manifest: hit.manifest.to_json(),
            library: hit.library,
        }))
    }

    /// Copies `library` into a build directory and publishes it under the
    /// key's lock. Must not be called while this process holds `key`'s lock
    /// (it would wait for itself until `ABICACHE_LOCK_TIMEOUT`).
    fn put(&self, key: &str, manifest: &[u8], library: &Path) -> Result<()> {
        let manifest = Manifest::from_json(manifest, Path::new("<manifest given to put>"))?;
        if manifest.key != key {
            return Err(StoreError::KeyMismatch {
                key: key.to_owned(),
                manifest_key: manifest.key,
            });
        }
        let guard = match self.lookup_or_lock(key)? {
            Claim::Hit { .. } => return Ok(()),
            Claim::Build { guard, .. } => guard,
        };
        let name = if manifest.library.is_empty() {
            library
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            manifest.library.clone()
        };
        let name = LibraryName::parse(&name)?;
        fs_err::copy(library, guard.temp_dir().join(&name))?;
        let _ = guard.publish(name.as_str(), manifest)?;
        Ok(())
    }
}
