//! The remote blob of one entry (its "entry blob"; "object" names only
//! compiled objects, [`crate::objects`]): the manifest, an optional signature and
//! the library, in one blob so that a single write publishes them together.
//!
//! ```text
//! abicache-remote 2\n
//! <manifest length in bytes, decimal>\n
//! <manifest: JSON, exactly the bytes a signature covers>
//! <signature length in bytes, decimal; 0 when unsigned>\n
//! <signature: JSON {"public_key": ..., "signature": ...}>
//! <library bytes>
//! ```
//!
//! The header (everything before the library) can be parsed from a prefix of
//! the blob ([`decode_header`]), so a download is streamed: the library
//! goes to a file as it arrives and is never held in memory.

use abicache_store::Manifest;

use crate::sign::{signature_message, SecretKey, Signature};

/// The first line of every entry blob; a different one is not an abicache entry
/// of this format (format 1 blobs signed less than the whole manifest).
pub const MAGIC: &str = "abicache-remote 2\n";

/// The largest header (manifest and signature) accepted.
pub const MAX_HEADER_SIZE: usize = 64 << 20;

/// Digits a length line may have (20 is enough for any `u64`).
const MAX_LENGTH_DIGITS: usize = 20;

/// The header of an entry blob.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The manifest exactly as uploaded: what a signature covers.
    pub manifest_json: Vec<u8>,
    /// `manifest_json`, parsed.
    pub manifest: Manifest,
    /// A signature over [`signature_message`] of the key and
    /// `manifest_json`, when the writer had a signing key.
    pub signature: Option<Signature>,
}

impl Header {
    /// The header for `manifest`, signed with `signer` when given.
    pub fn new(manifest: &Manifest, signer: Option<&SecretKey>) -> Header {
        let manifest_json = manifest.to_json();
        let signature =
            signer.map(|secret| secret.sign(&signature_message(&manifest.key, &manifest_json)));
        Header {
            manifest_json,
            manifest: manifest.clone(),
            signature,
        }
    }

    /// The blob's bytes before the library.
    pub fn encode(&self) -> Vec<u8> {
        encode_frame(MAGIC, &self.manifest_json, self.signature.as_ref())
    }
}

/// The entry blob for `header` and `library`.
pub fn encode(header: &Header, library: &[u8]) -> Vec<u8> {
    let mut out = header.encode();
    out.extend_from_slice(library);
    out
}

/// The header at the start of `bytes` and the number of bytes it takes;
/// `Ok(None)` when `bytes` is a valid but incomplete prefix (read more);
/// `Err` says what is wrong with the blob.
pub fn decode_header(bytes: &[u8]) -> Result<Option<(Header, usize)>, String> {
    let Some((frame, used)) = decode_frame(bytes, MAGIC, "manifest")? else {
        return Ok(None);
    };
    let manifest = Manifest::from_json(&frame.json, std::path::Path::new("<remote manifest>"))
        .map_err(|e| format!("its manifest is not valid: {e}"))?;
    Ok(Some((
        Header {
            manifest_json: frame.json,
            manifest,
            signature: frame.signature,
        },
        used,
    )))
}

/// The framing every remote blob (entry or compiled object) shares: a format line (`magic`), a
/// length-prefixed JSON document, a length-prefixed optional signature.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Frame {
    /// The JSON document exactly as written: what a signature covers.
    pub json: Vec<u8>,
    /// The signature, when the writer had a signing key.
    pub signature: Option<Signature>,
}

/// The bytes of a frame (what comes before a blob's payload).
pub(crate) fn encode_frame(magic: &str, json: &[u8], signature: Option<&Signature>) -> Vec<u8> {
    let signature = signature
        .map(|s| serde_json::to_vec(s).expect("a signature always serializes"))
        .unwrap_or_default();
    let mut out = Vec::with_capacity(magic.len() + 42 + json.len() + signature.len());
    out.extend_from_slice(magic.as_bytes());
    out.extend_from_slice(format!("{}\n", json.len()).as_bytes());
    out.extend_from_slice(json);
    out.extend_from_slice(format!("{}\n", signature.len()).as_bytes());
    out.extend_from_slice(&signature);
    out
}

/// The frame at the start of `bytes` (format line `magic`, its document
/// called `document` in errors) and the bytes it takes; `Ok(None)` when
/// `bytes` is a valid but incomplete prefix.
pub(crate) fn decode_frame(
    bytes: &[u8],
    magic: &str,
    document: &str,
) -> Result<Option<(Frame, usize)>, String> {
    let foreign = || foreign(magic);
    let magic = magic.as_bytes();
    if bytes.len() < magic.len() {
        return if magic.starts_with(bytes) {
            Ok(None)
        } else {
            Err(foreign())
        };
    }
    if !bytes.starts_with(magic) {
        return Err(foreign());
    }
    let mut at = magic.len();
    let Some(json_len) = length_line(bytes, &mut at, document)? else {
        return Ok(None);
    };
    let Some(json) = take(bytes, &mut at, json_len) else {
        return Ok(None);
    };
    let Some(signature_len) = length_line(bytes, &mut at, "signature")? else {
        return Ok(None);
    };
    if json_len + signature_len > MAX_HEADER_SIZE {
        return Err(format!(
            "its header ({} bytes) is larger than the {MAX_HEADER_SIZE}-byte limit",
            json_len + signature_len
        ));
    }
    let Some(signature) = take(bytes, &mut at, signature_len) else {
        return Ok(None);
    };
    let signature = if signature.is_empty() {
        None
    } else {
        Some(
            serde_json::from_slice(signature)
                .map_err(|e| format!("its signature is not valid: {e}"))?,
        )
    };
    Ok(Some((
        Frame {
            json: json.to_vec(),
            signature,
        },
        at,
    )))
}

