//! The crate's one error type.

use std::path::PathBuf;

/// What went wrong opening, reading or verifying a file.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path exists but is a FIFO, device, socket or directory.
    #[error(
        "`{path}` is a {kind}, not a regular file: replace it with a regular file (or remove it)"
    )]
    NotRegular {
        /// The path at fault.
        path: PathBuf,
        /// What it is instead ("FIFO", "directory", ...).
        kind: &'static str,
    },
    /// The path is a symbolic link where none is allowed (inside the cache).
    #[error("`{path}` is a symbolic link where a regular file is required; remove it")]
    Symlink {
        /// The path at fault.
        path: PathBuf,
    },
    /// The file is larger than the cap the caller set.
    #[error("`{path}` is {size} bytes, more than the {cap}-byte limit for this kind of file")]
    TooLarge {
        /// The path at fault.
        path: PathBuf,
        /// Its size (or the bytes read before giving up).
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Any other I/O error, with the path.
    #[error("failed to read `{path}`: {source}")]
    Io {
        /// The path at fault.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl FsError {
    /// Wraps an I/O error with its path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> FsError {
        FsError::Io {
            path: path.into(),
            source,
        }
    }

    /// True when the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// An `io::Error` carrying the whole message (path included) and the kind
/// of the underlying OS error (`NotFound` stays `NotFound`), for callers
/// whose error type wraps `io::Error`. A non-regular file, a symlink and an
/// oversized file are `InvalidInput`.
impl From<FsError> for std::io::Error {
    fn from(e: FsError) -> std::io::Error {
        let kind = match &e {
            FsError::Io { source, .. } => source.kind(),
            _ => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, e.to_string())
    }
}

/// Result alias of this crate.
pub type Result<T, E = FsError> = std::result::Result<T, E>;
