//! Compiled objects through the remote cache: before a build compiles
//! anything, each unit whose object the local object cache lacks is looked
//! for in the remote (verified, then published into the object cache, where
//! the build finds and re-verifies it); after the build, the units it
//! compiled are uploaded. A second machine building an edited extension thus
//! compiles only the edited units.
//!
//! `ABICACHE_REMOTE_OBJECTS=0` turns it off (entries are still shared). As
//! with entries, every remote failure is a warning and a local compile: an
//! unreachable remote stops the object lookups of this build after the first
//! failure; a corrupt or untrusted object is refused and replaced by the
//! locally compiled one.

use std::sync::Arc;

use std::collections::BTreeSet;

use abicache_build::{BuildPlan, Toolchain, UnitObject};
use abicache_remote::{RemoteError, Upload};
use abicache_store::{Event, ObjectCache, ObjectCheck, Store};

use crate::error::Result;
use crate::remote_cache::RemoteCache;
use crate::warning::Warning;

/// One build's object traffic: what was pulled before it, for the push after.
pub(crate) struct SharedObjects<'a> {
    remote: &'a RemoteCache,
    units: Vec<UnitObject>,
    pulled: PulledObjects,
}

/// Before a build: when a remote is given and `ABICACHE_REMOTE_OBJECTS` is
/// not `0`, pulls the objects the local cache lacks ([`pull_missing`]);
/// `None` when objects are not shared.
pub(crate) fn before_build<'a>(
    remote: Option<&'a RemoteCache>,
    store: &Store,
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
        units,
        pulled,
    }))
}

impl SharedObjects<'_> {
    /// After a build: uploads the objects of the units it compiled ([`push_compiled`]).
    pub(crate) fn after_build(
        &self,
        store: &Store,
        compiled: &[String],
        warnings: &mut Vec<Warning>,
    ) {
        push_compiled(
            self.remote,
            store,
            &self.units,
            compiled,
            &self.pulled,
            warnings,
        );
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

/// Uploads the objects of the units the build compiled (`compiled`, display
/// paths), replacing those whose remote copy was rejected; skipped when the
/// remote does not take uploads or failed during this build.
fn push_compiled(
    remote: &RemoteCache,
    store: &Store,
    units: &[UnitObject],
    compiled: &[String],
    pulled: &PulledObjects,
    warnings: &mut Vec<Warning>,
) {
    if !remote.uploads() || pulled.unavailable {
        return;
    }
    let cache = object_cache(store);
    for unit in units.iter().filter(|u| compiled.contains(&u.display)) {
        // Only what the cache verified is shared.
        if cache.check(&unit.name) != ObjectCheck::Verified {
            continue;
        }
        let overwrite = pulled.rejected.contains(&unit.name);
        match remote
            .remote()
            .upload_object(&unit.name, &cache.path(&unit.name), overwrite)
        {
            Ok(Upload::Uploaded { bytes }) => {
                let _ = store.record(Event::RemoteObjectUpload { bytes });
            }
            Ok(Upload::AlreadyThere) => {}
            Err(e) => {
                let _ = store.record(Event::RemoteError);
                let unavailable = is_unavailable(&e);
                warnings.push(Warning::ObjectUpload {
                    unit: unit.display.clone(),
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
