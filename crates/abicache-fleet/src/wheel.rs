//! `abicache export --wheel DIST==VERSION`: cache entries shipped as a
//! pip-installable wheel, found by the Python package with no configuration
//! and used as a read-only cache layer.
//!
//! The wheel holds one package, `_abicache_cache_<dist>/`, whose `cache/`
//! directory is a cache root in the store's layout (`v1/entries/<key>/`
//! with each entry's manifest and library), plus the bundle index of those
//! files (`abicache-index.json`: each file's size and BLAKE3) and, when
//! `ABICACHE_SIGNING_KEY` is set, its signature (`abicache-index.sig`, as a
//! bundle's). Its `entry_points.txt` names the package in the
//! `abicache.caches` group. The platform tag is `py3-none-manylinux_X_Y_<arch>`,
//! where `X.Y` is the newest glibc symbol version the libraries need
//! (at least 2.17) and `<arch>` this machine's.
//!
//! The zip is written by hand (stored, not deflated: libraries are loaded in
//! place from the installed files, and stored members keep this crate free of
//! a zip dependency); `RECORD` lists every file's SHA-256 as wheels require.

use std::io::Write;
use std::path::{Path, PathBuf};

use abicache_remote::SecretKey;
use abicache_store::{
    BundleEntry, BundleIndex, EntryInfo, Store, BUNDLE_FORMAT, LAYER_INDEX_FILE,
    LAYER_SIGNATURE_FILE, MANIFEST_FILE,
};
use serde::Serialize;
use sha2::Digest as _;

use crate::error::{Error, Result};

/// The entry-point group a cache wheel registers its package under.
pub const ENTRY_POINT_GROUP: &str = "abicache.caches";

/// What [`export_wheel`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportedWheel {
    /// The wheel file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its compatibility tag, e.g. `py3-none-manylinux_2_28_x86_64`.
    pub tag: String,
    /// The import package holding the cache.
    pub package: String,
    /// The entries, in wheel order: (name, key).
    pub entries: Vec<(String, String)>,
    /// The signer's public key (hex), when the index was signed.
    pub signed_by: Option<String>,
}

/// A distribution `NAME==VERSION` as given on the command line, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dist {
    /// The name, normalized for file names (runs of `-_.` become `_`).
    pub name: String,
    /// The version.
    pub version: String,
}

impl std::str::FromStr for Dist {
    type Err = Error;
    fn from_str(text: &str) -> Result<Dist> {
        let bad = |problem: &'static str| Error::InvalidDistribution {
            text: text.to_owned(),
            problem,
        };
        let (name, version) = text.split_once("==").ok_or_else(|| bad("no `==`"))?;
        let name = name.trim();
        let version = version.trim();
        let ok_name = !name.is_empty()
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok_name {
            return Err(bad("the name must be letters, digits, `-`, `_` or `.`"));
        }
        let ok_version = !version.is_empty()
            && version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".+!".contains(c));
        if !ok_version {
            return Err(bad("the version must be a PEP 440 version such as `1.0`"));
        }
        let mut normalized = String::new();
        for c in name.chars() {
            if "-_.".contains(c) {
                if !normalized.ends_with('_') {
                    normalized.push('_');
                }
            } else {
                normalized.push(c.to_ascii_lowercase());
            }
        }
        Ok(Dist {
            name: normalized,
            version: version.replace('-', "_"),
        })
    }
}

