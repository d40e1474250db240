//! The right to build, replace or remove one key: a file lock on a local
//! cache, a lease on a shared one (see [`crate::lease`]).

use std::path::PathBuf;

use crate::error::Result;
use crate::layout::validate_key;
use crate::lease::{Attempt, Lease};
use crate::lock::FileLock;
use crate::store::Store;

/// The name of the cache-wide lease gc holds in shared mode (under `v1/leases/`).
pub const GC_LEASE: &str = "gc.lease";

/// Held exclusion of one key, released when dropped (or when the process
/// dies: the kernel releases a lock; a lease goes stale).
#[derive(Debug)]
pub enum KeyClaim {
    /// Local mode: the key's `flock`.
    Lock(FileLock),
    /// Shared mode: the key's lease, refreshed while held.
    Lease(Lease),
}

impl KeyClaim {
    /// Releases the claim and, for a lock, deletes its file (so `locks/`
    /// does not grow); a lease file is removed on release anyway.
    pub fn release_and_clean(self) {
        if let KeyClaim::Lock(lock) = &self {
            lock.unlink();
        }
    }

    /// True when a shared-mode lease was taken over by another process
    /// while held (this process was too slow to refresh it).
    pub fn lost(&self) -> bool {
        matches!(self, KeyClaim::Lease(lease) if lease.lost())
    }
}

impl Store {
    /// `<root>/v1/leases/<key>.lease`: the key's lease in shared mode.
    pub fn lease_path(&self, key: &str) -> PathBuf {
        self.layout()
            .version_dir()
            .join("leases")
            .join(format!("{key}.lease"))
    }

    /// `<root>/v1/leases`, created owner-only when missing.
    pub(crate) fn leases_dir(&self) -> Result<PathBuf> {
        let dir = self.layout().version_dir().join("leases");
        if !dir.is_dir() {
            crate::layout::create_dir_0700(&dir)?;
        }
        Ok(dir)
    }

    /// Takes `key`'s claim, waiting at most [`Store::lock_timeout`]: its
    /// lock on a local cache, its lease on a shared one.
    pub(crate) fn claim_key(&self, key: &str) -> Result<KeyClaim> {
        validate_key(key)?;
        if self.mode().shared {
            self.leases_dir()?;
            let lease = Lease::acquire(
                &self.lease_path(key),
                key,
                self.lease_timeout(),
                self.lock_timeout(),
            )?;
            Ok(KeyClaim::Lease(lease))
        } else {
            let lock = FileLock::acquire(&self.layout().lock_path(key), key, self.lock_timeout())?;
            Ok(KeyClaim::Lock(lock))
        }
    }

    /// Takes `key`'s claim if nobody holds it right now (a stale lease is
    /// taken over); `None` otherwise.
    pub(crate) fn try_claim_key(&self, key: &str) -> Result<Option<KeyClaim>> {
        if self.mode().shared {
            self.leases_dir()?;
            Ok(
                match Lease::try_acquire(&self.lease_path(key), self.lease_timeout())? {
                    Attempt::Taken(lease) => Some(KeyClaim::Lease(lease)),
                    Attempt::Held(_) => None,
                },
            )
        } else {
            Ok(FileLock::try_acquire(&self.layout().lock_path(key))?.map(KeyClaim::Lock))
        }
    }
}
