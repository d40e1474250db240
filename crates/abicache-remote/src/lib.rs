//! The remote cache behind abicache's local store: S3, Redis or a shared
//! directory through Apache OpenDAL.
//!
//! Guarantees:
//! - **One entry blob per key** (`<prefix>/v1/<key>`): the manifest and the
//!   library in one write ([`entry_blob`]), so a reader never pairs one writer's
//!   manifest with another writer's library.
//! - **Intact downloads** ([`Remote::fetch`]): an entry is handed out only
//!   when its manifest is for the key asked for, its library name passes
//!   the local store's rule ([`abicache_store::LibraryName`]), and the
//!   library has the size and BLAKE3 the manifest records (checked by
//!   `abicache_fs`'s one comparison). Whether it may be used — its payload
//!   hashes to the key, its ed25519 signature (required, by one of
//!   `ABICACHE_TRUSTED_KEYS`, when those are set), its audit — is decided by
//!   the gate every outside entry passes (`abicache::gate`); the fetched
//!   entry carries the manifest's exact bytes and its signature for it.
//! - **Bounded downloads**: blobs are streamed to a temporary file and
//!   hashed as they arrive; at most `ABICACHE_REMOTE_MAX_SIZE` bytes
//!   (default 4 GiB) are read, and memory does not grow with the library.
//! - **Bounded waits**: every remote operation gives up after
//!   `ABICACHE_REMOTE_TIMEOUT` seconds with [`RemoteError::Timeout`].
//! - **Configuration from the resolved settings**
//!   ([`RemoteConfig::from_settings`]): `abicache-settings` reads `--remote`,
//!   then `ABICACHE_REMOTE`, then `remote` in the config file, once; this
//!   crate reads only the key files they name.
//!
//! - **Compiled objects too** ([`objects`], [`Remote::fetch_object`],
//!   [`Remote::upload_object`]): one blob per object under `v1/objects/`,
//!   checked on download against its record's name, size and BLAKE3, and —
//!   with trusted keys — a signature over that record; streamed and bounded
//!   like entries.
//!
//! Vocabulary: an *entry* is a cache entry (manifest and library, one blob
//! per key, [`entry_blob`]); an *object* is only ever a compiled object
//! ([`objects`]). The remote layout's paths (`v1/<key>`, `v1/objects/`) are
//! older than these names and stay as they are, so existing remote caches
//! remain readable.
//!
//! The crate never decides what a failure means for a load: the façade turns
//! every [`RemoteError`] into one warning and a local build.
//!
//! ```
//! use abicache_remote::{KeyPair, PublicKey};
//!
//! // What `abicache keygen` makes: a builder signs, a reader trusting the public key verifies.
//! let pair = KeyPair::generate().unwrap();
//! let signature = pair.secret.sign(b"key and manifest");
//! let trusted = PublicKey::parse(&pair.public.to_string(), "ABICACHE_TRUSTED_KEYS").unwrap();
//! assert!(trusted.verifies(b"key and manifest", &signature));
//! assert!(!trusted.verifies(b"another manifest", &signature));
//! ```

#![deny(missing_docs)]

mod client;
mod config;
pub mod entry_blob;
mod error;
mod hex;
mod object_transfer;
pub mod objects;
mod sign;
mod verify;

/// What [`verify_entry`] compares a downloaded library against its manifest with.
pub use abicache_fs::Digest;
pub use client::{Fetched, Remote, Upload, ENTRY_DIR};
pub use config::{Keys, Mode, RemoteConfig, DEFAULT_MAX_SIZE, DEFAULT_TIMEOUT};
pub use error::{RemoteError, Result};
pub use object_transfer::FetchedObject;
pub use sign::{signature_message, KeyPair, PublicKey, SecretKey, Signature};
pub use verify::{verify_entry, Rejection, Verified};

/// The variables this crate reads (defined, with their defaults and the
/// empty-value rule, in `abicache-env-vars`).
pub use abicache_env_vars::{
    ABICACHE_CONFIG, ABICACHE_REMOTE, ABICACHE_REMOTE_MAX_SIZE, ABICACHE_REMOTE_MODE,
    ABICACHE_REMOTE_TIMEOUT, ABICACHE_SIGNING_KEY, ABICACHE_TRUSTED_KEYS,
};
