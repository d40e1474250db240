//! `export` and `import`: cache entries carried as one signed file to
//! machines without a compiler or a network.
//!
//! The on-disk format is the store's ([`abicache_store::write_bundle`]).
//! This module adds the ed25519 signature over the index
//! (`ABICACHE_SIGNING_KEY`); an import passes the bundle and each entry
//! through the gate ([`abicache::gate`]: the index's signature, checked against
//! `ABICACHE_TRUSTED_KEYS`, each manifest's payload against its key, each
//! library's audit against what its key claims, and its instruction sets
//! against this CPU's). An import publishes nothing unless every one of
//! those checks passed for every entry.

use std::io::{Read, Write};
use std::path::Path;

use abicache_remote::{Keys, SecretKey};
use abicache_store::{
    write_bundle, BundleLimits, EntryInfo, Hit, Imported, Provenance, Store, UnpackedBundle,
};
use serde::Serialize;

use crate::error::{Error, Result};
use abicache::gate::{self, Refused, Source};

/// What [`export`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    /// The entries, in bundle order: (name, key).
    pub entries: Vec<ExportedEntry>,
    /// The signer's public key (hex), when `ABICACHE_SIGNING_KEY` was set.
    pub signed_by: Option<String>,
}

/// One exported entry.
#[derive(Debug, Clone, Serialize)]
pub struct ExportedEntry {
    /// The extension's name.
    pub name: String,
    /// The cache key.
    pub key: String,
    /// The library's size in bytes.
    pub size: u64,
}

/// What [`import`] did.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    /// The entries, in bundle order.
    pub entries: Vec<ImportedEntry>,
    /// The public key (hex) whose valid signature the bundle carries, if any.
    pub signed_by: Option<String>,
    /// True when that signer is one of `ABICACHE_TRUSTED_KEYS`.
    pub trusted: bool,
}

/// One imported entry.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedEntry {
    /// The extension's name.
    pub name: String,
    /// The cache key.
    pub key: String,
    /// Published, or already in the cache.
    pub result: Imported,
}

/// The local entries `targets` name (names, keys, or key prefixes of at
/// least 8 characters); every entry when `targets` is empty. A target that
/// matches nothing is an error.
pub fn select_entries(store: &Store, targets: &[String]) -> Result<Vec<EntryInfo>> {
    let entries = store.list()?;
    if targets.is_empty() {
        return Ok(entries);
    }
    let mut chosen: Vec<EntryInfo> = Vec::new();
    for target in targets {
        let matched: Vec<&EntryInfo> = entries.iter().filter(|e| e.matches(target)).collect();
        if matched.is_empty() {
            return Err(Error::NoSuchEntry {
                target: target.clone(),
            });
        }
        for entry in matched {
            if !chosen.iter().any(|c| c.key == entry.key) {
                chosen.push(entry.clone());
            }
        }
    }
    Ok(chosen)
}

/// The hit of each of `entries`, looked up (so verified) again;
/// [`Error::EntryVanished`] for one that is corrupt or was removed since it
/// was listed. With `signing` given, each entry must be one this export may
/// sign ([`check_signable`]); that is checked before each lookup, and the
/// lookup itself ignores the store's trusted signers, so an entry pulled
/// unsigned is refused (signed) or exported (unsigned), never removed.
pub(crate) fn verified_hits(
    store: &Store,
    entries: &[EntryInfo],
    signing: Option<&SecretKey>,
) -> Result<Vec<Hit>> {
    if let Some(secret) = signing {
        for entry in entries {
            check_signable(store, entry, secret)?;
        }
    }
    // Provenance is this export's own rule (above): a store given trusted
    // signers would discard such an entry as corrupt.
    let store = store.clone().with_trusted_signers(Vec::new());
    entries
        .iter()
        .map(|entry| {
            store
                .lookup(&entry.key)?
                .hit
                .ok_or_else(|| Error::EntryVanished {
                    name: entry.name.clone(),
                    key: entry.key.clone(),
                })
        })
        .collect()
}

/// Why `entry` must not be signed by `secret`: its `provenance.json` says
/// it was pulled (from a remote or a bundle) unsigned, or signed by a key
/// that is neither `secret`'s nor one of the store's trusted signers
/// (`ABICACHE_TRUSTED_KEYS`), or cannot be read. Entries built here (no
/// provenance) are always signable. This holds whatever the exporter's
/// trusted keys: a signature vouches for the entry to everyone who trusts
/// the signing key.
pub fn check_signable(store: &Store, entry: &EntryInfo, secret: &SecretKey) -> Result<()> {
    let dir = store.layout().entry_dir(&entry.key);
    let own = secret.public().to_string();
    let provenance = match Provenance::read(&dir) {
        Ok(None) => return Ok(()),
        Ok(Some(provenance)) => provenance,
        Err(reason) => {
            return Err(Error::UnsignableEntry {
                name: entry.name.clone(),
                key: entry.key.clone(),
                provenance: format!("its provenance cannot be checked: {reason}"),
            })
        }
    };
    let account = match &provenance.signed_by {
        Some(signer) if *signer == own || store.trusted_signers().contains(signer) => return Ok(()),
        Some(signer) => format!(
            "it was pulled from {} `{}` signed by `{signer}`, which is neither the signing \
             key nor one of `ABICACHE_TRUSTED_KEYS`",
            provenance.source, provenance.origin
        ),
        None => format!(
            "it was pulled from {} `{}` unsigned",
            provenance.source, provenance.origin
        ),
    };
    Err(Error::UnsignableEntry {
        name: entry.name.clone(),
        key: entry.key.clone(),
        provenance: account,
    })
}

