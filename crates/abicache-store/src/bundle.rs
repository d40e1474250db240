//! Bundles: one file that carries cache entries to a machine without a
//! compiler or a network (`abicache export` / `abicache import`).
//!
//! A bundle is a zstd stream (with its content checksum) of a tar archive:
//!
//! ```text
//! abicache-bundle/index.json     BundleIndex: every entry's files, sizes and BLAKE3s (first)
//! abicache-bundle/index.sig      optional: the caller's signature over the index (second)
//! entries/<key>/manifest.json    the entry's manifest
//! entries/<key>/<library>        the library
//! ```
//!
//! followed by a seal: a zstd skippable frame holding the BLAKE3 of every
//! byte before it, so that any changed byte of the file is caught, even one
//! the decompressor would ignore (a frame header's window size).
//!
//! Reading is all or nothing, and nothing is believed before it is checked:
//! [`UnpackedBundle::unpack_with`] copies the file into a private staging
//! directory under the store's `v1/tmp/` (bounded) and checks its seal, then
//! reads the index and signature within a fixed budget and lets the caller
//! check them, and only then extracts the libraries, the decompressed stream
//! capped at what the index lists, refusing any member the index does not
//! list, any member larger than the index says, links and special files; then every file is checked against the index with
//! [`abicache_fs::verify_file`] and every manifest against its entry. Only a
//! bundle that passed all of it can be published, each entry atomically
//! through the store's ordinary lock and publish. Signatures and the
//! meaning of keys are the caller's business: the store keeps them opaque.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use abicache_fs::{open_regular, verify_file, Expected, Follow};
use serde::{Deserialize, Serialize};

use crate::error::{BundleError, Result, StoreError};
use crate::layout::{validate_key, MANIFEST_FILE, MANIFEST_FORMAT};
use crate::manifest::Manifest;
use crate::store::{valid_library_name, Claim, Hit, Store};

/// The version of the bundle format ([`BundleIndex::format`]).
pub const BUNDLE_FORMAT: u32 = 1;
/// The index's path inside the archive.
pub const INDEX_PATH: &str = "abicache-bundle/index.json";
/// The signature's path inside the archive.
pub const SIGNATURE_PATH: &str = "abicache-bundle/index.sig";
/// The largest index or signature a reader accepts (bytes).
const MAX_META_BYTES: u64 = 16 << 20;
/// The most trailing bytes accepted after the archive's end marker.
const MAX_TRAILER_BYTES: u64 = 1 << 20;
/// zstd level: fast enough for hundreds of MiB, most of the gain on ELF.
const ZSTD_LEVEL: i32 = 6;
/// The longest GNU long name a reader accepts (bytes): a path, not a payload.
const MAX_LONG_NAME: u64 = 4096;
/// What the archive may hold, decompressed, around one member: its header, a GNU
/// long-name header with its name, and the padding to 512 bytes.
const MEMBER_OVERHEAD: u64 = 3 * 512 + MAX_LONG_NAME;
/// The decompressed bytes allowed before the index (and signature) are checked:
/// both at their largest, with their headers.
const META_BUDGET: u64 = 2 * (MAX_META_BYTES + MEMBER_OVERHEAD);
/// The end of a tar archive: two zero blocks, padded to a 10240-byte record.
const ARCHIVE_END: u64 = 10240;

/// How much a bundle may make this machine hold while it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleLimits {
    /// The most bytes the bundle file may have, and the most its index may list
    /// (the sum of its files' sizes); the decompressed archive may hold that plus
    /// its headers. Checked before anything is decompressed or extracted.
    pub max_bytes: u64,
}

impl BundleLimits {
    /// The default for a store whose temporary directory is `tmp`: a quarter of the
    /// space free there (the bundle is spooled, then extracted, then published on
    /// that file system), and 1 GiB when that cannot be read.
    pub fn for_dir(tmp: &Path) -> BundleLimits {
        let free = free_bytes(tmp).unwrap_or(4 << 30);
        BundleLimits {
            max_bytes: free / 4,
        }
    }
}

