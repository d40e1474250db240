//! Where an entry that was not built here came from: `provenance.json` in
//! the entry directory, written by whoever pulled it (a remote cache, a
//! bundle) into the build directory before publishing.
//!
//! ```text
//! {"source": "remote", "origin": "s3://bucket/prefix", "signed_by": "ed25519:…"}
//! {"source": "bundle", "origin": "fleet.abicache", "signed_by": null}
//! ```
//!
//! `signed_by` is the key whose valid signature covered it, or `null` when
//! nothing (checked) signed it. A store given trusted signers
//! ([`crate::Store::with_trusted_signers`]) never serves an entry whose
//! provenance names no signer or another one: configuring keys later
//! re-checks every entry already pulled. Entries built here have no such
//! file and are always served.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};

/// The file, in an entry directory, that records where a pulled entry came from.
pub const PROVENANCE_FILE: &str = "provenance.json";

/// Where a pulled entry came from and who signed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// `remote` or `bundle`.
    pub source: String,
    /// The remote's URL, or the bundle's file name.
    pub origin: String,
    /// The public key whose valid signature covered it; `None` when unsigned
    /// (or when no signature was checked).
    pub signed_by: Option<String>,
}

impl Provenance {
    /// Writes `provenance.json` into `dir` (a build directory, before publishing).
    pub fn write_into(&self, dir: &Path) -> Result<()> {
        let path = dir.join(PROVENANCE_FILE);
        let text = serde_json::to_vec_pretty(self).expect("a provenance always serializes");
        fs_err::write(&path, text).map_err(StoreError::from)
    }

    /// The provenance of the entry in `dir`: `Ok(None)` when it has none (built
    /// here), `Err` (a reason) when the file is there but unreadable.
    pub fn read(dir: &Path) -> std::result::Result<Option<Provenance>, String> {
        let path = dir.join(PROVENANCE_FILE);
        if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Ok(None);
        }
        let (file, _) = abicache_fs::open_regular(&path, abicache_fs::Follow::No)
            .map_err(|e| format!("`{}` cannot be read: {e}", path.display()))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, 1 << 20), &mut bytes)
            .map_err(|e| format!("`{}` cannot be read: {e}", path.display()))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("`{}` is not valid: {e}", path.display()))
    }

    /// Why this entry must not be served under `trusted` (public keys), if
    /// it must not; nothing when `trusted` is empty.
    pub fn refusal(&self, trusted: &[String]) -> Option<String> {
        if trusted.is_empty() {
            return None;
        }
        match &self.signed_by {
            Some(signer) if trusted.contains(signer) => None,
            Some(signer) => Some(format!(
                "it was pulled from {} `{}` signed by `{signer}`, which is not one of \
                 `ABICACHE_TRUSTED_KEYS`",
                self.source, self.origin
            )),
            None => Some(format!(
                "it was pulled from {} `{}` unsigned, and `ABICACHE_TRUSTED_KEYS` is set",
                self.source, self.origin
            )),
        }
    }
}
