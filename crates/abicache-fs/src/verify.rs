//! The one verification routine: size, BLAKE3, and the stamp that lets a
//! later check skip the hash.

use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

use crate::error::FsError;
use crate::open::{open_regular, Follow};
use crate::stamp::FileStamp;

/// What a file must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Its length in bytes.
    pub size: u64,
    /// Its BLAKE3, lower-case hex.
    pub blake3: String,
}

/// The size and BLAKE3 of bytes that were read: a file by [`verify_file`],
/// or a stream as it was written ([`DigestWriter`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// Bytes seen.
    pub size: u64,
    /// Their BLAKE3, lower-case hex.
    pub blake3: String,
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest {
            size: bytes.len() as u64,
            blake3: blake3_hex(bytes),
        }
    }
}

impl Expected {
    /// The one comparison: `found` has the expected size, then the expected
    /// BLAKE3. [`verify_file`] and streamed downloads both end here.
    pub fn check(&self, found: &Digest) -> Result<(), Mismatch> {
        if found.size != self.size {
            return Err(Mismatch::Size {
                expected: self.size,
                found: found.size,
            });
        }
        if found.blake3 != self.blake3 {
            return Err(Mismatch::Hash {
                expected: self.blake3.clone(),
                found: found.blake3.clone(),
            });
        }
        Ok(())
    }
}

/// A writer that hashes and counts everything written through it, so a
/// download is verified while it streams, without reading it back.
#[derive(Debug)]
pub struct DigestWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
    size: u64,
}

impl<W: std::io::Write> DigestWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        DigestWriter {
            inner,
            hasher: blake3::Hasher::new(),
            size: 0,
        }
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Flushes `inner` and returns it with the digest of everything written.
    pub fn finish(mut self) -> std::io::Result<(W, Digest)> {
        self.inner.flush()?;
        let digest = Digest {
            size: self.size,
            blake3: self.hasher.finalize().to_hex().to_string(),
        };
        Ok((self.inner, digest))
    }
}

