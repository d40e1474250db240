//! Where a session looks for a key's entry: a list of [`EntrySource`]s
//! built when the session is made, tried in its order. Today: the local
//! cache, then the read-only layers and installed cache wheels, then the
//! remote cache. Every source but the local cache hands out only what
//! passed the gate ([`crate::gate`]). Bundles are not looked up: they are
//! imported ((`abicache_fleet::bundle`)), through the same gate.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use abicache_settings::Settings;
use abicache_store::{BuildGuard, Event, Hit, Store, StoreWarning};

use crate::covering::{Coverage, CoveringAsk};
use crate::error::Result;
use crate::layers::Layer;
use crate::prepared::Prepared;
use crate::remote_cache::{Fetch, RemoteSlot, RemoteState};
use crate::warning::Warning;

/// The sources of a session, in the order they are tried: the local cache,
/// the read-only layers (the settings' `ABICACHE_READONLY_DIRS`, then the
/// cache wheels `wheels`), the remote cache (`remote`, opened from the
/// settings on first use).
pub(crate) fn in_order(
    settings: &Arc<Settings>,
    wheels: Vec<PathBuf>,
    remote: &Arc<RemoteSlot>,
) -> Vec<Box<dyn EntrySource>> {
    vec![
        Box::new(LocalCache),
        Box::new(Layers {
            settings: Arc::clone(settings),
            wheels,
            resolved: OnceLock::new(),
        }),
        Box::new(RemoteSource {
            settings: Arc::clone(settings),
            slot: Arc::clone(remote),
        }),
    ]
}

/// A place a key's entry may be found.
pub(crate) trait EntrySource: Send + Sync {
    /// What it is, in words (`local cache`, `read-only layers`, `remote cache`).
    fn describe(&self) -> &'static str;

    /// True when it publishes what it finds into the local cache, so it is
    /// asked only while holding the key's build lock ([`Ask::guard`]), and
    /// only with the key's scan at hand ([`Ask::prepared`]).
    fn publishes_locally(&self) -> bool {
        false
    }

    /// The verified entry for [`Ask::key`]; `None` to try the next source.
    /// What was skipped on the way goes to [`Ask::warnings`].
    fn lookup(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>>;

    /// After [`EntrySource::lookup`] missed, with [`Ask::covering`] set:
    /// the best verified entry of this source whose device code covers the
    /// visible GPUs ([`crate::covering`]), its coverage in [`Ask::covered`].
    /// `None` (the default) to try the next source.
    fn cover(&self, _ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        Ok(None)
    }
}

/// Which kind of source served an entry (how the outcome describes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The local cache: counted as a hit by the session.
    Local,
    /// A read-only layer or cache wheel, served in place (counted as a layer hit).
    Layer,
    /// Downloaded from the remote cache and published locally (counted as a remote hit).
    Remote,
}

/// An entry a source found.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// The verified entry.
    pub hit: Hit,
    /// Where it came from.
    pub origin: Origin,
}

/// One lookup of a key, passed along the sources.
pub(crate) struct Ask<'a> {
    /// The key asked for.
    pub key: &'a str,
    /// The local cache (counters, publishing).
    pub store: &'a Store,
    /// The key's scan and key; `None` on the warm path, which asks only
    /// sources that do not publish locally.
    pub prepared: Option<&'a Prepared>,
    /// The key's build lock, once taken.
    pub guard: Option<BuildGuard>,
    /// How the remote answered (it decides the upload after a build).
    pub remote_state: RemoteState,
    /// Warnings of the call.
    pub warnings: &'a mut Vec<Warning>,
    /// The covering lookup a miss may take (`None`: the arch list was chosen).
    pub covering: Option<CoveringAsk>,
    /// How the entry a source's [`EntrySource::cover`] served covers the GPUs.
    pub covered: Option<Coverage>,
}

impl Ask<'_> {
    /// Counts `events`, best effort: a cache whose counters cannot be
    /// written still serves; the first such failure becomes a warning.
    pub fn count(&mut self, events: &[Event]) {
        self.warnings
            .extend(self.store.count(events).map(Warning::Counters));
    }

    /// Counts the corrupt entries a local lookup found (the store counts
    /// nothing itself) and adds their warnings.
    pub fn note_corrupt(&mut self, found: Vec<StoreWarning>) {
        if found.is_empty() {
            return;
        }
        let events = vec![Event::Corrupt; found.len()];
        self.warnings
            .extend(found.into_iter().map(Warning::Corrupt));
        self.count(&events);
    }
}

/// The local cache: its own entries, verified by the store (no gate: they
/// were built and audited here, or passed the gate when they came in).
pub(crate) struct LocalCache;

