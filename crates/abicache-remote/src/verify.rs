//! Verification of a downloaded entry against the key that was asked for.

use abicache_key::Payload;
use abicache_store::Manifest;

use crate::object::Header;
use crate::sign::{signature_message, PublicKey};

/// A downloaded entry that passed every check.
#[derive(Debug, Clone)]
pub struct Verified {
    /// Its manifest.
    pub manifest: Manifest,
    /// The trusted key that signed it (hex), when trusted keys are configured.
    pub signed_by: Option<String>,
}

/// Why an entry was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// It does not match the key or its own manifest.
    Corrupt(String),
    /// It lacks a valid signature by a trusted key.
    Untrusted(String),
}

/// Checks a downloaded entry: the manifest is for `key` and its payload
/// hashes to `key`; the library is a plain file name and has the size and
/// BLAKE3 the manifest records; and when `trusted` is not empty, the header
/// carries a signature by one of those keys over (key, library BLAKE3,
/// payload BLAKE3).
pub fn verify_entry(
    key: &str,
    header: Header,
    library: &[u8],
    trusted: &[PublicKey],
) -> Result<Verified, Rejection> {
    let manifest = header.manifest;
    if manifest.key != key {
        return Err(Rejection::Corrupt(format!(
            "its manifest is for key `{}`",
            manifest.key
        )));
    }
    let payload_key = Payload::parse(&manifest.payload)
        .map_err(|e| Rejection::Corrupt(format!("its payload cannot be read: {e}")))?
        .key();
    if payload_key != key {
        return Err(Rejection::Corrupt(format!(
            "its payload hashes to `{payload_key}`, not to the key"
        )));
    }
    let name = &manifest.library;
    if name.is_empty()
        || name.contains('/')
        || name.starts_with('.')
        || name == abicache_store::MANIFEST_FILE
    {
        return Err(Rejection::Corrupt(format!(
            "its library name `{name}` is not a plain file name"
        )));
    }
    if library.len() as u64 != manifest.size {
        return Err(Rejection::Corrupt(format!(
            "the library has {} bytes but the manifest says {}",
            library.len(),
            manifest.size
        )));
    }
    let library_blake3 = blake3::hash(library).to_hex().to_string();
    if library_blake3 != manifest.library_blake3 {
        return Err(Rejection::Corrupt(format!(
            "the library's BLAKE3 is {library_blake3} but the manifest says {}",
            manifest.library_blake3
        )));
    }
    if trusted.is_empty() {
        return Ok(Verified {
            manifest,
            signed_by: None,
        });
    }
    let Some(signature) = header.signature else {
        return Err(Rejection::Untrusted("it is not signed".to_owned()));
    };
    let Some(signer) = trusted
        .iter()
        .find(|k| k.to_string() == signature.public_key.to_ascii_lowercase())
    else {
        return Err(Rejection::Untrusted(format!(
            "it is signed by `{}`, which is not a trusted key",
            signature.public_key
        )));
    };
    let payload_blake3 = blake3::hash(manifest.payload.as_bytes())
        .to_hex()
        .to_string();
    if !signer.verifies(
        &signature_message(key, &library_blake3, &payload_blake3),
        &signature,
    ) {
        return Err(Rejection::Untrusted(format!(
            "its signature by `{}` does not match the entry",
            signature.public_key
        )));
    }
    Ok(Verified {
        manifest,
        signed_by: Some(signer.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::KeyPair;

    const PAYLOAD: &str = "format=1\nname=ext\n";

    fn entry(library: &[u8]) -> (String, Header) {
        let key = Payload::parse(PAYLOAD).unwrap().key();
        let mut manifest = Manifest::new(&key, "ext", PAYLOAD);
        manifest.library = "libext.so".into();
        manifest.size = library.len() as u64;
        manifest.library_blake3 = blake3::hash(library).to_hex().to_string();
        (
            key,
            Header {
                manifest,
                signature: None,
            },
        )
    }

    fn sign(header: &mut Header, pair: &KeyPair) {
        let m = &header.manifest;
        let message = signature_message(
            &m.key,
            &m.library_blake3,
            &blake3::hash(m.payload.as_bytes()).to_hex(),
        );
        header.signature = Some(pair.secret.sign(&message));
    }

    #[test]
    fn intact_entry_verifies_without_trusted_keys() {
        let (key, header) = entry(b"lib");
        assert!(verify_entry(&key, header, b"lib", &[])
            .unwrap()
            .signed_by
            .is_none());
    }

    #[test]
    fn flipped_library_byte_is_corrupt() {
        let (key, header) = entry(b"lib");
        let err = verify_entry(&key, header, b"lic", &[]).unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("BLAKE3")),
            "{err:?}"
        );
    }

    #[test]
    fn manifest_whose_payload_hashes_elsewhere_is_corrupt() {
        let (key, mut header) = entry(b"lib");
        header.manifest.payload.push_str("torch=2.9.0\n");
        let err = verify_entry(&key, header, b"lib", &[]).unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("payload hashes to")),
            "{err:?}"
        );
    }

    #[test]
    fn library_name_with_a_slash_is_corrupt() {
        let (key, mut header) = entry(b"lib");
        header.manifest.library = "../../evil.so".into();
        assert!(matches!(
            verify_entry(&key, header, b"lib", &[]),
            Err(Rejection::Corrupt(_))
        ));
    }

    #[test]
    fn trusted_keys_require_a_valid_signature_by_one_of_them() {
        let trusted = KeyPair::generate().unwrap();
        let stranger = KeyPair::generate().unwrap();
        let (key, unsigned) = entry(b"lib");
        assert_eq!(
            verify_entry(&key, unsigned.clone(), b"lib", &[trusted.public]).unwrap_err(),
            Rejection::Untrusted("it is not signed".into())
        );
        let mut by_stranger = unsigned.clone();
        sign(&mut by_stranger, &stranger);
        assert!(matches!(
            verify_entry(&key, by_stranger, b"lib", &[trusted.public]),
            Err(Rejection::Untrusted(_))
        ));
        let mut by_trusted = unsigned.clone();
        sign(&mut by_trusted, &trusted);
        let ok = verify_entry(
            &key,
            by_trusted.clone(),
            b"lib",
            &[stranger.public, trusted.public],
        )
        .unwrap();
        assert_eq!(ok.signed_by, Some(trusted.public.to_string()));
        // A valid signature moved onto another library is refused.
        let (_, other) = entry(b"evil");
        let mut moved = other;
        moved.signature = by_trusted.signature;
        assert!(verify_entry(&key, moved, b"evil", &[trusted.public]).is_err());
    }
}
