//! Building into a private directory and publishing it atomically.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use abicache_fs::{open_regular, FileStamp, Follow};

use crate::error::{Result, StoreError};
use crate::gc::GcReport;
use crate::key_claim::KeyClaim;
use crate::layout::{LAST_USED_FILE, MANIFEST_FILE, MANIFEST_FORMAT};
use crate::manifest::{unix_now, Manifest};
use crate::private_file::{make_private_tree, FILE_MODE};
use crate::store::{hash_reader, Hit, Store, Verified};

/// The right to build one key: holds the key's claim (its lock, or in
/// shared mode its lease, refreshed while held) and a fresh private
/// directory under `v1/tmp/`. Dropping it without [`BuildGuard::publish`]
/// removes the directory and releases the claim; if the process dies
/// instead, the kernel releases the lock (the lease goes stale) and a later
/// [`Store::open`] or [`Store::gc`] removes the directory.
#[derive(Debug)]
pub struct BuildGuard {
    store: Store,
    key: String,
    // Field order is drop order: the directory is removed before the claim is released.
    temp: tempfile::TempDir,
    lock: KeyClaim,
}

/// The result of [`BuildGuard::publish`].
#[derive(Debug)]
#[must_use]
pub struct Published {
    /// The entry just published.
    pub hit: Hit,
    /// The collection run because the store has a maximum size
    /// (`ABICACHE_MAX_SIZE`); the new entry is never evicted by it.
    pub gc: Option<GcReport>,
}

impl BuildGuard {
    pub(crate) fn new(store: Store, key: String, lock: KeyClaim) -> Result<Self> {
        let tmp = store.layout().tmp_dir();
        // Owner-only; the `<key>.` prefix lets stale-temp cleanup find the
        // lock that protects it.
        let temp = tempfile::Builder::new()
            .prefix(&format!("{key}."))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&tmp)
            .map_err(StoreError::io_at("create a build directory in", tmp))?;
        Ok(BuildGuard {
            store,
            key,
            temp,
            lock,
        })
    }

    /// The key this guard may build.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The private directory to build into (same filesystem as the entries).
    /// Everything in it becomes part of the entry on publish, so keep
    /// intermediate files elsewhere (e.g. [`Store::objects_dir`]).
    pub fn temp_dir(&self) -> &Path {
        self.temp.path()
    }

    /// Publishes the build: makes everything in `temp_dir()` owner-only
    /// (directories and the library 0700, other files 0600, whatever the
    /// umask), hashes and fsyncs `temp_dir()/library_file_name` (a regular
    /// file, not a symlink),
    /// fills `manifest`'s `format`, `library`, `library_blake3` and `size`
    /// (and `key`/`created` when empty/zero), writes `manifest.json` last and
    /// fsyncs it and the directory, then renames the directory to
    /// `entries/<key>` (replacing a stale entry) and fsyncs `entries/`,
    /// then records it in the arch-free index ([`Store::index_arch_free`]).
    /// Every other regular file of the entry is fsynced too.
    /// A reader sees either no entry or the complete one. When the store has
    /// a maximum size, collects it afterwards, sparing this entry.
    ///
    /// In shared mode a verified entry already in place (published by
    /// another node whose lease this process took over, say) is never
    /// replaced: this build is dropped and that entry returned, since
    /// processes elsewhere may be loading it.
    pub fn publish(self, library_file_name: &str, mut manifest: Manifest) -> Result<Published> {
        let BuildGuard {
            store,
            key,
            temp,
            lock,
        } = self;
        crate::library_name::LibraryName::parse(library_file_name)?;
        if manifest.key.is_empty() {
            manifest.key = key.clone();
        } else if manifest.key != key {
            return Err(StoreError::KeyMismatch {
                key,
                manifest_key: manifest.key,
            });
        }
        let library = temp.path().join(library_file_name);
        let (file, meta) = match open_regular(&library, Follow::No) {
            Ok(opened) => opened,
            Err(e) if e.is_not_found() => {
                return Err(StoreError::MissingLibrary { key, path: library })
            }
            Err(e) => return Err(e.into()),
        };
        make_private_tree(temp.path(), &library)
            .map_err(StoreError::io_at("set owner-only modes under", temp.path()))?;
        fsync_files(temp.path()).map_err(StoreError::io_at("flush the files of", temp.path()))?;
        file.sync_all()
            .map_err(StoreError::io_at("flush", &library))?;
        manifest.size = meta.len();
        manifest.library_blake3 =
            hash_reader(&file).map_err(StoreError::io_at("hash", &library))?;
        // The hashed descriptor's stamp, taken after its mode was set
        // (renaming the entry directory into place leaves it as it is).
        let stamp = file.metadata().ok().map(|m| FileStamp::of(&m));
        manifest.library = library_file_name.to_owned();
        manifest.format = MANIFEST_FORMAT;
        if manifest.created == 0 {
            manifest.created = unix_now();
        }

        create_private(&temp.path().join(LAST_USED_FILE))?;
        let manifest_path = temp.path().join(MANIFEST_FILE);
        let mut out = create_private(&manifest_path)?;
        out.write_all(&manifest.to_json())?;
        out.sync_all()?;
        fsync_dir(temp.path())?;

        let entry = store.layout().entry_dir(&key);
        if store.mode().shared {
            if let Some(hit) = existing_hit(&store, &key, &entry) {
                return Ok(Published { hit, gc: None });
            }
        }
        // A stale entry (corrupt, or published by a caller that skipped the
        // re-lookup) is moved aside first; rename cannot replace a non-empty directory.
        store.discard_entry(&key)?;
        if let Err(e) = std::fs::rename(temp.path(), &entry) {
            // Shared mode: another node published between the discard and the rename.
            let taken = matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST));
            if let Some(hit) = taken.then(|| existing_hit(&store, &key, &entry)).flatten() {
                return Ok(Published { hit, gc: None });
            }
            return Err(StoreError::io_at("publish", &entry)(e));
        }
        let _ = temp.keep();
        fsync_dir(&store.layout().entries_dir())?;
        store.index_arch_free(&manifest);

        let gc = store
            .max_size()
            .map(|max| store.gc_sparing(max, Some(&key)));
        drop(lock);
        let library = entry.join(library_file_name);
        Ok(Published {
            hit: Hit {
                dir: entry,
                library,
                manifest,
                rehashed: false,
                stamp,
            },
            gc,
        })
    }
}

/// The verified entry at `entry`, if one is there (its stamp not trusted).
fn existing_hit(store: &Store, key: &str, entry: &Path) -> Option<Hit> {
    match store.verify(key, entry) {
        Verified::Hit(hit) => Some(*hit),
        _ => None,
    }
}

/// fsyncs every regular file under `dir` (not following symlinks).
fn fsync_files(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            fsync_files(&entry.path())?;
            fsync_dir(&entry.path()).map_err(std::io::Error::other)?;
        } else if kind.is_file() {
            std::fs::File::open(entry.path())?.sync_all()?;
        }
    }
    Ok(())
}

/// Creates a new file owner-only (0600), whatever the umask.
fn create_private(path: &Path) -> Result<fs_err::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(StoreError::io_at("create", path))?;
    Ok(fs_err::File::from_parts(file, path))
}

/// fsyncs a directory so the names in it survive a crash.
fn fsync_dir(dir: &Path) -> Result<()> {
    fs_err::File::open(dir)?.sync_all()?;
    Ok(())
}
