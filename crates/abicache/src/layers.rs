//! Read-only cache layers as the session uses them: `ABICACHE_READONLY_DIRS`
//! (else `readonly_dirs` in the config file, as the settings resolved
//! them), then the roots the caller adds
//! (the Python package adds installed cache wheels'), each consulted after
//! the local cache and never written.
//!
//! The store checks ownership, modes, the layer's index and the library's
//! BLAKE3 ([`abicache_store::ReadOnlyLayer`]). This module adds what needs
//! the other crates, once per process per library: the manifest's payload
//! must hash to its key, the library's imports must match what that key
//! claims (the audit), and a layer with a signed index must carry a valid
//! signature (by one of `ABICACHE_TRUSTED_KEYS` when those are set).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use abicache_audit::audit_file;
use abicache_fs::FileStamp;
use abicache_key::Payload;
use abicache_remote::Keys;
use abicache_settings::RemoteSettings;
use abicache_store::{Hit, ReadOnlyLayer};

use crate::bundle::{check_signature, claims, no_scan};

/// The layers the settings name (`configured`), then `extra` (duplicates
/// after the first dropped).
pub fn resolve(configured: &[PathBuf], extra: &[PathBuf]) -> Vec<ReadOnlyLayer> {
    let mut roots = configured.to_vec();
    roots.extend(extra.iter().cloned());
    let mut seen = HashSet::new();
    roots.retain(|r| seen.insert(r.clone()));
    roots.into_iter().map(ReadOnlyLayer::new).collect()
}

/// The first layer that serves `key`, in order, with the warnings about
/// entries skipped on the way (each shown once per process); a layer's
/// signature is checked against the trusted keys `keys` names.
pub fn lookup(
    layers: &[ReadOnlyLayer],
    key: &str,
    keys: &RemoteSettings,
) -> (Option<Hit>, Vec<String>) {
    let mut warnings = Vec::new();
    for layer in layers {
        if let Some(reason) = signature_refusal(layer, keys) {
            let text = format!(
                "read-only cache layer `{}` skipped: {reason}",
                layer.root().display()
            );
            warn_once(text, &mut warnings);
            continue;
        }
        let found = layer.lookup(key);
        if let Some(warning) = found.warning {
            warn_once(warning.to_string(), &mut warnings);
        }
        let Some(hit) = found.hit else { continue };
        match audit_refusal(&hit) {
            None => return (Some(hit), warnings),
            Some(reason) => warn_once(
                format!(
                    "read-only cache layer `{}`: entry `{key}` skipped: {reason}; it is built locally instead",
                    layer.root().display()
                ),
                &mut warnings,
            ),
        }
    }
    (None, warnings)
}

/// Adds `text` to `warnings` unless this process showed it already.
fn warn_once(text: String, warnings: &mut Vec<String>) {
    static SHOWN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let fresh = SHOWN
        .get_or_init(Default::default)
        .lock()
        .map_or(true, |mut shown| shown.insert(text.clone()));
    if fresh {
        warnings.push(text);
    }
}

/// Why the layer's index signature is refused, once per process per
/// layer: a signature present must be valid; with trusted keys set, a
/// layer that has an index must be signed by one of them. `None`: fine
/// (or no index).
fn signature_refusal(layer: &ReadOnlyLayer, keys: &RemoteSettings) -> Option<String> {
    static CHECKED: OnceLock<Mutex<HashMap<PathBuf, Option<String>>>> = OnceLock::new();
    let memo = CHECKED.get_or_init(Default::default);
    if let Some(known) = memo.lock().ok()?.get(layer.root()) {
        return known.clone();
    }
    let refusal = layer.index_bytes().and_then(|(index, signature)| {
        let trusted = match Keys::from_settings(keys) {
            Ok(keys) => keys.trusted,
            Err(e) => return Some(e.to_string()),
        };
        check_signature(&index, signature.as_deref(), &trusted)
            .err()
            .map(|e| e.to_string().replace("import the bundle", "use the layer"))
    });
    if let Ok(mut memo) = memo.lock() {
        memo.insert(layer.root().to_owned(), refusal.clone());
    }
    refusal
}

/// Why a layer hit must not be served: its payload does not hash to its
/// key, or its library's imports contradict what the key claims. Checked
/// once per process per library (by path and stat stamp).
fn audit_refusal(hit: &Hit) -> Option<String> {
    static PASSED: OnceLock<Mutex<HashSet<(PathBuf, FileStamp)>>> = OnceLock::new();
    let stamp = std::fs::symlink_metadata(&hit.library)
        .map(|m| FileStamp::of(&m))
        .ok()?;
    let id = (hit.library.clone(), stamp);
    let passed = PASSED.get_or_init(Default::default);
    if passed.lock().is_ok_and(|p| p.contains(&id)) {
        return None;
    }
    let refusal = audit(
        &hit.library,
        &hit.manifest.name,
        &hit.manifest.payload,
        &hit.manifest.key,
    );
    if refusal.is_none() {
        if let Ok(mut passed) = passed.lock() {
            passed.insert(id);
        }
    }
    refusal
}

fn audit(library: &Path, name: &str, payload: &str, key: &str) -> Option<String> {
    let payload = match Payload::parse(payload) {
        Ok(payload) => payload,
        Err(e) => return Some(format!("its payload cannot be read ({e})")),
    };
    let payload_key = payload.key();
    if payload_key != key {
        return Some(format!(
            "its payload hashes to `{payload_key}`, not to its key"
        ));
    }
    let report = match audit_file(library) {
        Ok(report) => report,
        Err(e) => return Some(format!("its library cannot be audited ({e})")),
    };
    crate::audit::check(&report, &claims(name, payload), &no_scan())
}
