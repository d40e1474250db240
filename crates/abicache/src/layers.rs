//! Read-only cache layers as the session uses them: `ABICACHE_READONLY_DIRS`
//! (else `readonly_dirs` in the config file, as the settings resolved
//! them), then the roots the caller adds
//! (the Python package adds installed cache wheels'), each consulted after
//! the local cache and never written.
//!
//! The store checks ownership, modes, the layer's index and the library's
//! BLAKE3 ([`abicache_store::ReadOnlyLayer`]). Then each entry passes the
//! gate ([`crate::gate`]), once per process per library: the manifest's
//! payload must hash to its key, the library's imports must match what
//! that key claims (the audit), and a layer's index signature must be valid.
//! With `ABICACHE_TRUSTED_KEYS` set, a layer serves nothing without an index
//! signed by one of those keys, and an entry the layer's cache pulled
//! unsigned (its `provenance.json`) is refused, as the local cache refuses it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use abicache_fs::FileStamp;
use abicache_remote::{Keys, PublicKey};
use abicache_settings::RemoteSettings;
use abicache_store::{Hit, ReadOnlyLayer};

use crate::covering::{Coverage, CoveringAsk};
use crate::gate::{self, Refusal, Refused, Source};
use crate::warning::Warning;

/// One read-only layer and how refusals name it.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The store's view of it (its checks, its lookups).
    pub store: ReadOnlyLayer,
    /// A configured layer or an installed cache wheel.
    pub source: Source,
}

/// The layers the settings name (`configured`: `ABICACHE_READONLY_DIRS`,
/// else the config file's), then the cache wheels `wheels` (duplicates
/// after the first dropped).
pub fn resolve(configured: &[PathBuf], wheels: &[PathBuf]) -> Vec<Layer> {
    let mut seen = HashSet::new();
    configured
        .iter()
        .map(|root| (root.clone(), Source::Layer(root.clone())))
        .chain(
            wheels
                .iter()
                .map(|root| (root.clone(), Source::Wheel(root.clone()))),
        )
        .filter(|(root, _)| seen.insert(root.clone()))
        .map(|(root, source)| Layer {
            store: ReadOnlyLayer::new(root),
            source,
        })
        .collect()
}

/// The first layer that serves `key`, in order, with the warnings about
/// entries skipped on the way (each shown once per process); signatures
/// and provenance are checked against the trusted keys `keys` names.
pub fn lookup(layers: &[Layer], key: &str, keys: &RemoteSettings) -> (Option<Hit>, Vec<Warning>) {
    let mut warnings = Vec::new();
    let trusted = match trusted_keys(keys) {
        Ok(trusted) => trusted,
        Err(refusal) => {
            for layer in layers {
                let refused = Refused::index(layer.source.clone(), refusal.clone());
                warn_once(Warning::Refused(refused), &mut warnings);
            }
            return (None, warnings);
        }
    };
    for layer in layers {
        if let Some(refused) = signature_refusal(layer, &trusted) {
            warn_once(Warning::Refused(refused), &mut warnings);
            continue;
        }
        let found = layer.store.lookup(key);
        if let Some(warning) = found.warning {
            // A wheel is not in `ABICACHE_READONLY_DIRS`: its warning names
            // the wheel's remedy.
            let text = match &layer.source {
                Source::Wheel(_) => warning.with_fix(&layer.source.how_to_repair()),
                _ => warning.to_string(),
            };
            warn_once(Warning::Layer(text), &mut warnings);
        }
        let Some(hit) = found.hit else { continue };
        let refusal = gate::check_provenance(&hit.dir, &trusted).err();
        match refusal.or_else(|| audit_refusal(&hit)) {
            None => return (Some(hit), warnings),
            Some(refusal) => warn_once(
                Warning::Refused(Refused::entry(layer.source.clone(), key, refusal)),
                &mut warnings,
            ),
        }
    }
    (None, warnings)
}

