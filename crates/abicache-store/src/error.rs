//! The one error type of the crate.

use std::path::{Path, PathBuf};

/// Every failure of the store, with a message that says what happened and
/// what to do about it. Paths are shown in backticks.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O operation failed; the message (from `fs-err`) names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),

    /// A file of the cache could not be opened or read safely (missing, a
    /// FIFO, a symlink, too large); the message names the path.
    #[error(transparent)]
    Fs(#[from] abicache_fs::FsError),

    /// An I/O operation failed on a path that the underlying error does not name.
    #[error("failed to {action} `{p}`: {source}", p = .path.display())]
    IoAt {
        /// What was being done, e.g. "lock".
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// No cache root could be derived from the environment.
    #[error(
        "cannot find a cache directory: none of `ABICACHE_DIR`, `XDG_CACHE_HOME` or `HOME` is set; \
         set `ABICACHE_DIR` to the directory abicache should use"
    )]
    NoCacheDir,

    /// The cache root (or its `v1` directory) is owned by another user.
    #[error(
        "refusing to use cache directory `{p}`: it is owned by uid {owner}, but abicache runs as uid {uid}; \
         another user could replace the binaries it loads. Use a directory you own: set `ABICACHE_DIR`, \
         or `chown {uid} {p}`"
    , p = .path.display())]
    ForeignOwner {
        /// The refused directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The uid of this process.
        uid: u32,
    },

    /// The cache root (or its `v1` directory) is writable by group or others.
    #[error(
        "refusing to use cache directory `{p}`: its mode is {mode:04o}, writable by other users, \
         who could replace the binaries it loads. Run `chmod 700 {p}`, or set `ABICACHE_DIR` to a private directory"
    , p = .path.display())]
    InsecureMode {
        /// The refused directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },

    /// A directory above the cache can be written by others (no sticky bit).
    #[error(
        "refusing the cache `{r}`: `{d}` above it has mode {mode:04o}, so other users can rename \
         the cache away and put their own binaries in its place between a check and a load. Set \
         `ABICACHE_DIR` to a directory under one only you can write, or `chmod go-w {d}` (or \
         `chmod +t {d}`)",
        r = .root.display(),
        d = .dir.display()
    )]
    InsecureAncestor {
        /// The cache root.
        root: PathBuf,
        /// The directory others can write.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },

    /// A path that must be a directory is something else.
    #[error("`{p}` is not a directory; remove it or set `ABICACHE_DIR` to another cache directory", p = .path.display())]
    NotADirectory {
        /// The offending path.
        path: PathBuf,
    },

    /// A generated source file name (`load_inline`) that is not a plain file name.
    #[error("invalid generated source file name `{name}`: it must be a plain file name of `[A-Za-z0-9_.-]` not starting with `.`")]
    InvalidSourceName {
        /// The rejected name.
        name: String,
    },

    /// Generated sources kept being replaced or corrupted while being stored.
    #[error(
        "cannot store generated sources in `{p}`: the directory kept changing while it was written; \
         is another process writing into the cache? Remove `{p}` and retry, or set `ABICACHE_DIR` to a private directory"
    , p = .dir.display())]
    SourcesUnstable {
        /// The sources directory.
        dir: PathBuf,
    },

    /// The bounded wait for a key's lock ran out.
    #[error(
        "timed out after {timeout:?} waiting for the lock on cache key `{key}` (`{p}`), held by {holder}; \
         is that process still building? Wait for it or end it, or set `ABICACHE_LOCK_TIMEOUT` (seconds) to wait longer"
    , p = .path.display())]
    LockTimeout {
        /// The key (or other resource) whose lock was awaited.
        key: String,
        /// The lock file.
        path: PathBuf,
        /// The configured time-out.
        timeout: std::time::Duration,
        /// Who holds it, as read from the lock file (e.g. "pid 1234 on host x").
        holder: String,
    },

    /// Shared mode: another node's (or process's) gc holds the cache-wide
    /// gc lease; two collections never run at once.
    #[error(
        "another gc is collecting this shared cache (`{p}`): {holder}; run gc again once it          is done (a dead holder's lease expires after `ABICACHE_LEASE_TIMEOUT` seconds)"
    , p = .path.display())]
    GcBusy {
        /// The gc lease file.
        path: PathBuf,
        /// Who holds it, in words.
        holder: String,
    },

    /// A setting of the store has a value that cannot be used (checked by
    /// `abicache-settings`, which names the variable and what to set).
    #[error(transparent)]
    Settings(#[from] abicache_settings::SettingsError),

    /// A size like `10G` could not be parsed.
    #[error(
        "invalid size `{value}`: expected a number of bytes with an optional unit, e.g. `123`, `500M`, `10G`, `1.5GiB` \
         (K/M/G/T, Ki/Mi/Gi/Ti and KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000)"
    )]
    BadSize {
        /// The text given.
        value: String,
    },

    /// A cache key that is not a plain file name.
    #[error("invalid cache key `{key}`: a key is 1 to 128 characters of `[A-Za-z0-9_-]` (the hex BLAKE3 of a payload)")]
    InvalidKey {
        /// The rejected key.
        key: String,
    },

    /// A library file name that breaks the one rule ([`crate::LibraryName`]).
    #[error(
        "invalid library file name `{name}`: {reason}; a library is named like `<extension>.so` \
             (1 to 255 characters of `A-Z a-z 0-9 _ . + -`, not starting with `.`); \
             an entry whose manifest names anything else is corrupt"
    )]
    InvalidLibraryName {
        /// The rejected name (escaped).
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },

    /// `publish` was asked to publish a library that is not in the build directory.
    #[error("cannot publish cache key `{key}`: the library `{p}` does not exist; build it into `BuildGuard::temp_dir()` first", p = .path.display())]
    MissingLibrary {
        /// The key being published.
        key: String,
        /// The expected library path.
        path: PathBuf,
    },

    /// A manifest given to `publish`/`put` names a different key than the one locked.
    #[error("cannot publish: the manifest is for key `{manifest_key}` but the build holds the lock for key `{key}`")]
    KeyMismatch {
        /// The locked key.
        key: String,
        /// The key in the manifest.
        manifest_key: String,
    },

    /// Something other than a regular file sits where the store keeps one of
    /// its own files (a lock file, `stats.json`, ...): every call would fail.
    #[error(
        "`{p}` is a {kind} where abicache keeps a file of its own; remove it (`rm -r {p}`) and try again"
    , p = .path.display())]
    Squatted {
        /// The path at fault.
        path: PathBuf,
        /// What is there instead ("directory", "symbolic link", ...).
        kind: &'static str,
    },

    /// A JSON document (manifest, stats) could not be written or read.
    #[error("failed to {action} `{p}`: {source}", p = .path.display())]
    Json {
        /// "write" or "parse".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The serde error.
        source: serde_json::Error,
    },

    /// A bundle could not be exported or imported.
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// What is wrong with a bundle; any of these means nothing was imported.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The bytes are damaged, truncated, tampered with, or not a bundle.
    #[error(
        "the bundle is damaged or is not an abicache bundle: {0}; nothing was imported. \
         Copy it again, or re-create it with `abicache export -o FILE` where the entries were built"
    )]
    Corrupt(String),
    /// The bundle's format is newer than this abicache reads.
    #[error(
        "the bundle has format {found}, but this abicache reads format {reads}; \
         nothing was imported. Export it with the same abicache release that imports it"
    )]
    Format {
        /// The format found in the index.
        found: u32,
        /// The format this abicache reads (`BUNDLE_FORMAT`).
        reads: u32,
    },
    /// The bundle, or what its index lists, is larger than the reader allows.
    #[error(
        "refusing to import the bundle: {0} (at most a quarter of the space free under the \
         cache's `v1/tmp/`); nothing was imported. Free some space, or split the bundle \
         (`abicache export -o FILE NAME...`)"
    )]
    TooLarge(String),
    /// Exporting was asked for nothing.
    #[error("nothing to export: the cache has no entry (build or prebuild some first)")]
    Empty,
}

/// The crate's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// True when the error is a file that does not exist.
    pub fn is_not_found(&self) -> bool {
        match self {
            StoreError::Io(e) | StoreError::IoAt { source: e, .. } => {
                e.kind() == std::io::ErrorKind::NotFound
            }
            StoreError::Fs(e) => e.is_not_found(),
            _ => false,
        }
    }

    /// True when waiting for another process's lock timed out.
    pub fn is_lock_timeout(&self) -> bool {
        matches!(self, StoreError::LockTimeout { .. })
    }

    /// The error for opening one of the store's own files at `path`, which
    /// failed with `source`: [`StoreError::Squatted`] when a directory or a
    /// symlink sits there, else [`StoreError::IoAt`].
    pub(crate) fn opening(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        let kind = match source.raw_os_error() {
            Some(libc::EISDIR) => Some("directory"),
            Some(libc::ELOOP) => Some("symbolic link"),
            _ => None,
        };
        match kind {
            Some(kind) => StoreError::Squatted {
                path: path.to_owned(),
                kind,
            },
            None => StoreError::io_at(action, path)(source),
        }
    }

    /// Wraps an I/O error from a `std` call with the action and path.
    pub(crate) fn io_at(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::IoAt {
            action,
            path,
            source,
        }
    }
}