/// The header and library bytes of a whole entry blob, or what is wrong with it
/// (for tools and tests; downloads stream through [`decode_header`]).
pub fn decode(bytes: &[u8]) -> Result<(Header, &[u8]), String> {
    match decode_header(bytes)? {
        Some((header, used)) => Ok((header, &bytes[used..])),
        None => Err(truncated(bytes.len())),
    }
}

/// Why a blob that ended before its header was complete is corrupt.
pub fn truncated(len: usize) -> String {
    format!("it is truncated: it ends after {len} bytes, inside its header")
}

fn foreign(magic: &str) -> String {
    format!(
        "it does not start with the abicache remote format line (`{}`); \
         an older abicache may have written it",
        magic.trim_end()
    )
}

/// Reads a decimal length and its newline at `*at`; `Ok(None)` when the
/// line is incomplete. A length above [`MAX_HEADER_SIZE`] is refused at once,
/// before anything is allocated for it.
fn length_line(bytes: &[u8], at: &mut usize, what: &str) -> Result<Option<usize>, String> {
    let rest = &bytes[*at..];
    let Some(newline) = rest
        .iter()
        .take(MAX_LENGTH_DIGITS + 1)
        .position(|&b| b == b'\n')
    else {
        return if rest.len() > MAX_LENGTH_DIGITS {
            Err(format!("its {what} length is missing"))
        } else {
            Ok(None)
        };
    };
    let len = std::str::from_utf8(&rest[..newline])
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or_else(|| format!("its {what} length is not a number"))?;
    if len > MAX_HEADER_SIZE {
        return Err(format!(
            "its {what} ({len} bytes) is larger than the {MAX_HEADER_SIZE}-byte header limit"
        ));
    }
    *at += newline + 1;
    Ok(Some(len))
}

fn take<'a>(bytes: &'a [u8], at: &mut usize, len: usize) -> Option<&'a [u8]> {
    let part = bytes.get(*at..*at + len)?;
    *at += len;
    Some(part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::KeyPair;

    fn header() -> Header {
        Header::new(&Manifest::new("k", "ext", "format=1\n"), None)
    }

    #[test]
    fn round_trips_header_and_library_signed_or_not() {
        let bytes = encode(&header(), b"\x7fELF library");
        let (back, library) = decode(&bytes).unwrap();
        assert_eq!(back, header());
        assert_eq!(library, b"\x7fELF library");
        let pair = KeyPair::generate().unwrap();
        let signed = Header::new(&header().manifest, Some(&pair.secret));
        let bytes = encode(&signed, b"lib");
        assert_eq!(decode(&bytes).unwrap().0, signed);
    }

    #[test]
    fn every_prefix_of_the_header_asks_for_more_and_the_whole_parses() {
        let bytes = encode(&header(), b"lib");
        let header_len = header().encode().len();
        for end in 0..header_len {
            assert_eq!(
                decode_header(&bytes[..end]),
                Ok(None),
                "prefix of {end} bytes"
            );
        }
        let (_, used) = decode_header(&bytes[..header_len]).unwrap().unwrap();
        assert_eq!(used, header_len);
    }

    #[test]
    fn truncated_foreign_or_oversized_blobs_are_rejected_with_a_reason() {
        let bytes = encode(&header(), b"lib");
        let truncated = decode(&bytes[..30]).unwrap_err();
        insta::assert_snapshot!(truncated, @"it is truncated: it ends after 30 bytes, inside its header");
        insta::assert_snapshot!(decode(b"GIF89a").unwrap_err(), @"it does not start with the abicache remote format line (`abicache-remote 2`); an older abicache may have written it");
        insta::assert_snapshot!(decode(b"abicache-remote 1\n12\n").unwrap_err(), @"it does not start with the abicache remote format line (`abicache-remote 2`); an older abicache may have written it");
        insta::assert_snapshot!(decode(b"abicache-remote 2\nx\n").unwrap_err(), @"its manifest length is not a number");
        insta::assert_snapshot!(decode(b"abicache-remote 2\n99999999999999999999\n").unwrap_err(), @"its manifest length is not a number");
        insta::assert_snapshot!(decode(b"abicache-remote 2\n999999999\n").unwrap_err(), @"its manifest (999999999 bytes) is larger than the 67108864-byte header limit");
        insta::assert_snapshot!(decode(b"abicache-remote 2\n2\n{}0\n").unwrap_err(), @"its manifest is not valid: failed to parse manifest `<remote manifest>`: missing field `format` at line 1 column 2");
    }
}
