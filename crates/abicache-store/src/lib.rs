//! The versioned on-disk cache of abicache (SPEC §8).
//!
//! Guarantees:
//! - **Versioned layout** under `<root>/v1/` ([`Layout`]); the root is
//!   `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache`, else `~/.cache/abicache`.
//!   Directories are created owner-only; a root owned by another user or
//!   writable by others is refused.
//! - **Atomic publish**: an entry is built in a private directory, fsynced,
//!   its `manifest.json` written last, then renamed into place. An entry
//!   without its manifest does not exist; a reader never sees a partial one.
//! - **Verified hits**: a hit's library has the size and BLAKE3 its manifest
//!   records; a corrupt entry is removed, reported as a warning and missed.
//! - **One build per key**: an OS file lock the kernel releases when its
//!   holder dies, a bounded wait (`ABICACHE_LOCK_TIMEOUT`), and a re-check
//!   after acquiring ([`Store::lookup_or_lock`]).
//! - **Bounded size**: [`Store::gc`] evicts least-recently-used entries;
//!   `ABICACHE_MAX_SIZE` applies it after every publish.
//!
//! - **Shared counters** in `v1/stats.json` ([`Store::record`], [`Store::stats`]),
//!   updated under a file lock; lookups count nothing by themselves.
//! - **Bundles** ([`write_bundle`], [`UnpackedBundle`]): entries carried as one
//!   zstd-compressed tar with an index of every file's size and BLAKE3; an
//!   import is verified in full before anything is published.
//! - A minimal [`Storage`] trait (get/put by key) implemented by [`Store`], so a
//!   remote backend can later sit behind the local one.
//!
//! The store keeps payloads and keys as opaque text; it knows nothing of how
//! keys are computed or libraries built.

#![deny(missing_docs)]

mod bundle;
pub mod env;
mod error;
mod gc;
mod layout;
mod lock;
mod manifest;
mod publish;
mod size;
mod stats;
mod storage;
mod store;
mod warning;

pub use bundle::{
    write_bundle, BundleEntry, BundleError, BundleFile, BundleIndex, Imported, StagedEntry,
    UnpackedBundle, BUNDLE_FORMAT,
};
pub use error::{Result, StoreError};
pub use gc::{Evicted, GcReport, STALE_TEMP_AGE};
pub use layout::{
    resolve_root, root_from_env, validate_key, Layout, CACHEDIR_TAG, LAST_USED_FILE,
    LAYOUT_VERSION, MANIFEST_FILE,
};
pub use lock::{
    describe_holder, lock_timeout_from_env, parse_lock_timeout, FileLock, DEFAULT_LOCK_TIMEOUT,
};
pub use manifest::Manifest;
pub use publish::{BuildGuard, Published};
pub use size::{max_size_from_env, parse_size};
pub use stats::{Counters, Event, Stats};
pub use storage::{Storage, StoredEntry};
pub use store::{Claim, EntryInfo, Hit, Lookup, Store};
pub use warning::{Corruption, StoreWarning};
