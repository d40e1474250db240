//! The one error type of this crate.

use std::path::PathBuf;

/// Why device code could not be read, or arch text could not be understood.
/// Every variant names what it is about: the file, or the text or flag.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or read.
    #[error("cannot read `{path}`: {source}. Check that the file exists and is readable.")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the ELF magic.
    #[error("`{path}` is not an ELF file: it {found}. Pass a built shared library (`.so`) or object (`.o`).")]
    NotElf {
        /// The file that was read.
        path: PathBuf,
        /// What was found instead.
        found: String,
    },
    /// The file is ELF but its structure cannot be read.
    #[error("`{path}` is a truncated or malformed ELF file ({reason}). Rebuild the library; if it came from the cache, remove the entry (`abicache rm`).")]
    MalformedElf {
        /// The file that was read.
        path: PathBuf,
        /// What could not be made sense of.
        reason: String,
    },
    /// The file's CUDA fat binary is truncated or malformed.
    #[error("`{path}` carries a truncated or malformed CUDA fat binary ({reason}). Rebuild the library; if it came from the cache, remove the entry (`abicache rm`).")]
    MalformedFatbin {
        /// The file that was read.
        path: PathBuf,
        /// What could not be made sense of, with its offset.
        reason: String,
    },
    /// Text that should name a GPU architecture or capability does not.
    #[error("`{text}` is not {expected}")]
    BadArch {
        /// The text given.
        text: String,
        /// What was expected, e.g. `a device image such as sm_90a or compute_90`.
        expected: String,
    },
    /// An nvcc arch flag cannot be understood.
    #[error("nvcc flag `{flag}` cannot be understood: {reason}")]
    BadFlag {
        /// The flag as given.
        flag: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An nvcc flag leaves the architectures to nvcc (`-arch=native`,
    /// `all`, `all-major`): which images it builds cannot be told from the flags.
    #[error(
        "nvcc flag `{flag}` leaves the device code to nvcc (the visible GPUs for `native`, nvcc's \
         own list for `all` and `all-major`), so the images it builds cannot be told from the \
         flags. Name the architectures instead: TORCH_CUDA_ARCH_LIST or `-gencode` flags."
    )]
    ArchChosenByNvcc {
        /// The flag as given.
        flag: String,
    },
}
