//! The versioned on-disk cache of abicache (docs/cache.md).
//!
//! Guarantees:
//! - **Versioned layout** under `<root>/v1/` ([`Layout`]); the root is
//!   `ABICACHE_DIR`, else `$XDG_CACHE_HOME/abicache`, else `~/.cache/abicache`.
//!   Directories are created owner-only; a root owned by another user or
//!   writable by others is refused.
//! - **Atomic publish**: an entry is built in a private directory, fsynced,
//!   its `manifest.json` written last, then renamed into place. An entry
//!   without its manifest does not exist; a reader never sees a partial one.
//! - **Verified hits**: a hit's entry directory is private (owned by the
//!   user, not writable by others, not a symlink) and its library has the
//!   size and BLAKE3 its manifest records, checked in full the first time
//!   and then through a stat stamp (`verified.json`, see
//!   [`abicache_fs::FileStamp`]) so a hit does not cost a re-hash; a corrupt
//!   entry is removed, reported as a warning and missed. Nothing is read
//!   through a symlink or from a FIFO.
//! - **Verified objects**: [`ObjectCache`] records each compiled object's
//!   size and BLAKE3 when it is published (fsynced) and checks it the same
//!   way before it is linked; a bad object is removed with a warning.
//! - **One build per key**: an OS file lock the kernel releases when its
//!   holder dies, a bounded wait (`ABICACHE_LOCK_TIMEOUT`), and a re-check
//!   after acquiring ([`Store::lookup_or_lock`]).
//! - **Bounded size, safe for readers**: [`Store::gc`] evicts
//!   least-recently-used entries and objects, never one used in the last
//!   `ABICACHE_GC_GRACE` seconds (60) nor one whose key lock is held;
//!   `ABICACHE_MAX_SIZE` applies it after every publish.
//! - **Precompiled headers** under `v1/pch/<key>/` ([`Store::pch_lookup`]): built
//!   privately, adopted with a manifest, verified (files and the headers they were
//!   compiled from) before use, evicted by gc after the objects.
//! - **Owner-only**: every directory of the layout must be owned by the
//!   user and not writable by others (else the root is refused); files are
//!   written 0600 and libraries and directories 0700, whatever the umask.
//! - **Best-effort counters** ([`Store::count`], [`Store::stats`]): one
//!   append to `v1/stats.log` per counted call, folded into `v1/stats.json`
//!   now and then; a read-only or full cache skips them with one warning.
//! - **Shared mode** ([`CacheMode`], README "Shared cache on a cluster
//!   filesystem"): on a network or cluster filesystem (or with
//!   `ABICACHE_SHARED=on`) nothing relies on a lock holding across nodes:
//!   builds and gc take leases ([`Lease`]) that a dead node holds no longer
//!   than `ABICACHE_LEASE_TIMEOUT`; a half-visible entry is a miss, never
//!   deleted; counters go to one log per host; every hit re-hashes the
//!   library (no stat stamp is trusted, so a file replaced from another
//!   node is never served); gc spares what any node used within its grace.
//! - **Read-only layers** ([`ReadOnlyLayer`]): other caches consulted after
//!   this one and never written (no counters, `last-used`, locks or stamps);
//!   an entry is served in place only when owned by root or the user, not
//!   writable by others, and its manifest, size and BLAKE3 verify (hashed
//!   once per process, then remembered by stat stamp in memory).
//! - **Generated sources** (`load_inline`) stored by content under
//!   `v1/sources/<digest>/` ([`Store::store_generated_sources`]): written
//!   atomically, never rewritten when intact, replaced when corrupt.
//! - **An arch-free index** (`v1/arch-index/`, [`Store::arch_free_entries`]):
//!   the entries that differ only in their CUDA arch list, with their device
//!   images; derived from the manifests at each publish, rebuildable, and
//!   only ever naming candidates that are then verified like any lookup.
//! - **Bundles** ([`write_bundle`], [`UnpackedBundle`]): entries carried as one
//!   zstd-compressed tar with an index of every file's size and BLAKE3; an
//!   import is verified in full before anything is published.
//!
//! The store keeps payloads and keys as opaque text; it knows nothing of how
//! keys are computed or libraries built.
//!
//! ```
//! use abicache_store::{parse_size, Store, CACHEDIR_TAG};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("cache")).unwrap();
//! let tag = std::fs::read_to_string(store.root().join("CACHEDIR.TAG")).unwrap();
//! assert_eq!(tag, CACHEDIR_TAG);
//! assert!(store.list().unwrap().is_empty());
//! assert!(store.lookup(&"0".repeat(32)).unwrap().hit.is_none());
//! assert_eq!(parse_size("2G").unwrap(), 2 << 30);
//! ```