/// Writes a cache wheel of `entries` (each re-verified) into `out_dir`,
/// its index signed with `signing` when given; with `signing`, every entry
/// must pass [`crate::bundle::check_signable`] (nothing is written otherwise).
pub fn export_wheel(
    store: &Store,
    entries: &[EntryInfo],
    signing: Option<&SecretKey>,
    dist: &Dist,
    out_dir: &Path,
) -> Result<ExportedWheel> {
    let hits = crate::bundle::verified_hits(store, entries, signing)?;
    // A bundle's index (and signature) without its archive: the files lie
    // unpacked in the wheel. Each library is hashed again here, so a file
    // that changed since its lookup is never shipped under the old hash.
    let mut index = BundleIndex {
        format: BUNDLE_FORMAT,
        entries: Vec::with_capacity(hits.len()),
    };
    let mut libraries = Vec::with_capacity(hits.len());
    for hit in &hits {
        let bytes = std::fs::read(&hit.library)?;
        if bytes.len() as u64 != hit.manifest.size
            || abicache_fs::blake3_hex(&bytes) != hit.manifest.library_blake3
        {
            return Err(Error::LibraryChanged {
                path: hit.library.clone(),
            });
        }
        let manifest = hit.manifest.to_json();
        index
            .entries
            .push(BundleEntry::of(&hit.manifest, &manifest));
        libraries.push((manifest, bytes));
    }
    let index_bytes = serde_json::to_vec_pretty(&index).expect("an index always serializes");
    let signature = signing.map(|secret| {
        let s = secret.sign(&abicache::gate::index_signature_message(&index_bytes));
        serde_json::to_vec(&s).expect("a signature always serializes")
    });

    let package = format!("_abicache_cache_{}", dist.name);
    let cache = format!("{package}/cache");
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    files.push((
        format!("{package}/__init__.py"),
        format!(
            "\"\"\"Prebuilt abicache entries of `{}` {}: a read-only cache layer, found by abicache \
             through the `{ENTRY_POINT_GROUP}` entry point.\"\"\"\n",
            dist.name, dist.version
        )
        .into_bytes(),
    ));
    files.push((format!("{cache}/{LAYER_INDEX_FILE}"), index_bytes));
    if let Some(sig) = signature {
        files.push((format!("{cache}/{LAYER_SIGNATURE_FILE}"), sig));
    }
    let mut glibc = (2u32, 17u32);
    for ((hit, entry), (manifest, bytes)) in hits.iter().zip(&index.entries).zip(libraries) {
        let dir = format!("{cache}/v1/entries/{}", entry.key);
        files.push((format!("{dir}/{MANIFEST_FILE}"), manifest));
        glibc = glibc.max(needed_glibc(&bytes));
        files.push((format!("{dir}/{}", hit.manifest.library), bytes));
    }
    let tag = format!(
        "py3-none-manylinux_{}_{}_{}",
        glibc.0,
        glibc.1,
        std::env::consts::ARCH
    );
    let dist_info = format!("{}-{}.dist-info", dist.name, dist.version);
    files.push((
        format!("{dist_info}/METADATA"),
        format!(
            "Metadata-Version: 2.1\nName: {}\nVersion: {}\nSummary: Prebuilt abicache entries \
             (a read-only cache layer for abicache)\n",
            dist.name, dist.version
        )
        .into_bytes(),
    ));
    files.push((
        format!("{dist_info}/WHEEL"),
        format!(
            "Wheel-Version: 1.0\nGenerator: abicache {}\nRoot-Is-Purelib: false\nTag: {tag}\n",
            env!("CARGO_PKG_VERSION")
        )
        .into_bytes(),
    ));
    files.push((
        format!("{dist_info}/entry_points.txt"),
        format!("[{ENTRY_POINT_GROUP}]\n{} = {package}\n", dist.name).into_bytes(),
    ));
    let mut record = String::new();
    for (name, bytes) in &files {
        let digest = sha2::Sha256::digest(bytes);
        record.push_str(&format!(
            "{name},sha256={},{}\n",
            urlsafe_b64(&digest),
            bytes.len()
        ));
    }
    let record_name = format!("{dist_info}/RECORD");
    record.push_str(&format!("{record_name},,\n"));
    files.push((record_name, record.into_bytes()));

    let file_name = format!("{}-{}-{tag}.whl", dist.name, dist.version);
    fs_err::create_dir_all(out_dir)?;
    let path = out_dir.join(&file_name);
    // Named after this process: the next export removes it if a kill
    // leaves it behind (`crate::partial`).
    let mut temp = crate::partial::create(out_dir, "wheel")?;
    {
        let mut out = std::io::BufWriter::new(temp.as_file_mut());
        write_zip(&mut out, &files)?;
        out.flush()?;
    }
    crate::partial::test_only_stop_point();
    temp.as_file().sync_all()?;
    temp.persist(&path).map_err(|e| Error::FileIo {
        action: "write the wheel",
        path: path.clone(),
        source: e.error,
    })?;
    // `tempfile` creates 0600; a wheel is for others to install.
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    Ok(ExportedWheel {
        size: fs_err::metadata(&path)?.len(),
        path,
        tag,
        package,
        entries: hits
            .iter()
            .map(|h| (h.manifest.name.clone(), h.manifest.key.clone()))
            .collect(),
        signed_by: signing.map(|s| s.public().to_string()),
    })
}