impl EntrySource for LocalCache {
    fn describe(&self) -> &'static str {
        "local cache"
    }

    fn lookup(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        let lookup = ask.store.lookup(ask.key)?;
        ask.note_corrupt(lookup.warnings);
        Ok(lookup.hit.map(|hit| Candidate {
            hit,
            origin: Origin::Local,
        }))
    }

    fn cover(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        let Some(covering) = ask.covering.clone() else {
            return Ok(None);
        };
        let candidates = ask.store.arch_free_entries(&covering.arch_free);
        for ranked in crate::covering::rank(&candidates, &covering.gpus) {
            // The index only names candidates: each is verified as any
            // lookup, and must still cover by its own manifest.
            let lookup = ask.store.lookup(&ranked.key)?;
            ask.note_corrupt(lookup.warnings);
            let Some(hit) = lookup.hit else { continue };
            if let Some(coverage) = crate::covering::covers(&hit, &covering) {
                ask.covered = Some(coverage);
                return Ok(Some(Candidate {
                    hit,
                    origin: Origin::Local,
                }));
            }
        }
        Ok(None)
    }
}

/// The read-only layers and installed cache wheels, resolved on the first
/// lookup (so a local hit reads no configuration); each entry served has
/// passed the store's layer checks and the gate ([`crate::layers`]).
struct Layers {
    settings: Arc<Settings>,
    wheels: Vec<PathBuf>,
    /// The layers, made on the first lookup.
    resolved: OnceLock<Vec<Layer>>,
}

impl EntrySource for Layers {
    fn describe(&self) -> &'static str {
        "read-only layers"
    }

    fn lookup(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        let layers = self.resolved.get_or_init(|| {
            crate::layers::resolve(&self.settings.layers.readonly_dirs, &self.wheels)
        });
        if layers.is_empty() {
            return Ok(None);
        }
        let (hit, found) = crate::layers::lookup(layers, ask.key, &self.settings.remote);
        ask.warnings.extend(found);
        let Some(hit) = hit else { return Ok(None) };
        ask.count(&[Event::LayerHit {
            compile_seconds: hit.manifest.compile_seconds,
        }]);
        Ok(Some(Candidate {
            hit,
            origin: Origin::Layer,
        }))
    }

    fn cover(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        let (Some(covering), Some(layers)) = (ask.covering.clone(), self.resolved.get()) else {
            return Ok(None);
        };
        let (found, warnings) =
            crate::layers::lookup_covering(layers, &covering, &self.settings.remote);
        ask.warnings.extend(warnings);
        let Some((hit, coverage)) = found else {
            return Ok(None);
        };
        ask.count(&[Event::LayerHit {
            compile_seconds: hit.manifest.compile_seconds,
        }]);
        ask.covered = Some(coverage);
        Ok(Some(Candidate {
            hit,
            origin: Origin::Layer,
        }))
    }
}

/// The remote cache: downloads under the key's build lock, then the gate
/// ([`crate::remote_cache`]); a key that cannot be read is the session's warning.
struct RemoteSource {
    settings: Arc<Settings>,
    slot: Arc<RemoteSlot>,
}

impl EntrySource for RemoteSource {
    fn describe(&self) -> &'static str {
        "remote cache"
    }

    fn publishes_locally(&self) -> bool {
        true
    }

    fn lookup(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        let (Some(prepared), Ok(Some(remote))) = (
            ask.prepared,
            crate::remote_cache::resolve(&self.slot, &self.settings.remote),
        ) else {
            return Ok(None);
        };
        let Some(guard) = ask.guard.take() else {
            return Ok(None);
        };
        match remote.fetch_locked(ask.store, guard, prepared, ask.warnings)? {
            // Verified, passed the gate and counted (as a remote hit) by `fetch_locked`.
            Fetch::Hit(hit) => Ok(Some(Candidate {
                hit,
                origin: Origin::Remote,
            })),
            Fetch::Build(guard, state) => {
                ask.guard = Some(guard);
                ask.remote_state = state;
                Ok(None)
            }
        }
    }

    fn cover(&self, ask: &mut Ask<'_>) -> Result<Option<Candidate>> {
        // Only after this source's exact lookup, which the key's lock precedes.
        let (Some(covering), Some(_), Ok(Some(remote))) = (
            ask.covering.clone(),
            ask.guard.as_ref(),
            crate::remote_cache::resolve(&self.slot, &self.settings.remote),
        ) else {
            return Ok(None);
        };
        if ask.remote_state == RemoteState::Unavailable {
            return Ok(None);
        }
        let Some((hit, coverage)) = remote.cover(ask.store, &covering, ask.warnings)? else {
            return Ok(None);
        };
        ask.covered = Some(coverage);
        Ok(Some(Candidate {
            hit,
            origin: Origin::Remote,
        }))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_local_cache_is_tried_first_then_the_layers_then_the_remote() {
        let env = abicache_test_support::environment::cpython312("2.9.1");
        let session = crate::Session::open_lazily(None, env);
        assert_eq!(
            session.source_order(),
            ["local cache", "read-only layers", "remote cache"]
        );
        // Only the remote publishes into the local cache, so only it is
        // asked under the key's build lock (and never on the warm path).
        let locking: Vec<bool> =
            super::in_order(&Default::default(), Vec::new(), &Default::default())
                .iter()
                .map(|s| s.publishes_locally())
                .collect();
        assert_eq!(locking, [false, false, true]);
    }
}
