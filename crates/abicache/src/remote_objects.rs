//! Compiled objects through the remote cache: before a build compiles
//! anything, each unit whose object the local object cache lacks is looked
//! for in the remote (verified, then published into the object cache, where
//! the build finds and re-verifies it); after the build, the units it
//! compiled are uploaded. A second machine building an edited extension thus
//! compiles only the edited units.
//!
//! CUDA device steps (`<key>.cudev`, one architecture's `cicc` and `ptxas`)
//! travel the same way, but their keys are known only inside the build,
//! once a unit's device source is preprocessed: the build asks
//! [`SharedObjects`] (its [`DeviceStepSource`]) for each step its object
//! cache lacks, which fetches, verifies and publishes it exactly as a unit
//! object, and tells it the steps it compiled, uploaded after the build.
//!
//! `ABICACHE_REMOTE_OBJECTS=0` turns it off (entries are still shared). As
//! with entries, every remote failure is a warning and a local compile: an
//! unreachable remote stops the object lookups of this build after the first
//! failure; a corrupt or untrusted object is refused and replaced by the
//! locally compiled one.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use abicache_build::{BuildPlan, DeviceStepSource, Toolchain, UnitObject};
use abicache_remote::{RemoteError, Upload};
use abicache_store::{Event, ObjectCache, ObjectCheck, Store};

use crate::error::Result;
use crate::remote_cache::RemoteCache;
use crate::warning::Warning;

/// One build's object traffic: what was pulled before it and the device
/// steps fetched and compiled during it, for the push after.
pub(crate) struct SharedObjects<'a> {
    remote: &'a RemoteCache,
    store: &'a Store,
    units: Vec<UnitObject>,
    pulled: PulledObjects,
    device_steps: Mutex<DeviceStepTraffic>,
}

/// The device-step traffic of one build ([`DeviceStepSource`]).
#[derive(Debug, Default)]
struct DeviceStepTraffic {
    /// Names of the steps the build compiled, in order, for the upload.
    compiled: Vec<String>,
    /// Steps whose remote copy was refused: the local one replaces them.
    rejected: BTreeSet<String>,
    /// Warnings from the compile threads, handed over after the build.
    warnings: Vec<Warning>,
    /// The remote failed: no more device-step traffic in this build.
    unavailable: bool,
}

/// Before a build: when a remote is given and `ABICACHE_REMOTE_OBJECTS` is
/// not `0`, pulls the objects the local cache lacks ([`pull_missing`]);
/// `None` when objects are not shared.
pub(crate) fn before_build<'a>(
    remote: Option<&'a RemoteCache>,
    store: &'a Store,
    plan: &BuildPlan,
    toolchain: &Toolchain,
    warnings: &mut Vec<Warning>,
) -> Result<Option<SharedObjects<'a>>> {
    let Some(remote) = remote else {
        return Ok(None);
    };
    let units = abicache_build::unit_objects(plan, toolchain)?;
    let pulled = pull_missing(remote, store, &units, warnings);
    Ok(Some(SharedObjects {
        remote,
        store,
        units,
        pulled,
        device_steps: Mutex::default(),
    }))
}

impl SharedObjects<'_> {
    /// After a build: uploads the objects of the units it compiled and the
    /// device steps it compiled ([`push_compiled`]); `warnings` gets the
    /// device-step warnings of the build too.
    pub(crate) fn after_build(&self, compiled: &[String], warnings: &mut Vec<Warning>) {
        let mut steps = self.traffic();
        warnings.append(&mut steps.warnings);
        let units = self
            .units
            .iter()
            .filter(|u| compiled.contains(&u.display))
            .map(|u| (u.name.as_str(), u.display.as_str()));
        let steps_compiled = steps.compiled.iter().map(|n| (n.as_str(), n.as_str()));
        let rejected =
            |name: &str| self.pulled.rejected.contains(name) || steps.rejected.contains(name);
        if !self.pulled.unavailable && !steps.unavailable {
            push_compiled(
                self.remote,
                self.store,
                units.chain(steps_compiled),
                &rejected,
                warnings,
            );
        }
    }

    /// Hands over the warnings of a build that failed (nothing is uploaded).
    pub(crate) fn take_warnings(&self) -> Vec<Warning> {
        std::mem::take(&mut self.traffic().warnings)
    }

    fn traffic(&self) -> std::sync::MutexGuard<'_, DeviceStepTraffic> {
        // A compile thread that panicked leaves plain data behind: still usable.
        self.device_steps
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl DeviceStepSource for SharedObjects<'_> {
    /// Fetches the step `name` from the remote, verified exactly as a unit
    /// object (size and BLAKE3 of its record, the trusted keys' signature),
    /// and publishes it into `cache`. A refused step is compiled here and
    /// replaces the remote copy after the build; an unreachable remote ends
    /// the device-step lookups of this build.
    fn fetch(&self, name: &str, cache: &ObjectCache) -> bool {
        if self.pulled.unavailable || self.traffic().unavailable {
            return false;
        }
        match self.remote.remote().fetch_object(name, cache.dir()) {
            Ok(None) => false,
            Ok(Some(fetched)) => match cache.publish(name, &fetched.path) {
                Ok(_) => {
                    // Renamed into place: nothing left for the temporary path to delete.
                    let _ = fetched.path.keep();
                    let _ = self.store.record(Event::RemoteObjectHit {
                        bytes: fetched.bytes,
                    });
                    true
                }
                Err(e) => {
                    self.traffic().warnings.push(Warning::ObjectNotStored {
                        unit: name.to_string(),
                        error: Arc::new(e),
                    });
                    false
                }
            },
            Err(e) => {
                let _ = self.store.record(Event::RemoteError);
                let unavailable = is_unavailable(&e);
                let mut traffic = self.traffic();
                traffic.warnings.push(Warning::ObjectFetch {
                    unit: name.to_string(),
                    error: Arc::new(e),
                });
                if unavailable {
                    traffic.unavailable = true;
                } else {
                    traffic.rejected.insert(name.to_string());
                }
                false
            }
        }
    }

    fn compiled(&self, name: &str) {
        self.traffic().compiled.push(name.to_string());
    }
}

