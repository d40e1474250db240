//! The remote object of one entry: a header (manifest and optional
//! signature) and the library, in one blob so that a single write publishes
//! both together.
//!
//! ```text
//! abicache-remote 1\n
//! <header length in bytes, decimal>\n
//! <header: JSON {"manifest": {...}, "signature": {...} | null}>
//! <library bytes>
//! ```

use abicache_store::Manifest;
use serde::{Deserialize, Serialize};

use crate::sign::Signature;

/// The first line of every object; a different one is not an abicache entry
/// of this format.
pub const MAGIC: &str = "abicache-remote 1\n";

/// The header of an object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The entry's manifest, as the local store writes it.
    pub manifest: Manifest,
    /// A signature over [`crate::signature_message`], when the writer had a signing key.
    #[serde(default)]
    pub signature: Option<Signature>,
}

/// The object for `header` and `library`.
pub fn encode(header: &Header, library: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a header always serializes");
    let mut out = Vec::with_capacity(MAGIC.len() + 24 + json.len() + library.len());
    out.extend_from_slice(MAGIC.as_bytes());
    out.extend_from_slice(format!("{}\n", json.len()).as_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(library);
    out
}

/// The header and library bytes of an object, or what is wrong with it.
pub fn decode(bytes: &[u8]) -> Result<(Header, &[u8]), String> {
    let rest = bytes
        .strip_prefix(MAGIC.as_bytes())
        .ok_or_else(|| "it does not start with the abicache remote format line".to_owned())?;
    let newline = rest
        .iter()
        .take(21)
        .position(|&b| b == b'\n')
        .ok_or_else(|| "its header length is missing".to_owned())?;
    let len: usize = std::str::from_utf8(&rest[..newline])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| "its header length is not a number".to_owned())?;
    let rest = &rest[newline + 1..];
    if rest.len() < len {
        return Err(format!(
            "it is truncated: the header says {len} bytes, {} follow",
            rest.len()
        ));
    }
    let header: Header = serde_json::from_slice(&rest[..len])
        .map_err(|e| format!("its header is not valid: {e}"))?;
    Ok((header, &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            manifest: Manifest::new("k", "ext", "format=1\n"),
            signature: None,
        }
    }

    #[test]
    fn round_trips_header_and_library() {
        let bytes = encode(&header(), b"\x7fELF library");
        let (back, library) = decode(&bytes).unwrap();
        assert_eq!(back, header());
        assert_eq!(library, b"\x7fELF library");
    }

    #[test]
    fn truncated_or_foreign_objects_are_rejected_with_a_reason() {
        let h = header();
        let bytes = encode(&h, b"lib");
        let len = serde_json::to_vec(&h).unwrap().len();
        let truncated = decode(&bytes[..bytes.len() - 4]).unwrap_err();
        assert_eq!(
            truncated,
            format!(
                "it is truncated: the header says {len} bytes, {} follow",
                len - 1
            )
        );
        insta::assert_snapshot!(decode(b"GIF89a").unwrap_err(), @"it does not start with the abicache remote format line");
        insta::assert_snapshot!(decode(b"abicache-remote 1\nx\n").unwrap_err(), @"its header length is not a number");
    }
}
