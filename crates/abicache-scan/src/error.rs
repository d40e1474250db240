//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

/// Why a scan could not produce a report. A scan never yields a silent,
/// partial report: every failure names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A source given to [`scan`](crate::scan) does not exist.
    #[error(
        "source `{}` does not exist; check the extension's `sources` \
         (relative paths are relative to the spec file's directory, or to the \
         current directory when given directly)",
        path.display()
    )]
    MissingSource {
        /// The source as given.
        path: PathBuf,
    },
    /// A source or a local header exists but cannot be read.
    #[error(
        "cannot read `{}`: {source}; check that it is a regular file readable by this user",
        path.display()
    )]
    Unreadable {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// The fingerprint root does not exist or is not a directory.
    #[error(
        "fingerprint root `{}` cannot be used: {reason}; pass an existing \
         directory (normally the spec file's directory)",
        path.display()
    )]
    InvalidRoot {
        /// The root as given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}
