//! Verification that a downloaded entry is intact (the key that was asked
//! for, its manifest), and the signature check of downloaded objects.

use abicache_fs::{Digest, Expected};
use abicache_store::{LibraryName, Manifest};

use crate::entry_blob::Header;
use crate::sign::PublicKey;

/// A downloaded entry whose blob is intact: what it says it is. Whether it
/// may be used (its payload against the key, its signature, its audit) is
/// the gate's to decide (`abicache::gate`).
#[derive(Debug, Clone)]
pub struct Verified {
    /// Its manifest.
    pub manifest: Manifest,
    /// The manifest's exact bytes, as a signature covers them.
    pub manifest_json: Vec<u8>,
    /// The signature the blob carries, unchecked.
    pub signature: Option<crate::sign::Signature>,
    /// The library's file name, checked by the store's one rule.
    pub library_name: LibraryName,
}

/// Why an entry was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// It does not match the key or its own manifest.
    Corrupt(String),
    /// It lacks a valid signature by a trusted key.
    Untrusted(String),
}

/// Checks that a downloaded blob is intact: its manifest is for `key`; the
/// library name passes the store's rule ([`LibraryName`]), so whatever the
/// remote holds can be published locally; and the library (as `library`,
/// its size and BLAKE3 measured while it was streamed) is what the manifest
/// records ([`Expected::check`], the same comparison as every local
/// verification). The payload, the signature and the audit are the gate's.
pub fn verify_entry(key: &str, header: Header, library: &Digest) -> Result<Verified, Rejection> {
    let Header {
        manifest_json,
        manifest,
        signature,
    } = header;
    if manifest.key != key {
        return Err(Rejection::Corrupt(format!(
            "its manifest is for key `{}`",
            manifest.key
        )));
    }
    let library_name = LibraryName::parse(&manifest.library)
        .map_err(|e| Rejection::Corrupt(format!("its manifest has an {e}")))?;
    let expected = Expected {
        size: manifest.size,
        blake3: manifest.library_blake3.clone(),
    };
    expected.check(library).map_err(|mismatch| {
        Rejection::Corrupt(format!("the library has {mismatch} the manifest records"))
    })?;
    Ok(Verified {
        manifest,
        manifest_json,
        signature,
        library_name,
    })
}

/// The trusted key (hex) whose valid signature over `message` was given;
/// what is wrong otherwise (unsigned, signed by a stranger, not matching).
pub(crate) fn check_signature_over(
    message: &[u8],
    signature: Option<crate::sign::Signature>,
    trusted: &[PublicKey],
) -> Result<String, Rejection> {
    let Some(signature) = signature else {
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
    if !signer.verifies(message, &signature) {
        return Err(Rejection::Untrusted(format!(
            "its signature by `{}` does not match the entry",
            signature.public_key
        )));
    }
    Ok(signer.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use abicache_key::Payload;

    const PAYLOAD: &str = "format=1\nname=ext\n";

    fn entry(library: &[u8]) -> (String, Header) {
        let key = Payload::parse(PAYLOAD).unwrap().key();
        let mut manifest = Manifest::new(&key, "ext", PAYLOAD);
        manifest.library = "libext.so".into();
        manifest.size = library.len() as u64;
        manifest.library_blake3 = blake3::hash(library).to_hex().to_string();
        (key, Header::new(&manifest, None))
    }

    fn verify(key: &str, header: Header, library: &[u8]) -> Result<Verified, Rejection> {
        verify_entry(key, header, &Digest::of(library))
    }

    #[test]
    fn intact_entry_verifies() {
        let (key, header) = entry(b"lib");
        let ok = verify(&key, header, b"lib").unwrap();
        assert!(ok.signature.is_none());
        assert_eq!(ok.library_name.as_str(), "libext.so");
    }

    #[test]
    fn flipped_or_truncated_library_is_corrupt() {
        let (key, header) = entry(b"lib");
        let err = verify(&key, header.clone(), b"lic").unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("BLAKE3")),
            "{err:?}"
        );
        let err = verify(&key, header, b"li").unwrap_err();
        insta::assert_snapshot!(format!("{err:?}"), @r#"Corrupt("the library has size 2 instead of 3 the manifest records")"#);
    }

    #[test]
    fn a_manifest_for_another_key_is_corrupt() {
        let (_, header) = entry(b"lib");
        let err = verify("0".repeat(64).as_str(), header, b"lib").unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("its manifest is for key")),
            "{err:?}"
        );
    }

    /// Regression: a library named `last-used` passed the
    /// remote's own name rule, then failed the store's at publish (rc 2).
    #[test]
    fn library_names_the_store_refuses_are_corrupt_here_too() {
        for name in [
            "../../evil.so",
            "last-used",
            "manifest.json",
            ".hidden.so",
            "",
        ] {
            let (key, mut header) = entry(b"lib");
            header.manifest.library = name.into();
            let err = verify(&key, header, b"lib").unwrap_err();
            assert!(
                matches!(&err, Rejection::Corrupt(r) if r.contains("invalid library file name")),
                "{name}: {err:?}"
            );
            assert!(LibraryName::parse(name).is_err());
        }
    }
}
