//! Verification of a downloaded entry against the key that was asked for.

use abicache_fs::{Digest, Expected};
use abicache_key::Payload;
use abicache_store::{LibraryName, Manifest};

use crate::entry_blob::Header;
use crate::sign::{signature_message, PublicKey};

/// A downloaded entry that passed every check.
#[derive(Debug, Clone)]
pub struct Verified {
    /// Its manifest.
    pub manifest: Manifest,
    /// The library's file name, checked by the store's one rule.
    pub library_name: LibraryName,
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
/// hashes to `key`; the library name passes the store's rule
/// ([`LibraryName`]), so whatever the remote holds can be published locally;
/// the library (as `library`, its size and BLAKE3 measured while it was
/// streamed) is what the manifest records ([`Expected::check`], the same
/// comparison as every local verification); and when `trusted` is not
/// empty, the header carries a signature by one of those keys over the key
/// and the whole manifest as uploaded.
pub fn verify_entry(
    key: &str,
    header: Header,
    library: &Digest,
    trusted: &[PublicKey],
) -> Result<Verified, Rejection> {
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
    let payload_key = Payload::parse(&manifest.payload)
        .map_err(|e| Rejection::Corrupt(format!("its payload cannot be read: {e}")))?
        .key();
    if payload_key != key {
        return Err(Rejection::Corrupt(format!(
            "its payload hashes to `{payload_key}`, not to the key"
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
    let signed_by = match trusted {
        [] => None,
        _ => Some(check_signature(key, &manifest_json, signature, trusted)?),
    };
    Ok(Verified {
        manifest,
        library_name,
        signed_by,
    })
}

/// The trusted key (hex) whose valid signature over `key` and
/// `manifest_json` the entry carries.
fn check_signature(
    key: &str,
    manifest_json: &[u8],
    signature: Option<crate::sign::Signature>,
    trusted: &[PublicKey],
) -> Result<String, Rejection> {
    check_signature_over(&signature_message(key, manifest_json), signature, trusted)
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
    use crate::sign::KeyPair;

    const PAYLOAD: &str = "format=1\nname=ext\n";

    fn manifest(library: &[u8]) -> (String, Manifest) {
        let key = Payload::parse(PAYLOAD).unwrap().key();
        let mut manifest = Manifest::new(&key, "ext", PAYLOAD);
        manifest.library = "libext.so".into();
        manifest.size = library.len() as u64;
        manifest.library_blake3 = blake3::hash(library).to_hex().to_string();
        (key, manifest)
    }

    fn entry(library: &[u8]) -> (String, Header) {
        let (key, manifest) = manifest(library);
        (key, Header::new(&manifest, None))
    }

    fn verify(key: &str, header: Header, library: &[u8]) -> Result<Verified, Rejection> {
        verify_entry(key, header, &Digest::of(library), &[])
    }

    #[test]
    fn intact_entry_verifies_without_trusted_keys() {
        let (key, header) = entry(b"lib");
        let ok = verify(&key, header, b"lib").unwrap();
        assert!(ok.signed_by.is_none());
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
    fn manifest_whose_payload_hashes_elsewhere_is_corrupt() {
        let (key, mut header) = entry(b"lib");
        header.manifest.payload.push_str("torch=2.9.0\n");
        let err = verify(&key, header, b"lib").unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("payload hashes to")),
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

    #[test]
    fn trusted_keys_require_a_valid_signature_by_one_of_them() {
        let trusted = KeyPair::generate().unwrap();
        let stranger = KeyPair::generate().unwrap();
        let (key, manifest) = manifest(b"lib");
        let lib = Digest::of(b"lib");
        let unsigned = Header::new(&manifest, None);
        assert_eq!(
            verify_entry(&key, unsigned, &lib, &[trusted.public]).unwrap_err(),
            Rejection::Untrusted("it is not signed".into())
        );
        let by_stranger = Header::new(&manifest, Some(&stranger.secret));
        assert!(matches!(
            verify_entry(&key, by_stranger, &lib, &[trusted.public]),
            Err(Rejection::Untrusted(_))
        ));
        let by_trusted = Header::new(&manifest, Some(&trusted.secret));
        let ok = verify_entry(
            &key,
            by_trusted.clone(),
            &lib,
            &[stranger.public, trusted.public],
        )
        .unwrap();
        assert_eq!(ok.signed_by, Some(trusted.public.to_string()));
        // A valid signature moved onto another library is refused.
        let (_, other) = entry(b"evil");
        let mut moved = other;
        moved.signature = by_trusted.signature.clone();
        assert!(verify_entry(&key, moved, &Digest::of(b"evil"), &[trusted.public]).is_err());
    }

    /// The signature covers the whole manifest: renaming the library or
    /// changing any other field (here the toolchain) invalidates it, even
    /// with the library bytes, key and payload unchanged.
    #[test]
    fn a_signed_manifest_with_any_field_changed_is_untrusted() {
        let trusted = KeyPair::generate().unwrap();
        let (key, manifest) = manifest(b"lib");
        let signed = Header::new(&manifest, Some(&trusted.secret));
        for tamper in [
            |m: &mut Manifest| m.library = "renamed.so".into(),
            |m: &mut Manifest| {
                m.toolchain.insert("c++".into(), "evil".into());
            },
        ] {
            let mut changed = manifest.clone();
            tamper(&mut changed);
            let mut forged = Header::new(&changed, None);
            forged.signature = signed.signature.clone();
            let err = verify_entry(&key, forged, &Digest::of(b"lib"), &[trusted.public]);
            assert!(
                matches!(&err, Err(Rejection::Untrusted(r)) if r.contains("does not match")),
                "{err:?}"
            );
        }
    }
}