/// Bytes available to this user on the file system of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// What is known of a bundle once its index (and signature) are read: what a
/// caller checks (a signature, who signed it) before any library is extracted.
#[derive(Debug)]
pub struct BundleMeta<'a> {
    /// The index as parsed.
    pub index: &'a BundleIndex,
    /// The index's exact bytes (what a signature covers).
    pub index_bytes: &'a [u8],
    /// The signature stored next to the index, if any (opaque).
    pub signature: Option<&'a [u8]>,
}

/// A reader that fails once it has passed on more bytes than its budget, which
/// its owner raises as it learns what the stream may hold.
struct Budget<R: Read> {
    inner: R,
    left: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.left.get();
        if left == 0 {
            // One byte more than allowed: there is more, and it is refused.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(
                    "its archive holds more than its index lists (decompression budget exceeded)",
                )),
            };
        }
        let max = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left.set(left - n as u64);
        Ok(n)
    }
}

/// The index of a bundle: what it holds, with each file's size and BLAKE3.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleIndex {
    /// [`BUNDLE_FORMAT`].
    pub format: u32,
    /// The entries, in archive order.
    pub entries: Vec<BundleEntry>,
}

/// One entry of a [`BundleIndex`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleEntry {
    /// The cache key.
    pub key: String,
    /// The extension's name.
    pub name: String,
    /// The entry's files: `manifest.json` and the library.
    pub files: Vec<BundleFile>,
    /// The device-code images its library carries (the manifest's
    /// [`Manifest::device_images`]); empty and absent for a CPU library.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_images: Vec<String>,
}

impl BundleEntry {
    /// The index entry of an entry whose manifest is `manifest`, serialized
    /// as `manifest_json` (the bytes shipped): the manifest's own size and
    /// hash, and the library's as the manifest records them.
    pub fn of(manifest: &Manifest, manifest_json: &[u8]) -> BundleEntry {
        BundleEntry {
            key: manifest.key.clone(),
            name: manifest.name.clone(),
            files: vec![
                BundleFile {
                    name: MANIFEST_FILE.to_owned(),
                    size: manifest_json.len() as u64,
                    blake3: abicache_fs::blake3_hex(manifest_json),
                },
                BundleFile {
                    name: manifest.library.clone(),
                    size: manifest.size,
                    blake3: manifest.library_blake3.clone(),
                },
            ],
            device_images: manifest.device_images.clone(),
        }
    }
}

/// One file of a [`BundleEntry`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleFile {
    /// Its name inside the entry directory.
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its BLAKE3, lower-case hex.
    pub blake3: String,
}

/// Writes a bundle of `hits` to `out` and returns the index it wrote. Each
/// library is re-verified against its manifest first (a library that
/// changed since it was looked up is an error, never exported). `sign`
/// receives the exact bytes of the index and returns the signature to store
/// next to it, if any.
pub fn write_bundle<W: Write>(
    out: W,
    hits: &[Hit],
    sign: &dyn Fn(&[u8]) -> Option<Vec<u8>>,
) -> Result<BundleIndex> {
    if hits.is_empty() {
        return Err(BundleError::Empty.into());
    }
    let mut index = BundleIndex {
        format: BUNDLE_FORMAT,
        entries: Vec::with_capacity(hits.len()),
    };
    let mut manifests = Vec::with_capacity(hits.len());
    for hit in hits {
        let manifest = hit.manifest.to_json();
        let expected = Expected {
            size: hit.manifest.size,
            blake3: hit.manifest.library_blake3.clone(),
        };
        verify_file(&hit.library, &expected, None, Follow::No).map_err(|e| {
            StoreError::Io(std::io::Error::other(format!(
                "cannot export `{}`: {e}; run `abicache ls` to see the cache, or rebuild it",
                hit.library.display()
            )))
        })?;
        index
            .entries
            .push(BundleEntry::of(&hit.manifest, &manifest));
        manifests.push(manifest);
    }
    let index_bytes = serde_json::to_vec_pretty(&index).expect("an index always serializes");
    let sealed = SealWriter {
        inner: out,
        hasher: blake3::Hasher::new(),
    };
    let mut encoder = zstd::stream::write::Encoder::new(sealed, ZSTD_LEVEL)?;
    encoder.include_checksum(true)?;
    let mut tar = tar::Builder::new(encoder);
    append(
        &mut tar,
        INDEX_PATH,
        index_bytes.len() as u64,
        &index_bytes[..],
    )?;
    if let Some(signature) = sign(&index_bytes) {
        append(
            &mut tar,
            SIGNATURE_PATH,
            signature.len() as u64,
            &signature[..],
        )?;
    }
    for ((hit, entry), manifest) in hits.iter().zip(&index.entries).zip(&manifests) {
        let dir = format!("entries/{}", entry.key);
        let manifest_path = format!("{dir}/{MANIFEST_FILE}");
        append(
            &mut tar,
            &manifest_path,
            manifest.len() as u64,
            &manifest[..],
        )?;
        let (file, _) = open_regular(&hit.library, Follow::No)
            .map_err(|e| StoreError::Io(std::io::Error::other(e.to_string())))?;
        let size = entry.files[1].size;
        append(
            &mut tar,
            &format!("{dir}/{}", hit.manifest.library),
            size,
            file.take(size),
        )?;
    }
    tar.into_inner()?.finish()?.seal()?;
    Ok(index)
}

