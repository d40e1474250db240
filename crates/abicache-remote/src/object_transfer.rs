//! Downloading and uploading compiled objects ([`crate::objects`]'s blobs).

use std::path::Path;

use crate::client::{Download, Framed, Remote, Upload};
use crate::config::Mode;
use crate::error::{RemoteError, Result};
use crate::objects::{
    decode_object_header, verify_object, ObjectHeader, ObjectRecord, OBJECTS_DIR,
};
use crate::verify::Rejection;

/// A verified object downloaded by [`Remote::fetch_object`].
#[derive(Debug)]
pub struct FetchedObject {
    /// Where the object was written: a temporary file in the directory
    /// given, deleted when dropped unless it was moved away (published).
    pub path: tempfile::TempPath,
    /// Bytes downloaded.
    pub bytes: u64,
    /// The trusted key that signed it, when trusted keys are configured.
    pub signed_by: Option<String>,
}

impl Framed for ObjectHeader {
    fn decode(bytes: &[u8]) -> std::result::Result<Option<(Self, usize)>, String> {
        decode_object_header(bytes)
    }
    fn body_size(&self) -> u64 {
        self.record.size
    }
}

impl Remote {
    /// The path of the object `name`'s blob inside the remote.
    pub fn object_blob_path(name: &str) -> String {
        format!("{OBJECTS_DIR}/{name}")
    }

    /// Downloads the object `name` into a temporary file in `dir` (streamed,
    /// at most [`crate::RemoteConfig::max_size`] bytes read) and verifies it
    /// ([`verify_object`]). `Ok(None)` when the remote has no such object; a
    /// corrupt, untrusted or oversized one is an error and leaves nothing in
    /// `dir`.
    pub fn fetch_object(&self, name: &str, dir: &Path) -> Result<Option<FetchedObject>> {
        let blob = Self::object_blob_path(name);
        let Some(download): Option<Download<ObjectHeader>> = self.download(&blob, dir)? else {
            return Ok(None);
        };
        let url = || self.url().to_owned();
        let signed_by = verify_object(
            name,
            &download.header,
            &download.library_digest,
            &self.config().trusted_keys,
        )
        .map_err(|r| match r {
            Rejection::Corrupt(reason) => RemoteError::Corrupt {
                url: url(),
                blob: blob.clone(),
                reason,
            },
            Rejection::Untrusted(reason) => RemoteError::Untrusted {
                url: url(),
                blob: blob.clone(),
                reason,
            },
        })?;
        Ok(Some(FetchedObject {
            path: download.library.into_temp_path(),
            bytes: download.bytes,
            signed_by,
        }))
    }

    /// Uploads the object file `path` as `name` (its size and BLAKE3 measured
    /// now; signed with the configured signing key if any) unless the remote
    /// has one already, or `overwrite` (after [`Remote::fetch_object`]
    /// rejected the one there). Refused on a read-only remote.
    pub fn upload_object(&self, name: &str, path: &Path, overwrite: bool) -> Result<Upload> {
        if self.config().mode == Mode::ReadOnly {
            return Err(RemoteError::ReadOnly {
                url: self.url().to_owned(),
            });
        }
        let blob = Self::object_blob_path(name);
        if !overwrite && self.exists(&blob)? {
            return Ok(Upload::AlreadyThere);
        }
        let bytes = fs_err::read(path)?;
        let record = ObjectRecord {
            name: name.to_owned(),
            size: bytes.len() as u64,
            blake3: blake3::hash(&bytes).to_hex().to_string(),
        };
        let mut blob_bytes = ObjectHeader::new(record, self.config().signing_key.as_ref()).encode();
        blob_bytes.extend_from_slice(&bytes);
        let size = blob_bytes.len() as u64;
        self.write_raw(&blob, blob_bytes)?;
        Ok(Upload::Uploaded { bytes: size })
    }
}
