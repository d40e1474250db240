//! The one error type of this crate.

use std::path::PathBuf;

/// Why a library could not be audited. Every variant names the path it is about
/// (`<in-memory>` for [`crate::audit_bytes`]).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file does not start with the ELF magic `7f 45 4c 46`.
    #[error(
        "`{path}` is not an ELF file: it {found}. \
         Pass the path of a built shared library (`.so`) to audit."
    )]
    NotElf {
        /// The file that was read.
        path: PathBuf,
        /// What was found instead, e.g. `is empty` or `starts with 23 21 2f 62 ("#!/b")`.
        found: String,
    },
    /// The file starts like an ELF file but its structure cannot be read.
    #[error(
        "`{path}` is a truncated or malformed ELF file ({reason}). \
         Rebuild the library; if it came from the cache, remove the entry (`abicache rm`)."
    )]
    Malformed {
        /// The file that was read.
        path: PathBuf,
        /// What the ELF reader could not make sense of.
        reason: String,
    },
    /// The file could not be opened or read.
    #[error("cannot read `{path}`: {source}. Check that the file exists and is readable.")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}
