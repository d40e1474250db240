//! What went wrong without failing a call, and what was done instead: one
//! typed value per kind, rendered to text only at the edge (the command
//! line prints each with [`std::fmt::Display`]; [`crate::Outcome`]
//! serializes each as that text, for `--json` and Python).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use abicache_remote::RemoteError;
use abicache_store::{StoreError, StoreWarning};

use crate::gate::Refused;

/// One warning of a call ([`crate::Outcome::warnings`]).
#[derive(Debug, Clone)]
pub enum Warning {
    /// A lookup found a corrupt entry and removed it.
    Corrupt(StoreWarning),
    /// The cache's counters could not be written (read-only, full): the
    /// store's text, for the first such failure of the process.
    Counters(String),
    /// The remote cache is configured wrongly; it is off for this call.
    RemoteDisabled(Arc<RemoteError>),
    /// Fetching the entry from the remote cache failed; built locally.
    RemoteFetch(Arc<RemoteError>),
    /// An entry from outside (a read-only layer, a cache wheel, the remote
    /// cache) was refused by the gate ([`crate::gate`]); built locally.
    Refused(Refused),
    /// Uploading the built entry failed; it was not uploaded.
    RemoteUpload(Arc<RemoteError>),
    /// A unit's object could not be fetched from the remote; compiled here.
    ObjectFetch {
        /// The unit (display path).
        unit: String,
        /// What failed.
        error: Arc<RemoteError>,
    },
    /// A unit's downloaded object could not be stored; compiled here.
    ObjectNotStored {
        /// The unit (display path).
        unit: String,
        /// What failed.
        error: Arc<StoreError>,
    },
    /// A unit's object could not be uploaded.
    ObjectUpload {
        /// The unit (display path).
        unit: String,
        /// What failed.
        error: Arc<RemoteError>,
    },
    /// The parallel compile jobs asked for were over the cap of this
    /// machine (the build's text: the setting, value, cap and cores).
    JobsCapped(String),
    /// The build discarded a cached object (the store's text) and compiled it.
    ObjectDiscarded(String),
    /// A precompiled header was removed (the store's text).
    PchRemoved(String),
    /// A precompiled header could not be looked up; the units compile without it.
    PchSkipped(Arc<StoreError>),
    /// A background build of a precompiled header could not be started.
    PchNotStarted {
        /// The umbrella header.
        header: String,
        /// Why.
        reason: String,
    },
    /// The shared PCH slots directory was refused (another user's, or
    /// writable by others); the slot was taken in the cache (the store's text).
    PchSlotsMoved(String),
    /// The compiler rejected a precompiled header; it was removed.
    PchRejected {
        /// Its directory.
        dir: PathBuf,
    },
    /// A read-only cache layer, or one of its entries, was skipped (the
    /// layer's text: which layer or entry, and why); shown once per process.
    Layer(String),
    /// An entry published before audits existed was audited now.
    AuditedNow {
        /// The entry's directory.
        dir: PathBuf,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Corrupt(w) => write!(f, "{w}"),
            Warning::Counters(text)
            | Warning::ObjectDiscarded(text)
            | Warning::JobsCapped(text)
            | Warning::PchSlotsMoved(text)
            | Warning::PchRemoved(text)
            | Warning::Layer(text) => f.write_str(text),
            Warning::RemoteDisabled(e) => write!(f, "remote cache disabled: {e}"),
            Warning::RemoteFetch(e) => write!(f, "remote cache: {e}; building locally"),
            Warning::Refused(refused) => write!(f, "{refused}"),
            Warning::RemoteUpload(e) => write!(f, "remote cache: {e}; the entry was not uploaded"),
            Warning::ObjectFetch { unit, error } => {
                write!(f, "remote cache: {error}; compiling `{unit}` locally")
            }
            Warning::ObjectNotStored { unit, error } => write!(
                f,
                "remote cache: cannot store the downloaded object of `{unit}`: {error}; compiling it"
            ),
            Warning::ObjectUpload { unit, error } => write!(
                f,
                "remote cache: {error}; the object of `{unit}` was not uploaded"
            ),
            Warning::PchSkipped(e) => write!(f, "precompiled header skipped: {e}"),
            Warning::PchNotStarted { header, reason } => {
                write!(f, "precompiled header for `{header}` not built: {reason}")
            }
            Warning::PchRejected { dir } => write!(
                f,
                "precompiled header `{}` was rejected by the compiler and removed; the units \
                 were compiled without it",
                dir.display()
            ),
            Warning::AuditedNow { dir } => {
                write!(f, "audited entry `{}` (it had no audit)", dir.display())
            }
        }
    }
}

/// Serialized as its text: what `--json` and Python have always shown.
impl serde::Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
