//! Compiled objects in the remote: one blob per object, framed like an
//! entry ([`crate::entry_blob`]) but with a small record instead of a manifest.
//!
//! ```text
//! abicache-object 1\n
//! <record length in bytes, decimal>\n
//! <record: JSON {"name": "<unit key>.o", "size": N, "blake3": "<hex>"}>
//! <signature length in bytes, decimal; 0 when unsigned>\n
//! <signature: JSON {"public_key": ..., "signature": ...}>
//! <object bytes>
//! ```
//!
//! An object's name is its unit key (see `abicache_build`'s object key), so
//! it cannot be checked against the bytes the way an entry's payload is
//! checked against its key. What is checked on download ([`verify_object`]):
//! the record names the object asked for, the name is a plain file name, the
//! bytes have the record's size and BLAKE3 (`abicache_fs`'s one comparison),
//! and — with trusted keys configured — a valid signature by one of them
//! covers the record (name, size and BLAKE3), so a signed object cannot be
//! moved to another unit key or have its bytes swapped.

use serde::{Deserialize, Serialize};

use abicache_fs::{Digest, Expected};

use crate::entry_blob::{decode_frame, encode_frame};
use crate::sign::{PublicKey, SecretKey, Signature};
use crate::verify::{check_signature_over, Rejection};

/// The first line of every object blob.
pub const OBJECT_MAGIC: &str = "abicache-object 1\n";

/// The folder of object blobs inside the remote.
pub const OBJECTS_DIR: &str = "v1/objects";

/// What identifies a remote object: the record its signature covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectRecord {
    /// The object's file name in the object cache (`<unit key>.o`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its BLAKE3, hex.
    pub blake3: String,
}

/// The header of an object blob: its record and an optional signature.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectHeader {
    /// The record exactly as uploaded: what a signature covers.
    pub record_json: Vec<u8>,
    /// `record_json`, parsed.
    pub record: ObjectRecord,
    /// A signature over [`object_signature_message`] of `record_json`.
    pub signature: Option<Signature>,
}

impl ObjectHeader {
    /// The header for `record`, signed with `signer` when given.
    pub fn new(record: ObjectRecord, signer: Option<&SecretKey>) -> ObjectHeader {
        let record_json = serde_json::to_vec(&record).expect("a record always serializes");
        let signature = signer.map(|secret| secret.sign(&object_signature_message(&record_json)));
        ObjectHeader {
            record_json,
            record,
            signature,
        }
    }

    /// The blob's bytes before the object.
    pub fn encode(&self) -> Vec<u8> {
        encode_frame(OBJECT_MAGIC, &self.record_json, self.signature.as_ref())
    }
}

/// The header at the start of `bytes` and the bytes it takes; `Ok(None)`
/// when `bytes` is a valid but incomplete prefix; `Err` says what is wrong.
pub fn decode_object_header(bytes: &[u8]) -> Result<Option<(ObjectHeader, usize)>, String> {
    let Some((frame, used)) = decode_frame(bytes, OBJECT_MAGIC, "record")? else {
        return Ok(None);
    };
    let record =
        serde_json::from_slice(&frame.json).map_err(|e| format!("its record is not valid: {e}"))?;
    Ok(Some((
        ObjectHeader {
            record_json: frame.json,
            record,
            signature: frame.signature,
        },
        used,
    )))
}

/// The bytes a signature of an object covers: a versioned text naming the
/// BLAKE3 of the record's exact bytes (the object's name, size and BLAKE3).
pub fn object_signature_message(record_json: &[u8]) -> Vec<u8> {
    format!(
        "abicache-remote-object-signature-v1\nrecord_blake3={}\n",
        blake3::hash(record_json).to_hex()
    )
    .into_bytes()
}

