//! Warnings about corrupt entries: reported to the caller, never fatal.

use std::fmt;
use std::path::PathBuf;

use abicache_fs::Mismatch;

/// What was wrong with a cache entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Corruption {
    /// The entry directory cannot be trusted: a symlink, not a directory,
    /// owned by another user or writable by others (anyone could have
    /// planted or changed it).
    Insecure {
        /// Why, in words.
        reason: String,
    },
    /// `manifest.json` exists but could not be read or parsed.
    UnreadableManifest {
        /// The error, which names the file.
        error: String,
    },
    /// The manifest does not record the library's instruction-set
    /// requirements as this abicache does (manifest format 2, `isa`): an
    /// older abicache's, or one written by hand. Unknown requirements are
    /// never read as "none": the entry is not served.
    UnknownRequirements {
        /// Its `format`.
        format: u32,
    },
    /// The manifest is for another layout version or key, or names an invalid library file.
    InconsistentManifest {
        /// Its `format`.
        format: u32,
        /// Its `key`.
        key: String,
        /// Its `library`.
        library: String,
    },
    /// The library named by the manifest is missing.
    MissingLibrary {
        /// The library path.
        library: PathBuf,
    },
    /// The library could not be read.
    UnreadableLibrary {
        /// The library path.
        library: PathBuf,
        /// The error.
        error: String,
    },
    /// The library's size differs from the manifest's (e.g. truncated).
    SizeMismatch {
        /// The library path.
        library: PathBuf,
        /// Size recorded in the manifest.
        expected: u64,
        /// Size on disk.
        found: u64,
    },
    /// The library's BLAKE3 differs from the manifest's.
    HashMismatch {
        /// The library path.
        library: PathBuf,
        /// Hash recorded in the manifest.
        expected: String,
        /// Hash of the file on disk.
        found: String,
    },
}

impl Corruption {
    /// True for what a half-visible entry of a shared cache looks like (a
    /// manifest or library not there yet, gone stale (`ESTALE`), unreadable
    /// or short): in shared mode such a lookup is a miss, never a deletion.
    /// A library of the right size with the wrong hash, an insecure
    /// directory or an inconsistent manifest is corruption in either mode.
    pub fn may_be_half_visible(&self) -> bool {
        matches!(
            self,
            Corruption::UnreadableManifest { .. }
                | Corruption::MissingLibrary { .. }
                | Corruption::UnreadableLibrary { .. }
                | Corruption::SizeMismatch { .. }
        )
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::Insecure { reason } => {
                write!(f, "its directory cannot be trusted: {reason}")
            }
            Corruption::UnreadableManifest { error } => write!(f, "its manifest is unreadable: {error}"),
            Corruption::UnknownRequirements { format } => write!(
                f,
                "its manifest (format {format}) does not record the library's instruction-set \
                 requirements (`isa`, manifest format {current}): it was written by an older \
                 abicache or by hand, and a library whose requirements are unknown could stop \
                 the process with an illegal instruction (SIGILL), so it is not served",
                current = crate::layout::MANIFEST_FORMAT
            ),
            Corruption::InconsistentManifest { format, key, library } => write!(
                f,
                "its manifest does not match the entry (format {format}, key `{key}`, library `{library}`)"
            ),
            Corruption::MissingLibrary { library } => write!(f, "its library `{}` is missing", library.display()),
            Corruption::UnreadableLibrary { library, error } => {
                write!(f, "its library `{}` is unreadable: {error}", library.display())
            }
            Corruption::SizeMismatch { library, expected, found } => write!(
                f,
                "its library `{}` is {found} bytes but the manifest says {expected} (truncated?)",
                library.display()
            ),
            Corruption::HashMismatch { library, expected, found } => write!(
                f,
                "its library `{}` has BLAKE3 {found} but the manifest says {expected}",
                library.display()
            ),
        }
    }
}

impl Corruption {
    /// What [`abicache_fs::verify_file`]'s `mismatch` means for `library`.
    pub(crate) fn of_library(library: PathBuf, mismatch: Mismatch) -> Corruption {
        match mismatch {
            Mismatch::Unreadable(e) if e.is_not_found() => Corruption::MissingLibrary { library },
            Mismatch::Unreadable(e) => Corruption::UnreadableLibrary {
                library,
                error: e.to_string(),
            },
            Mismatch::Size { expected, found } => Corruption::SizeMismatch {
                library,
                expected,
                found,
            },
            Mismatch::Hash { expected, found } => Corruption::HashMismatch {
                library,
                expected,
                found,
            },
        }
    }
}

/// A corrupt entry found by a lookup. It was never returned as a hit.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreWarning {
    /// The entry's key.
    pub key: String,
    /// The entry directory.
    pub dir: PathBuf,
    /// What was wrong.
    pub problem: Corruption,
    /// Whether this process removed it (false: another process held its lock
    /// and is replacing or removing it).
    pub removed: bool,
}

impl fmt::Display for StoreWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.problem {
            // Written by an older abicache: out of date, not damaged.
            Corruption::UnknownRequirements { .. } => "cannot be used",
            _ => "is corrupt",
        };
        write!(
            f,
            "cache entry `{}` {what}: {}; ",
            self.dir.display(),
            self.problem
        )?;
        if self.removed {
            write!(f, "removed it, it will be rebuilt")
        } else {
            write!(
                f,
                "treated as a miss (another process holds its lock and will replace it)"
            )
        }
    }
}
