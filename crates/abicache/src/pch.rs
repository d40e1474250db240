//! The precompiled-header policy: which PCHs a build uses, and when one is built.
//!
//! The rule (`ABICACHE_PCH`, default `auto`):
//! - a build uses every PCH its units can use that is already built and verified;
//! - it never waits for one: a PCH that is missing is started *after* the build that
//!   needed it compiled at least one unit starting with its umbrella header, in a
//!   detached low-priority background process, and the next build (in any process) uses
//!   it once it is finished. A PCH that is being built, or whose build failed in the last
//!   day, is not started again;
//! - a PCH the compiler rejects, or whose files or headers changed, is removed (with a
//!   warning) and rebuilt in the background the same way;
//! - `ABICACHE_PCH=0` turns all of it off.

use std::sync::Arc;

use abicache_build::{pch, PchRequest, PchSlot, ReadyPch};
use abicache_store::{PchLookup, Store};

use crate::env_vars::ABICACHE_PCH;
use crate::error::{Error, Result};
use crate::warning::Warning;

/// Whether PCHs are used and built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PchMode {
    /// Use ready PCHs, build missing ones in the background (the default).
    Auto,
    /// Neither use nor build PCHs.
    Off,
}

impl PchMode {
    /// Reads `ABICACHE_PCH`: unset, empty, `auto` or `1` → [`PchMode::Auto`]; `0` →
    /// [`PchMode::Off`]; anything else is an error naming the variable.
    pub fn from_env() -> Result<PchMode> {
        let value = crate::env_vars::var(ABICACHE_PCH).unwrap_or_default();
        match value.trim() {
            "" | "auto" | "1" => Ok(PchMode::Auto),
            "0" => Ok(PchMode::Off),
            other => Err(Error::InvalidVariable {
                name: ABICACHE_PCH,
                value: other.to_owned(),
                problem: "is not understood: use `0` to turn precompiled headers off, \
                          or `auto` (the default)",
            }),
        }
    }
}

/// The PCHs of one build: those ready to use and those to start after it.
#[derive(Debug, Default)]
pub(crate) struct PchPlan {
    /// Verified PCHs, with the units that use them.
    pub ready: Vec<ReadyPch>,
    /// Requests without a PCH and without a build of one under way.
    pub missing: Vec<PchRequest>,
}

/// Looks up every request: ready ones (adopting finished background builds), missing
/// ones; store problems are warnings, never a failed build.
pub(crate) fn resolve(
    store: &Store,
    requests: Vec<PchRequest>,
    warnings: &mut Vec<Warning>,
) -> PchPlan {
    let mut plan = PchPlan::default();
    for request in requests {
        let mut found = store.pch_lookup(&request.key, &request.dir);
        if let Ok(PchLookup::Unadopted(dir)) = &found {
            let depfile = dir.join(pch::PCH_DEPFILE);
            let deps = std::fs::read_to_string(&depfile)
                .map(|text| pch::parse_depfile(&text))
                .unwrap_or_default();
            found = store.pch_adopt(&request.key, &deps, &request.dir);
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

/// Starts background builds for the `missing` requests whose units were compiled in
/// this build (`compiled`: display paths). Failures to start are warnings.
pub(crate) fn start_missing(
    store: &Store,
    missing: &[PchRequest],
    compiled: &[String],
    warnings: &mut Vec<Warning>,
) {
    for request in missing {
        if !request.units.iter().any(|u| compiled.contains(u)) {
            continue;
        }
        let started = store
            .pch_paths(&request.key)
            .map_err(|e| e.to_string())
            .and_then(|paths| {
                let slot = PchSlot {
                    lock: paths.lock,
                    temp_dir: paths.temp_dir,
                    built_dir: paths.dir,
                    failed_dir: paths.failed_dir,
                    deadline: pch::PCH_BUILD_DEADLINE,
                };
                abicache_build::spawn_background_build(request, &slot)
                    .map_err(|e| format!("could not start `flock` (util-linux) for it: {e}"))
            });
        if let Err(e) = started {
            warnings.push(Warning::PchNotStarted {
                header: request.header.clone(),
                reason: e,
            });
        }
    }
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