/// The newest `GLIBC_X.Y` symbol version named in an ELF file's bytes
/// (version strings live in `.dynstr`), `(0, 0)` when none.
fn needed_glibc(bytes: &[u8]) -> (u32, u32) {
    let mut best = (0, 0);
    let needle = b"GLIBC_";
    let mut at = 0;
    while let Some(pos) = find(&bytes[at..], needle) {
        let start = at + pos + needle.len();
        let digits: Vec<u8> = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .copied()
            .collect();
        let text = String::from_utf8_lossy(&digits);
        let mut parts = text.split('.').map(|p| p.parse::<u32>());
        if let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next()) {
            best = best.max((major, minor));
        }
        at = start;
    }
    best
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Base64 (URL-safe alphabet, no padding), as wheels' `RECORD` writes hashes.
fn urlsafe_b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// CRC-32 (IEEE), as zip members carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A zip archive of `files`, each stored (not compressed), with a fixed
/// timestamp (1980-01-01) so the same entries give the same wheel, and mode
/// 0644. Members and the archive must stay under 4 GiB (no zip64).
fn write_zip(out: &mut impl Write, files: &[(String, Vec<u8>)]) -> Result<()> {
    let too_big = || Error::WheelTooLarge;
    let mut central = Vec::new();
    let mut offset: u64 = 0;
    // 1980-01-01 00:00: year 0 since 1980 (bits 9..), month 1 (bits 5..), day 1.
    let (time, date) = (0u16, (1u16 << 5) | 1);
    for (name, bytes) in files {
        let size = u32::try_from(bytes.len()).map_err(|_| too_big())?;
        let crc = crc32(bytes);
        let name_len = name.len() as u16;
        let mut local = Vec::with_capacity(30 + name.len());
        local.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        local.extend_from_slice(&20u16.to_le_bytes()); // version needed
        local.extend_from_slice(&0x0800u16.to_le_bytes()); // UTF-8 names
        local.extend_from_slice(&0u16.to_le_bytes()); // stored
        local.extend_from_slice(&time.to_le_bytes());
        local.extend_from_slice(&date.to_le_bytes());
        local.extend_from_slice(&crc.to_le_bytes());
        local.extend_from_slice(&size.to_le_bytes());
        local.extend_from_slice(&size.to_le_bytes());
        local.extend_from_slice(&name_len.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        out.write_all(&local)?;
        out.write_all(bytes)?;
        let at = u32::try_from(offset).map_err(|_| too_big())?;
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&(0x0300u16 | 20).to_le_bytes()); // made by: Unix
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&0x0800u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&time.to_le_bytes());
        central.extend_from_slice(&date.to_le_bytes());
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&name_len.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes()); // extra
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&((0o100644u32) << 16).to_le_bytes());
        central.extend_from_slice(&at.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        offset += local.len() as u64 + bytes.len() as u64;
    }
    let count = u16::try_from(files.len()).map_err(|_| too_big())?;
    let central_at = u32::try_from(offset).map_err(|_| too_big())?;
    out.write_all(&central)?;
    let mut end = Vec::with_capacity(22);
    end.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    end.extend_from_slice(&0u16.to_le_bytes());
    end.extend_from_slice(&0u16.to_le_bytes());
    end.extend_from_slice(&count.to_le_bytes());
    end.extend_from_slice(&count.to_le_bytes());
    end.extend_from_slice(&(central.len() as u32).to_le_bytes());
    end.extend_from_slice(&central_at.to_le_bytes());
    end.extend_from_slice(&0u16.to_le_bytes());
    out.write_all(&end)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_names_are_checked_and_normalized() {
        let dist: Dist = "My.Kernels--cache==1.2.0".parse().unwrap();
        assert_eq!(dist.name, "my_kernels_cache");
        assert_eq!(dist.version, "1.2.0");
        assert!("nokernels".parse::<Dist>().is_err());
        assert!("../x==1".parse::<Dist>().is_err());
        assert!("x==1/2".parse::<Dist>().is_err());
    }

    #[test]
    fn record_hashes_and_zip_checksums_are_the_standard_ones() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(urlsafe_b64(b""), "");
        assert_eq!(urlsafe_b64(b"f"), "Zg");
        assert_eq!(urlsafe_b64(b"foob"), "Zm9vYg");
        assert_eq!(urlsafe_b64(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn the_newest_glibc_version_named_is_found() {
        let bytes = b"\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.14\0GLIBCXX_3.4\0";
        assert_eq!(needed_glibc(bytes), (2, 34));
        assert_eq!(needed_glibc(b"nothing"), (0, 0));
    }
}
