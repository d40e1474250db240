//! The precompiled-header policy: which PCHs a build uses, and when one is built.
//!
//! The rule (`ABICACHE_PCH`, default `auto`):
//! - a build uses every PCH its units can use that is already built and verified;
//! - it never waits for one: a PCH that is missing is only *needed* by a build that
//!   compiled at least one unit starting with its umbrella header; the first build to need
//!   it records the need, the second starts it, after it published, in a detached
//!   low-priority background process, and the next build (in any process) uses it once it
//!   is finished;
//! - a start is bounded (`abicache_store::PchSkip` names why one is skipped): at most one
//!   PCH compile per cache at a time, at most `ABICACHE_PCH_JOBS` (default 1) per user on
//!   the machine, none for a PCH that alone was larger than the cap; a PCH that is being
//!   built, or whose build failed in the last day, is not started again;
//! - PCHs are kept under a cap (`ABICACHE_PCH_MAX_SIZE`, default a quarter of
//!   `ABICACHE_MAX_SIZE`, else 2 GiB): each newly adopted one evicts the least recently
//!   used ones until the total fits;
//! - a PCH the compiler rejects, or whose files or headers changed, is removed (with a
//!   warning) and rebuilt in the background the same way;
//! - `ABICACHE_PCH=0` turns all of it off.
//!
//! Every start, finish, skip and eviction is counted (`abicache stats`).

use std::sync::Arc;

use abicache_build::{pch, PchRequest, PchSlot, ReadyPch};
use abicache_store::{Event, MachineSlots, PchLookup, PchSkip, Store};

use crate::warning::Warning;

/// Whether PCHs are used and built (`ABICACHE_PCH`), as the settings resolved it.
pub use abicache_settings::PchMode;

/// The PCHs of one build: those ready to use and those to start after it.
#[derive(Debug, Default)]
pub struct PchPlan {
    /// Verified PCHs, with the units that use them.
    pub ready: Vec<ReadyPch>,
    /// Requests without a PCH and without a build of one under way.
    pub missing: Vec<PchRequest>,
}

/// What [`start_missing`] did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PchStart {
    /// Its background build was started.
    Started,
    /// It was not started, for this reason.
    Skipped(PchSkip),
}

/// Looks up every request: ready ones (adopting finished background builds, counting
/// them as finished and evicting the least recently used PCHs beyond the cap), missing
/// ones; store problems are warnings, never a failed build.
pub fn resolve(store: &Store, requests: Vec<PchRequest>, warnings: &mut Vec<Warning>) -> PchPlan {
    let mut plan = PchPlan::default();
    for request in requests {
        let mut found = store.pch_lookup(&request.key, &request.dir);
        if let Ok(PchLookup::Unadopted(dir)) = &found {
            let depfile = dir.join(pch::PCH_DEPFILE);
            let deps = std::fs::read_to_string(&depfile)
                .map(|text| pch::parse_depfile(&text))
                .unwrap_or_default();
            found = store.pch_adopt(&request.key, &deps, &request.dir);
            if let Ok(PchLookup::Ready(dir)) = &found {
                let evicted = store.pch_enforce_cap().len() as u64;
                let mut events = vec![Event::PchFinished];
                if evicted > 0 {
                    events.push(Event::PchEvicted(evicted));
                }
                warnings.extend(store.count(&events).map(Warning::Counters));
                if !dir.is_dir() {
                    // Larger than the cap on its own: removed, and not rebuilt.
                    continue;
                }
            }
        }
        match found {
            Ok(PchLookup::Ready(dir)) => plan.ready.push(ReadyPch {
                key: request.key,
                dir,
                units: request.units,
            }),
            Ok(PchLookup::Missing) => plan.missing.push(request),
            Ok(PchLookup::Removed(warning)) => {
                warnings.push(Warning::PchRemoved(warning));
                plan.missing.push(request);
            }
            Ok(PchLookup::Busy | PchLookup::Failed(_) | PchLookup::Unadopted(_)) => {}
            Err(e) => warnings.push(Warning::PchSkipped(Arc::new(e))),
        }
    }
    plan
}

/// For each `missing` request whose units were compiled in this build (`compiled`:
/// display paths), records the need and starts its background build when the rules of
/// the module docs allow (`slots`: the machine's PCH slots). Returns what happened to each
/// such request, in order; counts it. Failures to start are warnings.
pub fn start_missing(
    store: &Store,
    missing: &[PchRequest],
    compiled: &[String],
    slots: &MachineSlots,
    warnings: &mut Vec<Warning>,
) -> Vec<(String, PchStart)> {
    let mut outcomes = Vec::new();
    let mut notices = Vec::new();
    for request in missing {
        if !request.units.iter().any(|u| compiled.contains(u)) {
            continue;
        }
        let started = store
            .pch_record_need(&request.key)
            .and_then(|needs| store.pch_permit(&request.key, needs, slots))
            .map_err(|e| e.to_string())
            .and_then(|permit| match permit {
                Err(skip) => Ok(PchStart::Skipped(skip)),
                Ok(mut permit) => {
                    notices.extend(permit.notice.take().map(Warning::PchSlotsMoved));
                    let slot = PchSlot {
                        lock: permit.paths.lock.clone(),
                        temp_dir: permit.paths.temp_dir.clone(),
                        built_dir: permit.paths.dir.clone(),
                        failed_dir: permit.paths.failed_dir.clone(),
                        deadline: pch::PCH_BUILD_DEADLINE,
                    };
                    abicache_build::spawn_background_build(request, &slot, permit.into_files())
                        .map(|()| PchStart::Started)
                        .map_err(|e| format!("could not start `sh` for it: {e}"))
                }
            });
        match started {
            Ok(start) => {
                let event = match start {
                    PchStart::Started => Event::PchStarted,
                    PchStart::Skipped(skip) => Event::PchSkipped(skip),
                };
                warnings.extend(store.count(&[event]).map(Warning::Counters));
                outcomes.push((request.key.clone(), start));
            }
            Err(e) => warnings.push(Warning::PchNotStarted {
                header: request.header.clone(),
                reason: e,
            }),
        }
        warnings.append(&mut notices);
    }
    outcomes
}

/// Removes PCHs the compiler rejected, with a warning each.
pub(crate) fn drop_rejected(store: &Store, rejected: &[String], warnings: &mut Vec<Warning>) {
    for key in rejected {
        let _ = store.pch_remove(key);
        warnings.push(Warning::PchRejected {
            dir: store.pch_root().join(key),
        });
    }
}

/// The umbrella headers of [`pch::DEFAULT_UMBRELLA_HEADERS`] as owned strings.
pub(crate) fn default_umbrellas() -> Vec<String> {
    pch::DEFAULT_UMBRELLA_HEADERS
        .iter()
        .map(|h| h.to_string())
        .collect()
}
