//! Bytes read at offsets, from memory or from a file, never all at once.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Why reading stopped: the structure is wrong, or the file could not be read.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Truncated or malformed; the text says what and where.
    Malformed(String),
    /// The operating system failed to read the file.
    Io(std::io::Error),
}

/// Where the bytes come from. A file is read with `pread` at the offsets
/// asked for, so a 500 MB library costs a few kilobytes of reads and no
/// cache grows with it.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// Bytes already in memory.
    Bytes(&'a [u8]),
    /// An open file and its length when opened.
    File {
        /// The open file.
        file: &'a File,
        /// Its length, which bounds every read.
        len: u64,
    },
}

impl Source<'_> {
    /// The number of bytes available.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Source::Bytes(bytes) => bytes.len() as u64,
            Source::File { len, .. } => *len,
        }
    }

    /// Fills `buf` from `offset`; a malformed-data failure when the range
    /// does not lie within [`Source::len`].
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Failure> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.len())
            .ok_or_else(|| {
                Failure::Malformed(format!(
                    "{} bytes at offset {offset:#x} lie past the end of the data ({:#x} bytes)",
                    buf.len(),
                    self.len()
                ))
            })?;
        match self {
            Source::Bytes(bytes) => {
                // In range: `end <= len`, which fits in `usize`.
                let range = offset as usize..end as usize;
                buf.copy_from_slice(&bytes[range]);
                Ok(())
            }
            Source::File { file, .. } => file.read_exact_at(buf, offset).map_err(Failure::Io),
        }
    }
}

/// A little-endian `u16` at `at` in `bytes` (the caller sized `bytes`).
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// A little-endian `u32` at `at` in `bytes` (the caller sized `bytes`).
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// A little-endian `u64` at `at` in `bytes` (the caller sized `bytes`).
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}
