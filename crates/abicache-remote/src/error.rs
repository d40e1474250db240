//! The one error type of the crate.

use std::time::Duration;

/// Result with [`RemoteError`].
pub type Result<T, E = RemoteError> = std::result::Result<T, E>;

/// Every failure of the remote cache, with a message that says what happened
/// and what to do. The façade shows any of them as one warning line and
/// builds locally; only `push`, `pull` and `keygen` fail with them.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The remote URL cannot be used.
    #[error(
        "invalid remote cache URL `{url}`: {reason}; set `ABICACHE_REMOTE` (or `--remote`, or `remote` in the config file) \
         to `s3://BUCKET/PREFIX`, `redis://HOST:PORT/DB` or `file:///PATH`"
    )]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A setting of the environment or the config file cannot be used.
    #[error(transparent)]
    Settings(#[from] abicache_settings::SettingsError),

    /// A public or secret key cannot be parsed.
    #[error("invalid ed25519 {what} in {origin}: {reason}; keys are 64 hex digits, as `abicache keygen` prints them")]
    InvalidKey {
        /// `public key` or `secret key`.
        what: &'static str,
        /// Where it came from (`ABICACHE_TRUSTED_KEYS`, a file).
        origin: String,
        /// What is wrong.
        reason: String,
    },

    /// The backend refused or failed an operation.
    #[error("remote cache `{url}` failed to {action} `{blob}`: {source}")]
    Backend {
        /// The remote's URL.
        url: String,
        /// What was being done (`read`, `write`, `stat`, `list`).
        action: &'static str,
        /// The blob's path inside the remote.
        blob: String,
        /// OpenDAL's error (boxed: it is large).
        source: Box<opendal::Error>,
    },

    /// The server refused or could not be reached at all.
    #[error("remote cache `{url}` is unreachable: {reason}; is the server running? Check the URL (`ABICACHE_REMOTE` or `--remote`)")]
    Unreachable {
        /// The remote's URL.
        url: String,
        /// The connection error.
        reason: String,
    },

    /// An operation did not finish within the time-out.
    #[error(
        "remote cache `{url}` did not answer within {timeout:?} (while trying to {action} `{blob}`); \
         is the server reachable? Set `ABICACHE_REMOTE_TIMEOUT` (seconds) to wait longer"
    )]
    Timeout {
        /// The remote's URL.
        url: String,
        /// What was being done.
        action: &'static str,
        /// The blob's path inside the remote.
        blob: String,
        /// The time-out that ran out.
        timeout: Duration,
    },

    /// A downloaded entry failed verification; it was not used.
    #[error("remote entry `{blob}` on `{url}` is corrupt: {reason}; it was not used")]
    Corrupt {
        /// The remote's URL.
        url: String,
        /// The blob's path inside the remote.
        blob: String,
        /// What did not match.
        reason: String,
    },

    /// A remote blob is larger than `ABICACHE_REMOTE_MAX_SIZE`; the
    /// download stopped there and nothing was used.
    #[error(
        "remote entry `{blob}` on `{url}` is larger than the {cap}-byte limit (at least {size} bytes); \
         it was not used. Set `ABICACHE_REMOTE_MAX_SIZE` (e.g. `8G`) to allow larger libraries"
    )]
    TooLarge {
        /// The remote's URL.
        url: String,
        /// The blob's path inside the remote.
        blob: String,
        /// Bytes announced or read when the download stopped.
        size: u64,
        /// The limit.
        cap: u64,
    },

    /// A downloaded entry lacks a valid signature by a trusted key; it was not used.
    #[error(
        "remote entry `{blob}` on `{url}` is not trusted: {reason}; it was not used. \
         Sign uploads with `ABICACHE_SIGNING_KEY`, or add the signer's public key to `ABICACHE_TRUSTED_KEYS`"
    )]
    Untrusted {
        /// The remote's URL.
        url: String,
        /// The blob's path inside the remote.
        blob: String,
        /// Why the signature was not accepted.
        reason: String,
    },

    /// An upload was asked of a read-only remote.
    #[error("remote cache `{url}` is read-only (`ABICACHE_REMOTE_MODE=read-only`); set `ABICACHE_REMOTE_MODE=read-write` to upload")]
    ReadOnly {
        /// The remote's URL.
        url: String,
    },

    /// The backend cannot list objects, which finding entries by name needs.
    #[error("remote cache `{url}` cannot list its entries, so entries cannot be found by name there; pass their keys instead")]
    CannotList {
        /// The remote's URL.
        url: String,
    },

    /// A local entry to upload is gone or failed verification.
    #[error("local entry `{key}` is gone or corrupt, so it was not uploaded; build it again (`abicache build`), then push")]
    LocalEntryMissing {
        /// The entry's key.
        key: String,
    },

    /// The async runtime the client runs on could not start.
    #[error("cannot start the remote cache client: {0}")]
    Runtime(std::io::Error),

    /// A local I/O operation failed; the message (from `fs-err`) names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),

    /// The local store failed.
    #[error(transparent)]
    Store(#[from] abicache_store::StoreError),
}

impl RemoteError {
    /// True for failures of the remote itself (unreachable, timed out,
    /// refused): after one, a caller should not try the remote again in the
    /// same call. False for a bad entry, which says nothing of the server.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            RemoteError::Backend { .. }
                | RemoteError::Timeout { .. }
                | RemoteError::Unreachable { .. }
                | RemoteError::Runtime(_)
        )
    }
}