/// Writes a bundle of `entries` (each re-verified) to `out`, signed with
/// `signing` when given; with `signing`, every entry must pass
/// [`check_signable`] (nothing is written otherwise).
pub fn export(
    store: &Store,
    entries: &[EntryInfo],
    signing: Option<&SecretKey>,
    out: impl Write,
) -> Result<Exported> {
    let hits = verified_hits(store, entries, signing)?;
    let sign = |index: &[u8]| {
        signing.map(|secret| {
            let signature = secret.sign(&signature_message(index));
            serde_json::to_vec(&signature).expect("a signature always serializes")
        })
    };
    write_bundle(out, &hits, &sign)?;
    Ok(Exported {
        entries: hits
            .iter()
            .map(|h| ExportedEntry {
                name: h.manifest.name.clone(),
                key: h.manifest.key.clone(),
                size: h.manifest.size,
            })
            .collect(),
        signed_by: signing.map(|s| s.public().to_string()),
    })
}

/// [`export`] into the file `path`, written beside it and renamed into
/// place, so a failed export never leaves a partial bundle (one a kill
/// leaves is removed by a later export into that directory:
/// [`crate::partial`]).
pub fn export_to_file(
    store: &Store,
    entries: &[EntryInfo],
    signing: Option<&SecretKey>,
    path: &Path,
) -> Result<Exported> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp = crate::partial::create(dir, "bundle").map_err(|source| Error::FileIo {
        action: "create a file for the bundle in",
        path: dir.to_path_buf(),
        source,
    })?;
    let exported = export(
        store,
        entries,
        signing,
        std::io::BufWriter::new(temp.as_file_mut()),
    )?;
    let write_error = |source| Error::FileIo {
        action: "write the bundle",
        path: path.to_path_buf(),
        source,
    };
    crate::partial::test_only_stop_point();
    temp.as_file().sync_all().map_err(write_error)?;
    temp.persist(path).map_err(|e| write_error(e.error))?;
    Ok(exported)
}

/// Verifies the bundle `input` in full and, only when everything passed,
/// publishes its entries into `store`: the archive and every file against
/// the index (BLAKE3), the index's signature (required, and by one of
/// `keys.trusted`, when that is not empty; checked when present otherwise),
/// each manifest's payload against its key, and each library's imports
/// against what its key claims (the audit), and the instruction-set
/// extensions each library requires against this CPU's (unless
/// `ABICACHE_ISA_CHECK=0`: a bundle is imported to be loaded on this
/// machine). A failed check is an [`Error::Refused`] in the gate's wording.
pub fn import(store: &Store, keys: &Keys, input: impl Read) -> Result<ImportReport> {
    import_from(store, keys, input, "-")
}

/// [`import`] of a bundle read from `origin` (a file name, or `-` for
/// stdin), which each imported entry records as where it came from.
pub fn import_from(
    store: &Store,
    keys: &Keys,
    input: impl Read,
    origin: &str,
) -> Result<ImportReport> {
    // The signature is checked as soon as the index is read, before any
    // library is extracted.
    let source = Source::Bundle(origin.to_owned());
    let refused = |refusal| Error::Refused(Refused::index(source.clone(), refusal));
    let limits = BundleLimits::for_dir(&store.layout().tmp_dir());
    let refusal = std::cell::RefCell::new(None);
    let unpacked = UnpackedBundle::unpack_with(store, input, limits, &|meta| {
        gate::check_index_signature(meta.index_bytes, meta.signature, &keys.trusted)
            .map(drop)
            .map_err(|e| {
                let text = e.to_string();
                *refusal.borrow_mut() = Some(e);
                abicache_store::StoreError::Io(std::io::Error::other(text))
            })
    });
    let mut bundle = match (unpacked, refusal.into_inner()) {
        (Ok(bundle), _) => bundle,
        (Err(_), Some(refusal)) => return Err(refused(refusal)),
        (Err(e), None) => return Err(e.into()),
    };
    let signed = gate::check_index_signature(
        &bundle.index_bytes,
        bundle.signature.as_deref(),
        &keys.trusted,
    )
    .map_err(refused)?;
    for entry in bundle.entries_mut() {
        let refused = |refusal| Error::Refused(Refused::entry(source.clone(), &entry.key, refusal));
        let payload =
            gate::payload_for_key(&entry.key, &entry.manifest.payload).map_err(refused)?;
        let report = gate::audit_against_payload(&entry.library, &entry.manifest.name, payload)
            .map_err(refused)?;
        entry.manifest.audit = Some(serde_json::to_value(&report).unwrap_or_default());
        if let Some(refusal) = gate::isa_refusal(&entry.manifest.isa)? {
            return Err(refused(refusal));
        }
    }
    let names: Vec<(String, String)> = bundle
        .entries()
        .iter()
        .map(|e| (e.key.clone(), e.manifest.name.clone()))
        .collect();
    let provenance = Provenance {
        source: "bundle".to_owned(),
        origin: origin.to_owned(),
        signed_by: signed.signer.clone(),
    };
    let published = bundle.publish_with(store, Some(&provenance))?;
    Ok(ImportReport {
        entries: published
            .into_iter()
            .zip(names)
            .map(|((key, result), (_, name))| ImportedEntry { name, key, result })
            .collect(),
        signed_by: signed.signer,
        trusted: signed.trusted,
    })
}

/// The bytes a bundle signature covers (the gate's
/// [`gate::index_signature_message`]).
pub fn signature_message(index: &[u8]) -> Vec<u8> {
    gate::index_signature_message(index)
}
