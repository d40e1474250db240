//! The gate every entry from outside this machine's cache passes before it
//! is served or imported: read-only layers and cache wheels, the remote
//! cache, and bundles. The local cache's own entries do not pass it (they
//! were built and audited here).
//!
//! It owns the checks and their one wording ([`Refused`]):
//! - **payload → key** ([`payload_for_key`]): the manifest's payload
//!   parses and hashes to the key it is served under;
//! - **the signature** ([`check_signature`]): a signature present must be
//!   valid, and with trusted keys set (`ABICACHE_TRUSTED_KEYS`) one by a
//!   trusted key is required (a layer without a signed index serves
//!   nothing then); a bundle's and a layer's signature covers
//!   their index ([`index_signature_message`]), a remote entry's its key
//!   and manifest ([`abicache_remote::signature_message`]);
//! - **provenance** ([`check_provenance`]): with trusted keys set, a
//!   layer's entry that was pulled unsigned (or signed by another key) is
//!   refused, as the local cache refuses its own;
//! - **the audit against the payload's claims** ([`audit_against_payload`],
//!   [`audit_keyed`]): the library imports nothing its key says it must not;
//! - **the instruction-set requirements** ([`isa_refusal`]): the library
//!   requires no extension this CPU lacks (bundles, imported to be loaded
//!   here; served entries are checked again before each load, as every
//!   library is, by [`crate::Outcome::check_cpu`]). The device code a
//!   CUDA entry carries (its manifest's `device_images`) is not the gate's:
//!   a bundle or a cache wheel may carry entries for a whole fleet's GPUs,
//!   so every library, whatever its source, is compared with the visible
//!   GPUs before each load ([`crate::Outcome::check_gpu`]), and a bundle's
//!   index must agree with its manifests' images.
//!
//! What the sources check themselves before the gate: the store checks a
//! layer's ownership, modes, index listing and library BLAKE3
//! ([`abicache_store::ReadOnlyLayer`]) and a bundle's archive against its
//! index; the remote client checks a download against its manifest
//! ([`abicache_remote::verify_entry`]).

use std::path::Path;

use abicache_audit::{audit_file, AuditReport};
use abicache_isa::{IsaError, Requirement};
use abicache_key::{Keyed, Payload, PythonAbiReason};
use abicache_remote::{PublicKey, Signature};
use abicache_scan::ScanReport;
use abicache_store::Provenance;

mod refusal;

pub use refusal::{Refusal, Refused, Source};

/// The signer of a signature the gate accepted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signed {
    /// The signer's public key (hex); `None` when unsigned (accepted only
    /// without trusted keys).
    pub signer: Option<String>,
    /// True when the signer is one of the trusted keys.
    pub trusted: bool,
}

/// The bytes a bundle's or a layer's signature covers: a versioned line and
/// the BLAKE3 of the index's exact bytes.
pub fn index_signature_message(index: &[u8]) -> Vec<u8> {
    format!(
        "abicache-bundle-signature-v1\nindex_blake3={}\n",
        blake3::hash(index).to_hex()
    )
    .into_bytes()
}

/// Checks `signature` over `message`: a signature present must be readable
/// and valid; with `trusted` not empty it is required and its signer must be
/// one of them.
pub fn check_signature(
    message: &[u8],
    signature: Option<&Signature>,
    trusted: &[PublicKey],
) -> Result<Signed, Refusal> {
    let Some(signature) = signature else {
        return match trusted {
            [] => Ok(Signed::default()),
            _ => Err(Refusal::Unsigned),
        };
    };
    let signer = PublicKey::parse(&signature.public_key, "the signature").map_err(|e| {
        Refusal::SignatureUnreadable {
            reason: e.to_string(),
        }
    })?;
    if !signer.verifies(message, signature) {
        return Err(Refusal::Altered {
            signer: signer.to_string(),
        });
    }
    let trusted = match trusted {
        [] => false,
        keys if keys.contains(&signer) => true,
        _ => {
            return Err(Refusal::UntrustedSigner {
                signer: signer.to_string(),
            })
        }
    };
    Ok(Signed {
        signer: Some(signer.to_string()),
        trusted,
    })
}

