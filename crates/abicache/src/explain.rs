//! `explain`: why a key is what it is, and on a miss what differs from the
//! closest entry of the same extension in the cache.

use abicache_key::{Payload, PythonAbiReason};
use abicache_scan::PythonMarker;
use serde::Serialize;

use abicache_store::ArchIndexed;

use crate::covering::{Coverage, CoveringAsk};
use crate::error::Result;
use crate::layers::Layer;
pub use crate::misses::{render_closest, ClosestEntry};
use crate::prepared::Prepared;

/// The explanation of one extension's key in one environment.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// Extension name.
    pub name: String,
    /// The key for this environment.
    pub key: String,
    /// True when the cache holds an entry under this key.
    pub cached: bool,
    /// `agnostic` or the SOABI the binary is tied to.
    pub python_abi: String,
    /// Why the Python ABI is (or is not) part of the key.
    pub python_abi_reason: PythonAbiReason,
    /// The scanner's evidence for the Python-ABI decision.
    pub python_markers: Vec<PythonMarker>,
    /// `stable-M.m` or the keyed torch version.
    pub torch_abi: String,
    /// On a miss, the closest cached entry of the same name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closest: Option<ClosestEntry>,
    /// On a miss whose arch list came from the visible GPUs: the cached
    /// entry, built for other archs, whose device code covers those GPUs
    /// and would be served ([`crate::covering`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covered_by: Option<Coverage>,
    /// The audit stored with the entry, when cached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<serde_json::Value>,
    /// The device-code images the cached library carries (`sm_80`,
    /// `compute_90`), when cached; empty for a CPU library.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_images: Vec<String>,
    /// What the GPU guard says of them on this machine's visible GPUs (the
    /// refusal, or which GPUs they serve); `None` without images or GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_check: Option<String>,
}

/// Explains `prepared` against the cache `store` and the read-only `layers`
/// ([`crate::Session::explain`] passes its own). Reads manifests only:
/// nothing is verified, counted or touched. The closest entry on a miss is
/// looked for in the local cache, then in the read-only layers and cache
/// wheels (the first with the fewest differing fields wins).
pub fn explain(
    store: &abicache_store::Store,
    layers: &[Layer],
    prepared: &Prepared,
) -> Result<Explanation> {
    let keyed = &prepared.keyed;
    let entries = store.find_by_name(&keyed.name)?;
    let exact = entries.iter().find(|e| e.key == keyed.key);
    let closest = if exact.is_some() {
        None
    } else {
        let local = entries.iter().map(|e| e.manifest.clone());
        local
            .chain(layer_manifests(layers, &keyed.name))
            .filter_map(|manifest| {
                Payload::parse(&manifest.payload)
                    .ok()
                    .map(|p| (manifest.key.clone(), p.diff(&keyed.payload)))
            })
            .min_by_key(|(_, changes)| changes.len())
            .map(|(key, changes)| ClosestEntry { key, changes })
    };
    let covered_by = match (exact, CoveringAsk::of(prepared)) {
        (None, Some(covering)) => {
            let candidates: Vec<ArchIndexed> = entries
                .iter()
                .filter(|e| {
                    abicache_store::arch_free_key(&e.manifest.payload).as_ref()
                        == Some(&covering.arch_free)
                })
                .map(|e| ArchIndexed {
                    key: e.key.clone(),
                    images: abicache_store::entry_images(&e.manifest),
                })
                .collect();
            crate::covering::rank(&candidates, &covering.gpus)
                .into_iter()
                .next()
        }
        _ => None,
    };
    Ok(Explanation {
        name: keyed.name.clone(),
        key: keyed.key.clone(),
        cached: exact.is_some(),
        python_abi: keyed.python_abi.clone(),
        python_abi_reason: keyed.python_abi_reason,
        python_markers: prepared.scan.python_markers.clone(),
        torch_abi: keyed.torch_abi.clone(),
        closest,
        covered_by,
        audit: exact.and_then(|e| e.manifest.audit.clone()),
        gpu_check: exact.and_then(|e| gpu_check(&e.manifest.library, &e.manifest.device_images)),
        device_images: exact.map_or_else(Vec::new, |e| e.manifest.device_images.clone()),
    })
}

