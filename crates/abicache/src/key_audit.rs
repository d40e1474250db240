//! The publish-time audit: what a built library really imports, checked
//! against what its key claims, before it is shared under that key.

use std::path::Path;

use abicache_audit::{audit_file, demangle, AuditReport};
use abicache_key::Keyed;
use abicache_scan::ScanReport;

use crate::error::Result;

/// How many offending symbols a refusal lists.
const SHOWN_SYMBOLS: usize = 10;

/// The result of checking a library against its key.
#[derive(Debug)]
pub enum AuditVerdict {
    /// Consistent with the key; the audit report as JSON, for the manifest.
    Passed(serde_json::Value),
    /// Inconsistent: the user-facing explanation.
    Refused(String),
}

/// Audits `library` and checks it against `keyed`: a `python_abi=agnostic`
/// key must not import CPython or libtorch_python (nor need libpython or
/// libtorch_python), and a `torch_abi=stable-*` key must not import
/// libtorch's C++ symbols, and a key without torch (a TVM-FFI module that
/// includes no torch header, `torch_abi` `none`) must not import or need
/// libtorch at all.
pub fn audit_against_key(library: &Path, keyed: &Keyed, scan: &ScanReport) -> Result<AuditVerdict> {
    let report = audit_file(library)?;
    if let Some(message) = refusal_under_key(&report, keyed, scan) {
        return Ok(AuditVerdict::Refused(message));
    }
    Ok(AuditVerdict::Passed(
        serde_json::to_value(&report).unwrap_or(serde_json::Value::Null),
    ))
}

/// The refusal message for `report` under `keyed`, if any.
pub fn refusal_under_key(report: &AuditReport, keyed: &Keyed, scan: &ScanReport) -> Option<String> {
    if !keyed.python_abi_dependent {
        let mut symbols = report.python_symbols();
        let needs: Vec<&String> = report
            .needed
            .iter()
            .filter(|n| n.starts_with("libtorch_python.") || n.starts_with("libpython"))
            .collect();
        if !symbols.is_empty() || !needs.is_empty() {
            symbols.sort_unstable();
            let mut msg = format!(
                "refusing to publish `{}`: it is keyed `python_abi=agnostic` (shared across Python versions), \
                 but the built library depends on the CPython ABI",
                keyed.name
            );
            if !needs.is_empty() {
                let names: Vec<String> = needs.iter().map(|n| format!("`{n}`")).collect();
                msg.push_str(&format!(" (it needs {})", names.join(", ")));
            }
            msg.push_str(&symbol_list(&symbols));
            if let Some(marker) = scan.python_markers.first() {
                msg.push_str(&format!(
                    "\nlikely cause: `{}`:{} has `{}`",
                    marker.file, marker.line, marker.marker
                ));
            }
            msg.push_str(
                "\nfix: include `<torch/library.h>` and the ATen headers you need instead of \
                 `<torch/extension.h>`, `Python.h` or pybind11, or declare the extension \
                 Python-dependent (`python_abi_dependent = true`)",
            );
            return Some(msg);
        }
    }
    if !keyed.uses_torch {
        let mut symbols: Vec<&str> = report
            .imports
            .libtorch_cxx
            .iter()
            .chain(&report.imports.torch_stable_c)
            .chain(&report.imports.libtorch_python)
            .map(String::as_str)
            .collect();
        let needs: Vec<String> = report
            .needed
            .iter()
            .filter(|n| n.starts_with("libtorch") || n.starts_with("libc10"))
            .map(|n| format!("`{n}`"))
            .collect();
        if !symbols.is_empty() || !needs.is_empty() {
            symbols.sort_unstable();
            let mut msg = format!(
                "refusing to publish `{}`: it is keyed without torch (a TVM-FFI module whose sources \
                 include no torch header, shared across torch releases and environments without \
                 torch), but the built library depends on libtorch",
                keyed.name
            );
            if !needs.is_empty() {
                msg.push_str(&format!(" (it needs {})", needs.join(", ")));
            }
            msg.push_str(&symbol_list(&symbols));
            msg.push_str(
                "\nfix: include the torch header the code relies on (then it is keyed by torch), \
                 or remove the torch library from `extra_ldflags`",
            );
            return Some(msg);
        }
    }
    if keyed.torch_abi.starts_with("stable-") {
        let mut symbols = report.non_stable_torch_symbols();
        if !symbols.is_empty() {
            symbols.sort_unstable();
            let mut msg = format!(
                "refusing to publish `{}`: it is keyed `torch_abi={}` (shared across torch releases), \
                 but the built library imports libtorch C++ symbols outside the stable ABI",
                keyed.name, keyed.torch_abi
            );
            msg.push_str(&symbol_list(&symbols));
            msg.push_str(
                "\nfix: call only the stable C shim (`torch/csrc/stable/`, `torch/headeronly/`), \
                 or remove `torch_stable_abi_target` to key on the exact torch build",
            );
            return Some(msg);
        }
    }
    None
}

fn symbol_list(symbols: &[&str]) -> String {
    if symbols.is_empty() {
        return String::new();
    }
    let mut out = format!("; {} offending symbol(s):", symbols.len());
    for s in symbols.iter().take(SHOWN_SYMBOLS) {
        let pretty = demangle(s);
        if pretty == *s {
            out.push_str(&format!("\n  {s}"));
        } else {
            out.push_str(&format!("\n  {pretty}  ({s})"));
        }
    }
    if symbols.len() > SHOWN_SYMBOLS {
        out.push_str(&format!("\n  … and {} more", symbols.len() - SHOWN_SYMBOLS));
    }
    out
}