#![deny(missing_docs)]

mod arch_index;
mod bundle;
mod entry_stamp;
pub mod env;
mod error;
mod gc;
mod host;
mod key_claim;
mod last_used;
mod layout;
mod lease;
mod library_name;
mod lock;
mod manifest;
mod objects;
mod pch;
mod pch_budget;
mod peaks;
mod private_file;
mod provenance;
mod publish;
mod readonly;
mod shared_mode;
mod size;
mod sources;
mod sources_gc;
mod stats;
mod stats_log;
mod store;
mod warm_hit;
mod warning;

pub use arch_index::{arch_free_key, entry_images, ArchIndexed, ARCH_INDEX_DIR};
pub use bundle::{
    write_bundle, BundleEntry, BundleFile, BundleIndex, BundleLimits, BundleMeta, Imported,
    StagedEntry, UnpackedBundle, BUNDLE_FORMAT,
};
pub use error::{BundleError, Result, StoreError};
pub use gc::{parse_gc_grace, Evicted, GcReport, DEFAULT_GC_GRACE, STALE_TEMP_AGE};
pub use host::HostId;
pub use key_claim::{KeyClaim, GC_LEASE};
pub use layout::{
    resolve_root, root_from_env, trusted_owner, validate_key, Layout, CACHEDIR_TAG, LAST_USED_FILE,
    LAYOUT_VERSION, MANIFEST_FILE, MANIFEST_FORMAT, MATRIX_RUN_LOCK, STAMP_FILE,
};
pub use lease::{
    Attempt as LeaseAttempt, Lease, LeaseHolder, ObservedLease, CLOCK_SKEW_ALLOWANCE, MARKER_AGE,
};
pub use library_name::{LibraryName, MAX_LIBRARY_NAME_LEN};
pub use lock::{describe_holder, parse_lock_timeout, FileLock, DEFAULT_LOCK_TIMEOUT};
pub use manifest::{Manifest, MAX_MANIFEST_SIZE};
pub use objects::{ObjectCache, ObjectCheck, OBJECT_RECORD_SUFFIX};
pub use pch::{PchLookup, PchPaths, PCH_FAILED_RETRY};
pub use pch_budget::{
    parse_jobs as parse_pch_jobs, MachineSlots, PchPermit, PchSkip, DEFAULT_PCH_JOBS,
    DEFAULT_PCH_MAX_SIZE, PCH_DEMAND_MAX_AGE, PCH_NEEDS_BEFORE_BUILD,
};
pub use peaks::{peak_key, PeakRecords, PEAKS_DIR};
pub use provenance::{Provenance, PROVENANCE_FILE};
pub use publish::{BuildGuard, Published};
pub use readonly::{
    LayerLookup, LayerWarning, ReadOnlyLayer, LAYER_INDEX_FILE, LAYER_SIGNATURE_FILE,
};
pub use shared_mode::{classify, filesystem_of, CacheMode, Filesystem, NETWORK_FILESYSTEMS};
pub use size::parse_size;
pub use sources::{sources_dir_for, GeneratedFile, SOURCES_DIR};
pub use stats::{Counters, DeviceStepCounts, Event, Stats};
pub use store::{key_matches, Claim, EntryInfo, Hit, Lookup, Store};
pub use warm_hit::HitRecipe;
pub use warning::{Corruption, StoreWarning};