/// True when `name` can be an object's file name: a unit's `<hex key>.o`
/// or a CUDA device step's `<hex key>.cudev`, as the build writes them,
/// nothing that could leave the object directory.
pub fn is_object_name(name: &str) -> bool {
    name.strip_suffix(".o")
        .or_else(|| name.strip_suffix(".cudev"))
        .is_some_and(|key| {
            (32..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// Checks a downloaded object: the record is for `name` and `name` is an
/// object name; the bytes (as `bytes`, measured while they streamed) are
/// what the record says; and when `trusted` is not empty, a valid signature
/// by one of those keys covers the record. Returns the signer, if checked.
pub fn verify_object(
    name: &str,
    header: &ObjectHeader,
    bytes: &Digest,
    trusted: &[PublicKey],
) -> Result<Option<String>, Rejection> {
    if header.record.name != name {
        return Err(Rejection::Corrupt(format!(
            "its record is for object `{}`",
            header.record.name
        )));
    }
    if !is_object_name(name) {
        return Err(Rejection::Corrupt(format!(
            "`{name}` is not an object name (`<hex key>.o` or `<hex key>.cudev`)"
        )));
    }
    let expected = Expected {
        size: header.record.size,
        blake3: header.record.blake3.clone(),
    };
    expected.check(bytes).map_err(|mismatch| {
        Rejection::Corrupt(format!("the object has {mismatch} its record gives"))
    })?;
    match trusted {
        [] => Ok(None),
        _ => check_signature_over(
            &object_signature_message(&header.record_json),
            header.signature.clone(),
            trusted,
        )
        .map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::KeyPair;

    const NAME: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.o";

    fn header(bytes: &[u8], signer: Option<&SecretKey>) -> ObjectHeader {
        let record = ObjectRecord {
            name: NAME.into(),
            size: bytes.len() as u64,
            blake3: blake3::hash(bytes).to_hex().to_string(),
        };
        ObjectHeader::new(record, signer)
    }

    #[test]
    fn header_round_trips_and_every_prefix_asks_for_more() {
        let pair = KeyPair::generate().unwrap();
        let signed = header(b"obj", Some(&pair.secret));
        let encoded = signed.encode();
        for end in 0..encoded.len() {
            assert_eq!(decode_object_header(&encoded[..end]), Ok(None), "{end}");
        }
        let (back, used) = decode_object_header(&encoded).unwrap().unwrap();
        assert_eq!((back, used), (signed, encoded.len()));
        let entry = crate::entry_blob::Header::new(
            &abicache_store::Manifest::new("k", "ext", "format=1\n"),
            None,
        );
        let err = decode_object_header(&entry.encode()).unwrap_err();
        insta::assert_snapshot!(err, @"it does not start with the abicache remote format line (`abicache-object 1`); an older abicache may have written it");
    }

    #[test]
    fn intact_objects_verify_and_changed_bytes_or_names_do_not() {
        let ok = header(b"obj", None);
        assert_eq!(verify_object(NAME, &ok, &Digest::of(b"obj"), &[]), Ok(None));
        let err = verify_object(NAME, &ok, &Digest::of(b"obJ"), &[]).unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("BLAKE3")),
            "{err:?}"
        );
        let other = format!("{}.o", "f".repeat(64));
        let err = verify_object(&other, &ok, &Digest::of(b"obj"), &[]).unwrap_err();
        assert!(
            matches!(&err, Rejection::Corrupt(r) if r.contains("is for object")),
            "{err:?}"
        );
        for bad in ["../x.o", "x.o", ".o", "lib.so", "x.cudev", ".cudev"] {
            assert!(!is_object_name(bad), "{bad}");
        }
        assert!(is_object_name(&format!("{}.cudev", "a".repeat(64))));
    }

    #[test]
    fn trusted_keys_require_a_signature_covering_the_record() {
        let trusted = KeyPair::generate().unwrap();
        let stranger = KeyPair::generate().unwrap();
        let digest = Digest::of(b"obj");
        let keys = [trusted.public];
        let unsigned = header(b"obj", None);
        assert_eq!(
            verify_object(NAME, &unsigned, &digest, &keys),
            Err(Rejection::Untrusted("it is not signed".into()))
        );
        let by_stranger = header(b"obj", Some(&stranger.secret));
        assert!(matches!(
            verify_object(NAME, &by_stranger, &digest, &keys),
            Err(Rejection::Untrusted(_))
        ));
        let signed = header(b"obj", Some(&trusted.secret));
        assert_eq!(
            verify_object(NAME, &signed, &digest, &keys),
            Ok(Some(trusted.public.to_string()))
        );
        // The signature moved onto other bytes (with a matching record) is refused.
        let mut swapped = header(b"evil", None);
        swapped.signature = signed.signature.clone();
        let err = verify_object(NAME, &swapped, &Digest::of(b"evil"), &keys).unwrap_err();
        assert!(
            matches!(&err, Rejection::Untrusted(r) if r.contains("does not match")),
            "{err:?}"
        );
    }
}
