//! The human-readable rendering of an [`AuditReport`].

use std::fmt::Write;

use crate::classify::Group;
use crate::demangle::demangle;
use crate::report::AuditReport;

/// Renders `report` for a terminal: the `DT_NEEDED` list, the libstdc++
/// floor, the Python and stable-ABI verdicts, then every import group with
/// its count and its names demangled and sorted. Deterministic: the same
/// report always renders to the same text.
pub fn render_human(report: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "needed libraries ({}):", report.needed.len());
    for needed in &report.needed {
        let _ = writeln!(out, "  {needed}");
    }
    let floor = report.glibcxx_max.as_deref().unwrap_or("none");
    let _ = writeln!(out, "libstdc++ version required: {floor}");

    let python = report.python_symbols().len();
    let python_needed: Vec<&str> = report
        .needed
        .iter()
        .filter(|n| n.starts_with("libpython") || n.starts_with("libtorch_python."))
        .map(String::as_str)
        .collect();
    let verdict = if python == 0 && python_needed.is_empty() {
        "independent of the Python ABI".to_owned()
    } else {
        let mut reasons = vec![format!("{python} Python symbol(s)")];
        if !python_needed.is_empty() {
            reasons.push(format!("links {}", python_needed.join(", ")));
        }
        format!("depends on the Python ABI ({})", reasons.join("; "))
    };
    let _ = writeln!(out, "python: {verdict}");
    let unstable = report.non_stable_torch_symbols().len();
    let verdict = if unstable == 0 {
        "stable C ABI only".to_owned()
    } else {
        format!("{unstable} symbol(s) outside the stable C ABI")
    };
    let _ = writeln!(out, "libtorch: {verdict}");

    let _ = writeln!(out, "imports ({}):", report.imports.len());
    for group in Group::ALL {
        let symbols = report.imports.group(group);
        let _ = writeln!(out, "  {} ({}):", group.name(), symbols.len());
        let mut names: Vec<String> = symbols.iter().map(|s| demangle(s)).collect();
        names.sort_unstable();
        for name in names {
            let _ = writeln!(out, "    {name}");
        }
    }
    out
}
