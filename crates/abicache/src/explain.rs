//! `explain`: why a key is what it is, and on a miss what differs from the
//! closest entry of the same extension in the cache.

use abicache_key::{FieldChange, Payload, PythonAbiReason};
use abicache_scan::PythonMarker;
use serde::Serialize;

use crate::error::Result;
use crate::prepared::Prepared;
use crate::session::Session;

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
    /// The audit stored with the entry, when cached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<serde_json::Value>,
}

/// A cached entry of the same extension and how its payload differs.
#[derive(Debug, Clone, Serialize)]
pub struct ClosestEntry {
    /// Its key.
    pub key: String,
    /// Field-by-field changes, from the cached entry (old) to this request (new).
    pub changes: Vec<FieldChange>,
}

/// Explains `prepared` against the session's cache. Reads manifests only:
/// nothing is verified, counted or touched.
pub fn explain(session: &Session, prepared: &Prepared) -> Result<Explanation> {
    let keyed = &prepared.keyed;
    let entries = session.store()?.find_by_name(&keyed.name)?;
    let exact = entries.iter().find(|e| e.key == keyed.key);
    let closest = if exact.is_some() {
        None
    } else {
        entries
            .iter()
            .filter_map(|e| {
                Payload::parse(&e.manifest.payload)
                    .ok()
                    .map(|p| (e, p.diff(&keyed.payload)))
            })
            .min_by_key(|(_, changes)| changes.len())
            .map(|(e, changes)| ClosestEntry {
                key: e.key.clone(),
                changes,
            })
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
        audit: exact.and_then(|e| e.manifest.audit.clone()),
    })
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
        return out;
    }
    out.push_str(&render_closest(&e.name, e.closest.as_ref()));
    out
}

/// The lines of a miss: the closest entry of `name` and the fields that
/// differ, one per line, or that the cache holds no entry of `name`
/// (`abicache explain`'s wording; offline mode's `CacheMiss` says the same).
pub fn render_closest(name: &str, closest: Option<&ClosestEntry>) -> String {
    match closest {
        None => format!("cached: no, and no entry of `{name}` is in the cache\n"),
        Some(c) => {
            let mut out = format!("cached: no; closest entry {} differs in:\n", c.key);
            for change in &c.changes {
                out.push_str(&format!("  {change}\n"));
            }
            out
        }
    }
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