/// [`check_signature`] of an index signed as a file (a bundle's, a layer's
/// `abicache-index.sig`: the signature as JSON).
pub fn check_index_signature(
    index: &[u8],
    signature: Option<&[u8]>,
    trusted: &[PublicKey],
) -> Result<Signed, Refusal> {
    let signature: Option<Signature> =
        signature
            .map(serde_json::from_slice)
            .transpose()
            .map_err(|e| Refusal::SignatureUnreadable {
                reason: e.to_string(),
            })?;
    check_signature(&index_signature_message(index), signature.as_ref(), trusted)
}

/// Provenance binds a layer as it binds the local cache: with `trusted`
/// keys set, an entry whose `provenance.json` (in `entry_dir`) says it was
/// pulled unsigned, or signed by another key, is refused, and so is one
/// whose provenance cannot be read. Entries built where they lie have none.
pub fn check_provenance(entry_dir: &Path, trusted: &[PublicKey]) -> Result<(), Refusal> {
    if trusted.is_empty() {
        return Ok(());
    }
    let trusted: Vec<String> = trusted.iter().map(ToString::to_string).collect();
    let reason = match Provenance::read(entry_dir) {
        Ok(None) => None,
        Ok(Some(provenance)) => provenance.refusal(&trusted),
        Err(reason) => Some(reason),
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(Refusal::PulledUntrusted { reason }),
    }
}

/// The payload `payload_text`, checked to hash to `key`.
pub fn payload_for_key(key: &str, payload_text: &str) -> Result<Payload, Refusal> {
    let payload = Payload::parse(payload_text).map_err(|e| Refusal::PayloadUnreadable {
        reason: e.to_string(),
    })?;
    let payload_key = payload.key();
    if payload_key != key {
        return Err(Refusal::PayloadKeyMismatch { payload_key });
    }
    Ok(payload)
}

/// Audits `library` against what `payload` claims for the extension `name`
/// (its sources are not at hand, so the refusal names no likely cause);
/// the report, for the manifest.
pub fn audit_against_payload(
    library: &Path,
    name: &str,
    payload: Payload,
) -> Result<AuditReport, Refusal> {
    let keyed = keyed_from_payload(name, payload);
    audit_with(library, &keyed, &no_scan())
}

/// Audits `library` against `keyed`, whose sources were scanned into `scan`
/// (a build that found the entry elsewhere); the report as the manifest's JSON.
pub fn audit_keyed(
    library: &Path,
    keyed: &Keyed,
    scan: &ScanReport,
) -> Result<serde_json::Value, Refusal> {
    let report = audit_with(library, keyed, scan)?;
    Ok(serde_json::to_value(&report).unwrap_or(serde_json::Value::Null))
}

fn audit_with(library: &Path, keyed: &Keyed, scan: &ScanReport) -> Result<AuditReport, Refusal> {
    let report = audit_file(library).map_err(|e| Refusal::Unauditable {
        reason: e.to_string(),
    })?;
    match crate::key_audit::refusal_under_key(&report, keyed, scan) {
        None => Ok(report),
        Some(message) => {
            // The audit words a refusal for a library built here; the gate
            // names the entry itself.
            let built_here = format!("refusing to publish `{}`: ", keyed.name);
            Err(Refusal::Audit {
                explanation: message
                    .strip_prefix(&built_here)
                    .map_or(message.clone(), str::to_owned),
            })
        }
    }
}