/// The first bytes of the seal: a zstd skippable frame's magic and length.
const SEAL_HEADER: [u8; 8] = [0x5A, 0x2A, 0x4D, 0x18, 32, 0, 0, 0];
/// The seal's length: its header and a BLAKE3.
const SEAL_LEN: usize = SEAL_HEADER.len() + 32;

/// Hashes everything written through it, then appends the seal.
struct SealWriter<W: Write> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for SealWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> SealWriter<W> {
    fn seal(mut self) -> std::io::Result<()> {
        self.inner.write_all(&SEAL_HEADER)?;
        self.inner.write_all(self.hasher.finalize().as_bytes())?;
        self.inner.flush()
    }
}

/// Passes every byte through while hashing all but the last [`SEAL_LEN`],
/// which it keeps to check as the seal at the end.
struct SealReader<R: Read> {
    inner: R,
    hasher: blake3::Hasher,
    tail: Vec<u8>,
}

impl<R: Read> Read for SealReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.tail.extend_from_slice(&buf[..n]);
        if self.tail.len() > SEAL_LEN {
            let excess = self.tail.len() - SEAL_LEN;
            self.hasher.update(&self.tail[..excess]);
            self.tail.drain(..excess);
        }
        Ok(n)
    }
}

impl<R: Read> SealReader<R> {
    /// Reads to the end and checks the seal against everything before it.
    fn check(mut self) -> Result<()> {
        let mut rest = [0u8; 64];
        match self.read(&mut rest) {
            Ok(0) => {}
            Ok(_) => return Err(corrupt("data follows its end".to_owned())),
            Err(e) => return Err(corrupt(format!("it cannot be read to its end ({e})"))),
        }
        let sealed = self.tail.len() == SEAL_LEN
            && self.tail[..SEAL_HEADER.len()] == SEAL_HEADER
            && self.tail[SEAL_HEADER.len()..] == *self.hasher.finalize().as_bytes();
        if !sealed {
            return Err(corrupt(
                "its bytes do not match its seal (BLAKE3 of the whole file)".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Appends one regular file (mode 0644, owner 0, mtime 0: the archive
/// depends only on the entries).
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    size: u64,
    data: impl Read,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    tar.append_data(&mut header, path, data)?;
    Ok(())
}

/// A verified entry waiting in the staging directory.
#[derive(Debug, Clone)]
pub struct StagedEntry {
    /// The cache key.
    pub key: String,
    /// Its manifest, checked against the index; the caller may update
    /// `audit` before publishing.
    pub manifest: Manifest,
    /// The staged library (inside the staging directory).
    pub library: PathBuf,
}

/// What [`UnpackedBundle::publish`] did with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Imported {
    /// Published into the store.
    Published,
    /// The store already had a verified entry for the key.
    AlreadyLocal,
}

/// A bundle extracted into a private staging directory and verified against
/// its index. Dropping it removes the staging directory.
#[derive(Debug)]
pub struct UnpackedBundle {
    /// The index as parsed.
    pub index: BundleIndex,
    /// The index's exact bytes (what a signature covers).
    pub index_bytes: Vec<u8>,
    /// The signature stored next to the index, if any (opaque).
    pub signature: Option<Vec<u8>>,
    entries: Vec<StagedEntry>,
    staging: tempfile::TempDir,
}

impl UnpackedBundle {
    /// [`UnpackedBundle::unpack_with`] under [`BundleLimits::for_dir`] of the store's
    /// `v1/tmp/`, with no check of the index beyond its own.
    pub fn unpack(store: &Store, input: impl Read) -> Result<UnpackedBundle> {
        let limits = BundleLimits::for_dir(&store.layout().tmp_dir());
        Self::unpack_with(store, input, limits, &|_| Ok(()))
    }

    /// Extracts the bundle `input` into a staging directory under `store`'s
    /// `v1/tmp/` and verifies it, in this order, so that nothing it says is
    /// believed before it is checked:
    ///
    /// 1. the file is copied into the staging directory (at most
    ///    `limits.max_bytes`) and its seal checked;
    /// 2. the index, first, and the signature next to it are read, within a
    ///    budget of their largest sizes, and `check` is called with them (the
    ///    caller verifies the signature there); the sizes the index lists must
    ///    add up to at most `limits.max_bytes`;
    /// 3. only then are libraries extracted, the decompressed stream capped at
    ///    what the index lists plus the archive's headers: every member is a
    ///    regular file the index lists, at a path of the form
    ///    `entries/<key>/<name>`, at most once, of the listed size (GNU long
    ///    names of at most 4 KiB are read here, bounded; PAX headers and any
    ///    other kind of member are refused);
    /// 4. every listed file is present and has the listed BLAKE3; each entry is
    ///    one manifest and one library, and the manifest names that library, its
    ///    size and BLAKE3, the entry's key and name. The zstd checksum and the
    ///    archive's end are checked too.
    ///
    /// Nothing touches the store's entries.
    pub fn unpack_with(
        store: &Store,
        input: impl Read,
        limits: BundleLimits,
        check: &dyn Fn(&BundleMeta<'_>) -> Result<()>,
    ) -> Result<UnpackedBundle> {
        let tmp = store.layout().tmp_dir();
        // A leading dot: never mistaken for a key's build directory by the
        // stale-temp cleanup, which removes it only once it is old.
        let staging = tempfile::Builder::new()
            .prefix(".bundle-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&tmp)
            .map_err(StoreError::io_at("create a staging directory in", tmp))?;

        // 1. The whole file, sealed, before a byte of it is decompressed.
        let spool_path = staging.path().join("bundle.tar.zst");
        let mut sealed = SealReader {
            inner: input,
            hasher: blake3::Hasher::new(),
            tail: Vec::with_capacity(2 * SEAL_LEN),
        };
        {
            let mut spool = fs_err::File::create_new(&spool_path)?;
            let copied = std::io::copy(&mut (&mut sealed).take(limits.max_bytes + 1), &mut spool)
                .map_err(|e| corrupt(format!("it cannot be read ({e})")))?;
            if copied > limits.max_bytes {
                return Err(too_large(format!(
                    "the bundle is larger than {} bytes",
                    limits.max_bytes
                )));
            }
        }
        sealed.check()?;
        let spool = fs_err::File::open(&spool_path)?;

        // 2. The index and signature, within their budget.
        let budget = std::rc::Rc::new(std::cell::Cell::new(META_BUDGET));
        let decoder = zstd::stream::read::Decoder::new(spool)
            .map_err(|e| corrupt(format!("it is not zstd data ({e})")))?;
        let mut archive = tar::Archive::new(Budget {
            inner: decoder,
            left: budget.clone(),
        });
        let mut members = archive
            .entries()
            .map_err(|e| corrupt(format!("its archive cannot be read ({e})")))?
            .raw(true);
        let mut long_name: Option<String> = None;
        let mut next = |long_name: &mut Option<String>| -> Result<Option<_>> {
            loop {
                let Some(member) = members.next() else {
                    return Ok(None);
                };
                let mut member =
                    member.map_err(|e| corrupt(format!("its archive is damaged ({e})")))?;
                let kind = member.header().entry_type();
                if kind.is_gnu_longname() {
                    *long_name = Some(read_long_name(&mut member)?);
                    continue;
                }
                let path = match long_name.take() {
                    Some(path) => path,
                    None => member_path(&member)?,
                };
                return Ok(Some((member, path)));
            }
        };

        let (index, index_bytes) = match next(&mut long_name)? {
            Some((member, path)) => {
                if path != INDEX_PATH || !member.header().entry_type().is_file() {
                    return Err(corrupt(format!("its first member is not `{INDEX_PATH}`")));
                }
                let bytes = read_meta(member, INDEX_PATH)?;
                let index: BundleIndex = serde_json::from_slice(&bytes)
                    .map_err(|e| corrupt(format!("its index is not valid ({e})")))?;
                (index, bytes)
            }
            None => return Err(corrupt("it is empty".to_owned())),
        };
        if index.format != BUNDLE_FORMAT {
            return Err(BundleError::Format {
                found: index.format,
                reads: BUNDLE_FORMAT,
            }
            .into());
        }
        check_index(&index)?;
        let listed = index
            .entries
            .iter()
            .flat_map(|e| &e.files)
            .try_fold(0u64, |sum, f| sum.checked_add(f.size))
            .filter(|sum| *sum <= limits.max_bytes)
            .ok_or_else(|| {
                too_large(format!(
                    "its index lists more than {} bytes of files",
                    limits.max_bytes
                ))
            })?;
        let mut signature = None;
        let mut pending = next(&mut long_name)?;
        if let Some((member, path)) = pending.take() {
            if path == SIGNATURE_PATH && member.header().entry_type().is_file() {
                signature = Some(read_meta(member, SIGNATURE_PATH)?);
            } else {
                pending = Some((member, path));
            }
        }
        check(&BundleMeta {
            index: &index,
            index_bytes: &index_bytes,
            signature: signature.as_deref(),
        })?;

        // 3. The files the index lists, and no more.
        let files = index
            .entries
            .iter()
            .map(|e| e.files.len() as u64)
            .sum::<u64>();
        budget
            .set(budget.get() + listed + files * MEMBER_OVERHEAD + ARCHIVE_END + MAX_TRAILER_BYTES);
        for entry in &index.entries {
            let dir = staging.path().join(&entry.key);
            fs_err::create_dir(&dir)?;
        }
        let mut seen = std::collections::HashSet::new();
        loop {
            let (mut member, path) = match pending.take() {
                Some(found) => found,
                None => match next(&mut long_name)? {
                    Some(found) => found,
                    None => break,
                },
            };
            let listed = listed_file(&index, &path).ok_or_else(|| {
                corrupt(format!("it holds `{path}`, which its index does not list"))
            })?;
            if !member.header().entry_type().is_file() {
                return Err(corrupt(format!("`{path}` is not a regular file")));
            }
            let size = member
                .header()
                .size()
                .map_err(|e| corrupt(format!("`{path}` has an unreadable size ({e})")))?;
            if size != listed.size || !seen.insert(path.clone()) {
                return Err(corrupt(format!(
                    "`{path}` is {size} bytes or appears twice; the index lists {} bytes once",
                    listed.size
                )));
            }
            let target = staging.path().join(&path["entries/".len()..]);
            let mut out = fs_err::File::create_new(&target)?;
            let copied = std::io::copy(&mut (&mut member).take(listed.size), &mut out)
                .map_err(|e| corrupt(format!("`{path}` cannot be read ({e})")))?;
            if copied != listed.size {
                return Err(corrupt(format!("`{path}` is truncated")));
            }
            out.sync_all()?;
        }
        if long_name.is_some() {
            return Err(corrupt("its archive ends with a long name".to_owned()));
        }
        // The end of the zstd stream carries its checksum: read it all.
        let mut rest = archive.into_inner();
        let trailer = std::io::copy(
            &mut (&mut rest).take(MAX_TRAILER_BYTES + 1),
            &mut std::io::sink(),
        )
        .map_err(|e| corrupt(format!("its compressed stream is damaged ({e})")))?;
        if trailer > MAX_TRAILER_BYTES {
            return Err(corrupt("data follows the end of its archive".to_owned()));
        }
        drop(rest);
        let _ = std::fs::remove_file(&spool_path);

        let mut entries = Vec::with_capacity(index.entries.len());
        for entry in &index.entries {
            entries.push(verify_staged(staging.path(), entry)?);
        }
        Ok(UnpackedBundle {
            index,
            index_bytes,
            signature,
            entries,
            staging,
        })
    }

    /// The verified entries, in index order.
    pub fn entries(&self) -> &[StagedEntry] {
        &self.entries
    }

    /// The verified entries, to update their manifests (e.g. a fresh audit) before publishing.
    pub fn entries_mut(&mut self) -> &mut [StagedEntry] {
        &mut self.entries
    }

    /// The staging directory (removed when this value is dropped).
    pub fn staging_dir(&self) -> &Path {
        self.staging.path()
    }

    /// Publishes every entry into `store`, each under its key's lock and
    /// atomically (the store's ordinary publish); an entry the store already
    /// has, verified, is left as it is.
    pub fn publish(self, store: &Store) -> Result<Vec<(String, Imported)>> {
        self.publish_with(store, None)
    }

    /// [`UnpackedBundle::publish`], recording `provenance` (where the bundle
    /// came from, who signed it) in each entry it publishes.
    pub fn publish_with(
        self,
        store: &Store,
        provenance: Option<&crate::Provenance>,
    ) -> Result<Vec<(String, Imported)>> {
        let mut done = Vec::with_capacity(self.entries.len());
        for entry in &self.entries {
            let guard = match store.lookup_or_lock(&entry.key)? {
                Claim::Hit { .. } => {
                    done.push((entry.key.clone(), Imported::AlreadyLocal));
                    continue;
                }
                Claim::Build { guard, .. } => guard,
            };
            let name = entry.manifest.library.clone();
            fs_err::rename(&entry.library, guard.temp_dir().join(&name))?;
            if let Some(provenance) = provenance {
                provenance.write_into(guard.temp_dir())?;
            }
            let _ = guard.publish(&name, entry.manifest.clone())?;
            done.push((entry.key.clone(), Imported::Published));
        }
        Ok(done)
    }
}

fn corrupt(reason: String) -> StoreError {
    BundleError::Corrupt(reason).into()
}

/// A member's path as text, refusing anything but plain relative paths.
fn member_path<R: Read>(member: &tar::Entry<'_, R>) -> Result<String> {
    let path = member
        .path()
        .map_err(|e| corrupt(format!("a member has an unreadable path ({e})")))?;
    let text = path
        .to_str()
        .ok_or_else(|| corrupt("a member's path is not UTF-8".to_owned()))?;
    Ok(text.to_owned())
}

fn too_large(what: String) -> StoreError {
    BundleError::TooLarge(what).into()
}

/// Reads a GNU long name (bounded by [`MAX_LONG_NAME`]), without its trailing NULs.
fn read_long_name<R: Read>(member: &mut tar::Entry<'_, R>) -> Result<String> {
    let size = member.header().size().unwrap_or(u64::MAX);
    if size > MAX_LONG_NAME {
        return Err(corrupt(format!(
            "a member's long name is {size} bytes, more than {MAX_LONG_NAME}"
        )));
    }
    let mut bytes = Vec::new();
    member
        .take(MAX_LONG_NAME)
        .read_to_end(&mut bytes)
        .map_err(|e| corrupt(format!("a member's long name cannot be read ({e})")))?;
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    String::from_utf8(bytes).map_err(|_| corrupt("a member's path is not UTF-8".to_owned()))
}

/// Reads an index or signature member (bounded).
fn read_meta<R: Read>(member: tar::Entry<'_, R>, what: &str) -> Result<Vec<u8>> {
    if member.size() > MAX_META_BYTES {
        return Err(corrupt(format!(
            "`{what}` is {} bytes, more than {MAX_META_BYTES}",
            member.size()
        )));
    }
    let mut bytes = Vec::new();
    member
        .take(MAX_META_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| corrupt(format!("`{what}` cannot be read ({e})")))?;
    Ok(bytes)
}

/// Keys valid and unique; each entry one manifest and one library with plain names.
fn check_index(index: &BundleIndex) -> Result<()> {
    let mut keys = std::collections::HashSet::new();
    for entry in &index.entries {
        if validate_key(&entry.key).is_err() || !keys.insert(entry.key.as_str()) {
            return Err(corrupt(format!(
                "its index has an invalid or repeated key `{}`",
                entry.key
            )));
        }
        let [manifest, library] = entry.files.as_slice() else {
            return Err(corrupt(format!(
                "entry `{}` does not list exactly a manifest and a library",
                entry.key
            )));
        };
        if manifest.name != MANIFEST_FILE || !valid_library_name(&library.name) {
            return Err(corrupt(format!(
                "entry `{}` lists `{}` and `{}` instead of `{MANIFEST_FILE}` and a library",
                entry.key, manifest.name, library.name
            )));
        }
        if manifest.size > MAX_META_BYTES {
            return Err(corrupt(format!(
                "the manifest of `{}` is too large",
                entry.key
            )));
        }
    }
    Ok(())
}

/// The index's file for an archive path `entries/<key>/<name>`.
fn listed_file<'a>(index: &'a BundleIndex, path: &str) -> Option<&'a BundleFile> {
    let rest = path.strip_prefix("entries/")?;
    let (key, name) = rest.split_once('/')?;
    let entry = index.entries.iter().find(|e| e.key == key)?;
    entry.files.iter().find(|f| f.name == name)
}

/// Checks an entry's staged files against the index and its manifest against both.
fn verify_staged(staging: &Path, entry: &BundleEntry) -> Result<StagedEntry> {
    let dir = staging.join(&entry.key);
    for file in &entry.files {
        let expected = Expected {
            size: file.size,
            blake3: file.blake3.clone(),
        };
        verify_file(&dir.join(&file.name), &expected, None, Follow::No).map_err(|e| {
            corrupt(format!(
                "`entries/{}/{}` does not match its index ({e})",
                entry.key, file.name
            ))
        })?;
    }
    let manifest_path = dir.join(MANIFEST_FILE);
    let old = |format: u32| {
        corrupt(format!(
            "the manifest of `{}` ({}) is of format {format} and does not record the \
             library's instruction-set requirements (`isa`, manifest format {MANIFEST_FORMAT}): \
             the bundle was made by an older abicache or by hand, and a library whose \
             requirements are unknown is never imported; export it again with this abicache",
            entry.key, entry.name
        ))
    };
    let manifest = Manifest::read(&manifest_path).map_err(|e| {
        let bytes = std::fs::read(&manifest_path).unwrap_or_default();
        match Manifest::unknown_requirements(&bytes) {
            Some(format) => old(format),
            None => corrupt(format!(
                "the manifest of `{}` is not valid ({e})",
                entry.key
            )),
        }
    })?;
    if manifest.format < MANIFEST_FORMAT {
        return Err(old(manifest.format));
    }
    let library = &entry.files[1];
    if manifest.format != MANIFEST_FORMAT
        || manifest.key != entry.key
        || manifest.name != entry.name
        || manifest.library != library.name
        || manifest.size != library.size
        || manifest.library_blake3 != library.blake3
        || manifest.device_images != entry.device_images
    {
        return Err(corrupt(format!(
            "the manifest of `{}` disagrees with its index (key, name, library, size, BLAKE3 or device images)",
            entry.key
        )));
    }
    Ok(StagedEntry {
        key: entry.key.clone(),
        library: dir.join(&library.name),
        manifest,
    })
}