/// What [`pull_missing`] did, for the upload after the build.
#[derive(Debug, Default)]
pub(crate) struct PulledObjects {
    /// Objects downloaded and published into the object cache.
    pub downloaded: usize,
    /// Objects whose remote copy was refused: the local compile replaces them.
    pub rejected: BTreeSet<String>,
    /// The remote failed: no more object traffic in this build.
    pub unavailable: bool,
}

/// Fetches from the remote every object of `units` the local object cache
/// does not hold verified, and publishes it there.
fn pull_missing(
    remote: &RemoteCache,
    store: &Store,
    units: &[UnitObject],
    warnings: &mut Vec<Warning>,
) -> PulledObjects {
    let mut pulled = PulledObjects::default();
    let cache = object_cache(store);
    if fs_err::create_dir_all(cache.dir()).is_err() {
        return pulled;
    }
    for unit in units {
        if cache.check(&unit.name) == ObjectCheck::Verified {
            continue;
        }
        match remote.remote().fetch_object(&unit.name, cache.dir()) {
            Ok(None) => {}
            Ok(Some(fetched)) => match cache.publish(&unit.name, &fetched.path) {
                Ok(_) => {
                    // Renamed into place: nothing left for the temporary path to delete.
                    let _ = fetched.path.keep();
                    pulled.downloaded += 1;
                    let _ = store.record(Event::RemoteObjectHit {
                        bytes: fetched.bytes,
                    });
                }
                Err(e) => warnings.push(Warning::ObjectNotStored {
                    unit: unit.display.clone(),
                    error: Arc::new(e),
                }),
            },
            Err(e) => {
                let _ = store.record(Event::RemoteError);
                let unavailable = is_unavailable(&e);
                warnings.push(Warning::ObjectFetch {
                    unit: unit.display.clone(),
                    error: Arc::new(e),
                });
                if unavailable {
                    pulled.unavailable = true;
                    break;
                }
                pulled.rejected.insert(unit.name.clone());
            }
        }
    }
    pulled
}

/// Uploads the objects the build compiled (`compiled`: `(object name,
/// what the warnings call it)`), replacing those whose remote copy was
/// `rejected`; skipped when the remote does not take uploads.
fn push_compiled<'n>(
    remote: &RemoteCache,
    store: &Store,
    compiled: impl Iterator<Item = (&'n str, &'n str)>,
    rejected: &dyn Fn(&str) -> bool,
    warnings: &mut Vec<Warning>,
) {
    if !remote.uploads() {
        return;
    }
    let cache = object_cache(store);
    for (name, display) in compiled {
        // Only what the cache verified is shared.
        if cache.check(name) != ObjectCheck::Verified {
            continue;
        }
        match remote
            .remote()
            .upload_object(name, &cache.path(name), rejected(name))
        {
            Ok(Upload::Uploaded { bytes }) => {
                let _ = store.record(Event::RemoteObjectUpload { bytes });
            }
            Ok(Upload::AlreadyThere) => {}
            Err(e) => {
                let _ = store.record(Event::RemoteError);
                let unavailable = is_unavailable(&e);
                warnings.push(Warning::ObjectUpload {
                    unit: display.to_string(),
                    error: Arc::new(e),
                });
                if unavailable {
                    return;
                }
            }
        }
    }
}

fn object_cache(store: &Store) -> ObjectCache {
    let dir = store.objects_dir();
    // As the build does: records are staged in the objects directory itself.
    ObjectCache::new(&dir, &dir)
}

fn is_unavailable(e: &RemoteError) -> bool {
    e.is_unavailable() || matches!(e, RemoteError::Io(_) | RemoteError::ReadOnly { .. })
}