/// Why a library requiring `required` must not be used on this CPU
/// (`None`: it may, or `ABICACHE_ISA_CHECK=0`); an error for an invalid
/// `ABICACHE_ISA_CHECK`.
pub fn isa_refusal(required: &[Requirement]) -> Result<Option<Refusal>, IsaError> {
    match abicache_isa::check(required, "") {
        Ok(()) => Ok(None),
        Err(IsaError::Unsupported { reasons, .. }) => Ok(Some(Refusal::Isa { reasons })),
        Err(e) => Err(e),
    }
}

/// What a payload claims about the library's ABI, as the audit reads it.
pub fn keyed_from_payload(name: &str, payload: Payload) -> Keyed {
    let python_abi = payload.python_abi().unwrap_or_default().to_owned();
    let torch_abi = payload.torch_abi().unwrap_or("none").to_owned();
    // A payload without a torch line is a TVM-FFI module's that uses no torch.
    let uses_torch = payload.torch_abi().is_some();
    Keyed {
        name: name.to_owned(),
        key: payload.key(),
        python_abi_dependent: python_abi != "agnostic",
        python_abi,
        torch_abi,
        uses_torch,
        python_abi_reason: PythonAbiReason::NotDetected,
        payload: std::sync::Arc::new(payload),
        host_flags: Vec::new(),
        cuda_flags: Vec::new(),
        gencode: Vec::new(),
    }
}

/// No scan: an outside library's sources are not at hand (only the
/// audit refusal's "likely cause" line uses it).
fn no_scan() -> ScanReport {
    ScanReport {
        sources: Vec::new(),
        python_markers: Vec::new(),
        torch_includes: Vec::new(),
        stable_registrations: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abicache_remote::KeyPair;

    #[test]
    fn signatures_unsigned_altered_untrusted_and_trusted() {
        let ours = KeyPair::generate().unwrap();
        let theirs = KeyPair::generate().unwrap();
        let index = b"{\"format\": 1}";
        let sign = |pair: &KeyPair, bytes: &[u8]| {
            serde_json::to_vec(&pair.secret.sign(&index_signature_message(bytes))).unwrap()
        };
        assert_eq!(
            check_index_signature(index, None, &[]),
            Ok(Signed::default())
        );
        assert_eq!(
            check_index_signature(index, None, &[ours.public]),
            Err(Refusal::Unsigned)
        );
        let by_them = sign(&theirs, index);
        assert_eq!(
            check_index_signature(index, Some(&by_them), &[ours.public]),
            Err(Refusal::UntrustedSigner {
                signer: theirs.public.to_string()
            })
        );
        // Without trusted keys a valid signature is accepted, untrusted.
        assert_eq!(
            check_index_signature(index, Some(&by_them), &[]),
            Ok(Signed {
                signer: Some(theirs.public.to_string()),
                trusted: false
            })
        );
        // An altered index is refused whoever signed it, trusted keys or not.
        let moved = sign(&ours, b"{\"format\": 2}");
        for trusted in [&[][..], &[ours.public][..]] {
            assert_eq!(
                check_index_signature(index, Some(&moved), trusted),
                Err(Refusal::Altered {
                    signer: ours.public.to_string()
                })
            );
        }
        assert!(matches!(
            check_index_signature(index, Some(b"not json"), &[]),
            Err(Refusal::SignatureUnreadable { .. })
        ));
        assert_eq!(
            check_index_signature(
                index,
                Some(&sign(&ours, index)),
                &[theirs.public, ours.public]
            ),
            Ok(Signed {
                signer: Some(ours.public.to_string()),
                trusted: true
            })
        );
    }

    #[test]
    fn a_payload_must_parse_and_hash_to_its_key() {
        let text = "format=1\nname=ext\n";
        let key = Payload::parse(text).unwrap().key();
        assert_eq!(payload_for_key(&key, text).unwrap().key(), key);
        let moved = format!("{text}torch=2.9.0\n");
        assert!(matches!(
            payload_for_key(&key, &moved),
            Err(Refusal::PayloadKeyMismatch { payload_key }) if payload_key != key
        ));
    }
}