/// The manifests of the entries named `name` in the session's read-only
/// layers and cache wheels, unverified (read for their payloads only).
fn layer_manifests(layers: &[Layer], name: &str) -> Vec<abicache_store::Manifest> {
    let mut out = Vec::new();
    for layer in layers {
        let entries = abicache_store::Layout::new(layer.store.root()).entries_dir();
        for entry in std::fs::read_dir(&entries).into_iter().flatten().flatten() {
            let path = entry.path().join(abicache_store::MANIFEST_FILE);
            if let Ok(manifest) = abicache_store::Manifest::read(&path) {
                if manifest.name == name {
                    out.push(manifest);
                }
            }
        }
    }
    out
}

/// The GPU guard's word on `images` for the visible GPUs: `None` without
/// images or GPUs.
fn gpu_check(library: &str, images: &[String]) -> Option<String> {
    let gpus = crate::gpu::visible_gpus();
    if images.is_empty() || gpus.is_empty() {
        return None;
    }
    let names: Vec<String> = gpus
        .iter()
        .map(|g| format!("GPU {} ({}, {})", g.index, g.name, g.capability))
        .collect();
    Some(
        match crate::gpu::check_device_code(library, images, &gpus) {
            Ok(verdict) => verdict
                .jit
                .unwrap_or_else(|| format!("{} can run it (SASS)", names.join(" and "))),
            Err(refusal) => format!("refused: {refusal}"),
        },
    )
}

/// The human rendering of an [`Explanation`].
pub fn render_explanation(e: &Explanation) -> String {
    let mut out = format!("{} key {}\n", e.name, e.key);
    let reason = match e.python_abi_reason {
        PythonAbiReason::PythonModule => "is_python_module = true",
        PythonAbiReason::Explicit => "python_abi_dependent set explicitly",
        PythonAbiReason::Detected => "Python-ABI markers found",
        PythonAbiReason::NotDetected => "no Python-ABI marker found",
    };
    out.push_str(&format!("  python_abi: {} ({reason})\n", e.python_abi));
    for m in e.python_markers.iter().take(5) {
        out.push_str(&format!("    {}:{}: {}\n", m.file, m.line, m.marker));
    }
    if e.python_markers.len() > 5 {
        out.push_str(&format!("    … and {} more\n", e.python_markers.len() - 5));
    }
    out.push_str(&format!("  torch_abi: {}\n", e.torch_abi));
    if e.cached {
        out.push_str("cached: yes (a build would be a hit)\n");
        if let Some(audit) = &e.audit {
            out.push_str(&render_audit_counts(audit));
        }
        if !e.device_images.is_empty() {
            out.push_str(&format!("device code: {}\n", e.device_images.join(", ")));
        }
        if let Some(check) = &e.gpu_check {
            out.push_str(&format!("gpus: {check}\n"));
        }
        return out;
    }
    if let Some(covered) = &e.covered_by {
        out.push_str(&format!(
            "cached: no, but covered (the arch list came from the visible GPUs, so a build \
             would serve this instead of compiling): {}\n",
            covered.describe()
        ));
    }
    out.push_str(&render_closest(&e.name, e.closest.as_ref()));
    out
}

/// One line with the number of imports per group of a stored audit, e.g.
/// `audit: cpython 0, libtorch_cxx 12, …, other 9`.
fn render_audit_counts(audit: &serde_json::Value) -> String {
    let Some(imports) = audit.get("imports").and_then(|i| i.as_object()) else {
        return String::new();
    };
    let counts: Vec<String> = imports
        .iter()
        .map(|(group, symbols)| format!("{group} {}", symbols.as_array().map_or(0, Vec::len)))
        .collect();
    format!("audit: imports {}\n", counts.join(", "))
}