impl<W: std::io::Write> std::io::Write for DigestWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A file that passed [`verify_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The stamp to remember for the next check: the given one when it still
    /// matched, a fresh trusted one after a full hash, `None` when the file
    /// changed too recently to be stamped (the next check hashes again).
    pub stamp: Option<FileStamp>,
    /// True when the file was read and hashed in this call.
    pub rehashed: bool,
    /// The `fstat` stamp of the descriptor that was checked (hashed, or
    /// found equal to the known stamp), whatever the path names now: a
    /// loader that opens the path again loads the checked bytes only when
    /// its own descriptor has this stamp. `None` when the file changed while
    /// it was read (nothing then proves which bytes were hashed).
    pub opened: Option<FileStamp>,
}

/// Why a file failed [`verify_file`]. Every variant means "do not use it".
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    /// The file could not be opened or read (missing, FIFO, symlink, I/O).
    #[error(transparent)]
    Unreadable(#[from] FsError),
    /// The file has the wrong length.
    #[error("size {found} instead of {expected}")]
    Size {
        /// The expected length.
        expected: u64,
        /// The length found.
        found: u64,
    },
    /// The file has the wrong BLAKE3.
    #[error("BLAKE3 {found} instead of {expected}")]
    Hash {
        /// The expected hash.
        expected: String,
        /// The hash found.
        found: String,
    },
}

/// Checks that `path` is a regular file of `expected` size and BLAKE3.
///
/// When `known` is a stamp of an earlier successful check and the file's
/// stamp still equals it, the file is not read. Otherwise it is hashed in
/// full; the returned [`Checked::stamp`] is then a fresh stamp, trusted only
/// when the file has not changed within [`crate::RACY_WINDOW`] and did not
/// change while it was read.
pub fn verify_file(
    path: &Path,
    expected: &Expected,
    known: Option<&FileStamp>,
    follow: Follow,
) -> Result<Checked, Mismatch> {
    let (file, meta) = open_regular(path, follow)?;
    if meta.len() != expected.size {
        return Err(Mismatch::Size {
            expected: expected.size,
            found: meta.len(),
        });
    }
    if let Some(known) = known {
        if FileStamp::of(&meta) == *known {
            return Ok(Checked {
                stamp: Some(*known),
                rehashed: false,
                opened: Some(*known),
            });
        }
    }
    let found = hash_reader(&file).map_err(|e| FsError::io(path, e))?;
    expected.check(&Digest {
        size: meta.len(),
        blake3: found,
    })?;
    let after = file.metadata().map_err(|e| FsError::io(path, e))?;
    let opened = Some(FileStamp::of(&meta)).filter(|s| *s == FileStamp::of(&after));
    let stamp = FileStamp::trusted(&meta, SystemTime::now()).filter(|_| opened.is_some());
    Ok(Checked {
        stamp,
        rehashed: true,
        opened,
    })
}

/// Hex BLAKE3 of everything `reader` yields.
pub fn hash_reader(reader: impl Read) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(reader)?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// Hex BLAKE3 of `bytes`.
pub fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn expected(bytes: &[u8]) -> Expected {
        Expected {
            size: bytes.len() as u64,
            blake3: blake3_hex(bytes),
        }
    }

    #[test]
    fn a_wrong_size_or_hash_is_a_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        assert!(matches!(
            verify_file(&path, &expected(b"abcd"), None, Follow::No),
            Err(Mismatch::Size {
                expected: 4,
                found: 3
            })
        ));
        assert!(matches!(
            verify_file(&path, &expected(b"abd"), None, Follow::No),
            Err(Mismatch::Hash { .. })
        ));
        let missing = verify_file(&dir.path().join("nope"), &expected(b"a"), None, Follow::No);
        assert!(matches!(missing, Err(Mismatch::Unreadable(e)) if e.is_not_found()));
    }

    #[test]
    fn a_stream_written_through_a_digest_writer_checks_like_a_file() {
        use std::io::Write;
        let mut writer = DigestWriter::new(Vec::new());
        writer.write_all(b"ab").unwrap();
        writer.write_all(b"c").unwrap();
        assert_eq!(writer.size(), 3);
        let (bytes, digest) = writer.finish().unwrap();
        assert_eq!(
            (bytes.as_slice(), &digest),
            (&b"abc"[..], &Digest::of(b"abc"))
        );
        expected(b"abc").check(&digest).unwrap();
        assert!(matches!(
            expected(b"abd").check(&digest),
            Err(Mismatch::Hash { .. })
        ));
        assert!(matches!(
            expected(b"abcd").check(&digest),
            Err(Mismatch::Size { .. })
        ));
    }

    #[test]
    fn the_opened_stamp_is_the_checked_files_not_the_one_renamed_into_place_since() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        let checked = verify_file(&path, &expected(b"abc"), None, Follow::No).unwrap();
        let hashed = FileStamp::of(&std::fs::symlink_metadata(&path).unwrap());
        assert_eq!(checked.opened, Some(hashed));
        // Another file renamed over the path after the check: the stamp a
        // loader compares with still names the file that was hashed.
        let other = dir.path().join("g");
        std::fs::write(&other, b"abd").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let now = FileStamp::of(&std::fs::symlink_metadata(&path).unwrap());
        assert_ne!(checked.opened, Some(now));
        // A known stamp that still matches: the descriptor's stamp too.
        let again = verify_file(&path, &expected(b"abd"), Some(&now), Follow::No).unwrap();
        assert_eq!((again.rehashed, again.opened), (false, Some(now)));
    }

    #[test]
    fn a_matching_stamp_skips_the_hash_and_a_changed_file_is_rehashed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        // Fresh file: hashed, no trusted stamp yet.
        let first = verify_file(&path, &expected(b"abc"), None, Follow::No).unwrap();
        assert!(first.rehashed);
        assert_eq!(first.stamp, None);
        // A stamp as a later, trusted check would have stored it.
        let meta = std::fs::metadata(&path).unwrap();
        let stamp = FileStamp::trusted(&meta, SystemTime::now() + Duration::from_secs(3)).unwrap();
        let second = verify_file(&path, &expected(b"abc"), Some(&stamp), Follow::No).unwrap();
        assert!(!second.rehashed);
        // Same size, different bytes: the stamp no longer matches, the hash catches it.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"abd").unwrap();
        assert!(matches!(
            verify_file(&path, &expected(b"abc"), Some(&stamp), Follow::No),
            Err(Mismatch::Hash { .. })
        ));
    }
}
