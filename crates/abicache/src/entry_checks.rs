//! The checks an entry from outside the local store passes before it is
//! used, shared by the read-only layers ([`crate::layers`]) and bundle
//! import (`abicache-fleet`): the ed25519 signature over an index, and what
//! an entry's payload claims, for the audit of its library.

use abicache_key::{Keyed, Payload, PythonAbiReason};
use abicache_remote::{PublicKey, Signature};
use abicache_scan::ScanReport;

/// Why an import refused a bundle (and why a layer's index is refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleRefusal {
    /// Trusted keys are configured and the bundle is not signed.
    #[error("it is not signed; sign it with `ABICACHE_SIGNING_KEY` when exporting")]
    Unsigned,
    /// The bundle is signed by a key that is not trusted.
    #[error("it is signed by `{signer}`, which is not one of `ABICACHE_TRUSTED_KEYS`")]
    UntrustedSigner {
        /// The signer's public key (hex).
        signer: String,
    },
    /// The signature (or its public key) cannot be read.
    #[error("its signature cannot be read ({reason})")]
    SignatureUnreadable {
        /// What is wrong with it.
        reason: String,
    },
    /// The signature does not match the index.
    #[error("its signature by `{signer}` does not match its index: the bundle was altered")]
    Altered {
        /// The signer's public key (hex).
        signer: String,
    },
    /// An entry's payload cannot be parsed.
    #[error("the payload of entry `{key}` cannot be read ({reason})")]
    PayloadUnreadable {
        /// The entry's key.
        key: String,
        /// Why it cannot be parsed.
        reason: String,
    },
    /// An entry's payload hashes to another key.
    #[error("the payload of entry `{key}` hashes to `{payload_key}`, not to its key")]
    PayloadKeyMismatch {
        /// The entry's key.
        key: String,
        /// What its payload hashes to.
        payload_key: String,
    },
    /// A library imports what its key says it must not.
    #[error("{message}")]
    Audit {
        /// The audit's full explanation (symbols, cause, fixes).
        message: String,
    },
}

impl BundleRefusal {
    /// What to do about a signer that is not trusted (a sentence starting
    /// with `. `); empty otherwise.
    pub fn advice(&self) -> &'static str {
        match self {
            BundleRefusal::Unsigned | BundleRefusal::UntrustedSigner { .. } => {
                ". Add the signer's public key to `ABICACHE_TRUSTED_KEYS` if you trust it"
            }
            _ => "",
        }
    }

    /// The whole refusal of using `what` (`import the bundle`, `use the
    /// layer`): `refusing to WHAT: REASON; nothing was imported[ ADVICE]`.
    pub fn refusing_to(&self, what: &str) -> String {
        format!(
            "refusing to {what}: {self}; nothing was imported{}",
            self.advice()
        )
    }
}

/// The bytes a bundle signature covers: a versioned line and the index's BLAKE3.
pub fn signature_message(index: &[u8]) -> Vec<u8> {
    format!(
        "abicache-bundle-signature-v1\nindex_blake3={}\n",
        blake3::hash(index).to_hex()
    )
    .into_bytes()
}

/// The signer of a valid signature and whether it is trusted; a refusal
/// when trusted keys are configured and the index is unsigned, signed by
/// another key, or signed wrongly, and whenever a signature present is invalid.
pub fn check_signature(
    index_bytes: &[u8],
    signature: Option<&[u8]>,
    trusted: &[PublicKey],
) -> Result<(Option<String>, bool), BundleRefusal> {
    let Some(bytes) = signature else {
        if trusted.is_empty() {
            return Ok((None, false));
        }
        return Err(BundleRefusal::Unsigned);
    };
    let signature: Signature =
        serde_json::from_slice(bytes).map_err(|e| BundleRefusal::SignatureUnreadable {
            reason: e.to_string(),
        })?;
    let signer =
        PublicKey::parse(&signature.public_key, "the bundle's signature").map_err(|e| {
            BundleRefusal::SignatureUnreadable {
                reason: e.to_string(),
            }
        })?;
    let message = signature_message(index_bytes);
    if !signer.verifies(&message, &signature) {
        return Err(BundleRefusal::Altered {
            signer: signer.to_string(),
        });
    }
    if trusted.is_empty() {
        return Ok((Some(signer.to_string()), false));
    }
    if !trusted.contains(&signer) {
        return Err(BundleRefusal::UntrustedSigner {
            signer: signer.to_string(),
        });
    }
    Ok((Some(signer.to_string()), true))
}

/// What a payload claims about the library's ABI, as the audit reads it.
pub fn payload_claims(name: &str, payload: Payload) -> Keyed {
    let python_abi = payload.python_abi().unwrap_or_default().to_owned();
    let torch_abi = payload.torch_abi().unwrap_or_default().to_owned();
    Keyed {
        name: name.to_owned(),
        key: payload.key(),
        python_abi_dependent: python_abi != "agnostic",
        python_abi,
        torch_abi,
        python_abi_reason: PythonAbiReason::NotDetected,
        payload: std::sync::Arc::new(payload),
        host_flags: Vec::new(),
        cuda_flags: Vec::new(),
        gencode: Vec::new(),
    }
}

/// No scan: an outside library's sources are not at hand (only the
/// refusal's "likely cause" line uses it).
pub fn no_scan() -> ScanReport {
    ScanReport {
        sources: Vec::new(),
        python_markers: Vec::new(),
        torch_includes: Vec::new(),
        stable_registrations: Vec::new(),
    }
}