/// The best entry of the first layer, in order, that has one whose device
/// code covers the visible GPUs of `covering` ([`crate::covering::rank`]),
/// with its coverage and the warnings about entries skipped on the way.
/// Each candidate passes exactly the checks [`lookup`] makes, then must
/// still cover by its own manifest ([`crate::covering::covers`]).
pub fn lookup_covering(
    layers: &[Layer],
    covering: &CoveringAsk,
    keys: &RemoteSettings,
) -> (Option<(Hit, Coverage)>, Vec<Warning>) {
    let mut warnings = Vec::new();
    for layer in layers {
        let candidates = layer.store.arch_free_entries(&covering.arch_free);
        for ranked in crate::covering::rank(&candidates, &covering.gpus) {
            let (hit, found) = lookup(std::slice::from_ref(layer), &ranked.key, keys);
            warnings.extend(found);
            let Some(hit) = hit else { continue };
            if let Some(coverage) = crate::covering::covers(&hit, covering) {
                return (Some((hit, coverage)), warnings);
            }
        }
    }
    (None, warnings)
}

/// Adds `warning` to `warnings` unless this process showed its text already.
fn warn_once(warning: Warning, warnings: &mut Vec<Warning>) {
    static SHOWN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let fresh = SHOWN
        .get_or_init(Default::default)
        .lock()
        .map_or(true, |mut shown| shown.insert(warning.to_string()));
    if fresh {
        warnings.push(warning);
    }
}

/// The trusted keys the settings name (`ABICACHE_TRUSTED_KEYS`, else the
/// config file's); when they cannot be read, every layer is refused.
fn trusted_keys(keys: &RemoteSettings) -> Result<Vec<PublicKey>, Refusal> {
    Keys::from_settings(keys)
        .map(|keys| keys.trusted)
        .map_err(|e| Refusal::TrustedKeysUnreadable {
            reason: e.to_string(),
        })
}

/// Why the layer's index signature is refused, once per process per
/// layer: a signature present must be valid; with trusted keys set, the
/// layer must have an index signed by one of them (a layer without one
/// serves nothing). `None`: fine (or no index and no trusted keys).
fn signature_refusal(layer: &Layer, trusted: &[PublicKey]) -> Option<Refused> {
    static CHECKED: OnceLock<Mutex<HashMap<PathBuf, Option<Refused>>>> = OnceLock::new();
    let memo = CHECKED.get_or_init(Default::default);
    let root = layer.store.root();
    if let Some(known) = memo.lock().ok()?.get(root) {
        return known.clone();
    }
    let refusal = match layer.store.index_bytes() {
        Some((index, signature)) => {
            gate::check_index_signature(&index, signature.as_deref(), trusted).err()
        }
        None if trusted.is_empty() => None,
        None => Some(Refusal::Unsigned),
    };
    let refused = refusal.map(|r| Refused::index(layer.source.clone(), r));
    if let Ok(mut memo) = memo.lock() {
        memo.insert(root.to_owned(), refused.clone());
    }
    refused
}

/// Why a layer hit must not be served: its payload does not hash to its
/// key, or its library's imports contradict what the key claims. Checked
/// once per process per library (by path and stat stamp).
fn audit_refusal(hit: &Hit) -> Option<Refusal> {
    static PASSED: OnceLock<Mutex<HashSet<(PathBuf, FileStamp)>>> = OnceLock::new();
    let stamp = std::fs::symlink_metadata(&hit.library)
        .map(|m| FileStamp::of(&m))
        .ok()?;
    let id = (hit.library.clone(), stamp);
    let passed = PASSED.get_or_init(Default::default);
    if passed.lock().is_ok_and(|p| p.contains(&id)) {
        return None;
    }
    let manifest = &hit.manifest;
    let refusal = gate::payload_for_key(&manifest.key, &manifest.payload)
        .and_then(|payload| gate::audit_against_payload(&hit.library, &manifest.name, payload))
        .err();
    if refusal.is_none() {
        if let Ok(mut passed) = passed.lock() {
            passed.insert(id);
        }
    }
    refusal
}
