//! abicache's file primitives, shared by every crate that reads a file it did
//! not write in this process (sources, specs, manifests, libraries, objects,
//! remote downloads).
//!
//! Guarantees:
//! - **No hangs, no unbounded reads**: [`open_regular`] opens with
//!   `O_NONBLOCK` (a FIFO never blocks the open), refuses anything that is
//!   not a regular file (FIFO, device, directory, socket) with
//!   [`FsError::NotRegular`], optionally refuses symlinks (`O_NOFOLLOW`), and
//!   [`read_bounded`] refuses files over a size cap.
//! - **Stat stamps** ([`FileStamp`]): device, inode, size, mtime and ctime in
//!   nanoseconds. Any write, truncation or replacement of a file changes its
//!   stamp (ctime cannot be set back from user space). A stamp taken too close
//!   to the file's last change (the racy-git rule, [`RACY_WINDOW`]) is never
//!   trusted, so a write in the same timestamp tick cannot go unseen.
//! - **One verification routine** ([`verify_file`]): size, then BLAKE3 unless
//!   a trusted stamp of an earlier full check still matches. Used by the local
//!   store for entries and objects and by the remote cache for downloads.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("lib.so");
//! std::fs::write(&path, b"hello").unwrap();
//! let expected = abicache_fs::Expected { size: 5, blake3: abicache_fs::blake3_hex(b"hello") };
//! let checked = abicache_fs::verify_file(&path, &expected, None, abicache_fs::Follow::No).unwrap();
//! assert!(checked.rehashed);
//! ```

#![deny(missing_docs)]

mod error;
mod fields;
mod open;
mod stamp;
mod verify;

pub use error::{FsError, Result};
pub use fields::FieldHasher;
pub use open::{open_regular, read_bounded, DirHandles, Follow};
pub use stamp::{FileStamp, RACY_WINDOW};
pub use verify::{
    blake3_hex, hash_reader, verify_file, Checked, Digest, DigestWriter, Expected, Mismatch,
};
