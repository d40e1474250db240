//! The human summary of a scan, as `abicache scan` prints it.

use std::fmt::Write;

use crate::report::ScanReport;

/// Length of the hash prefix shown per file.
const SHORT_HASH: usize = 12;

/// Renders `report` for people: per source its files with short hashes,
/// missing and computed includes; then the Python-ABI verdict with each
/// piece of evidence as `file:line: marker`, stable registrations, torch
/// headers outside the stable ABI and whether the sources look like a
/// stable-ABI extension. Deterministic: the same report gives the same text.
pub fn render_summary(report: &ScanReport) -> String {
    let mut out = String::new();
    let unique = report.unique_files().len();
    let _ = writeln!(
        out,
        "{} source{}, {unique} distinct file{}",
        report.sources.len(),
        plural(report.sources.len()),
        plural(unique),
    );
    for source in &report.sources {
        let _ = writeln!(
            out,
            "\nsource {} ({} file{})",
            source.source,
            source.files.len(),
            plural(source.files.len())
        );
        let width = source.files.iter().map(|f| f.path.len()).max().unwrap_or(0);
        for file in &source.files {
            let short = file.blake3.get(..SHORT_HASH).unwrap_or(&file.blake3);
            let _ = writeln!(out, "  {:width$}  {short}", file.path);
        }
        for missing in &source.missing_includes {
            let _ = writeln!(out, "  missing include: {missing}");
        }
        for computed in &source.computed_includes {
            let _ = writeln!(
                out,
                "  computed include: {}:{}: #include {}",
                computed.file, computed.line, computed.text
            );
        }
    }

    out.push('\n');
    if report.python_abi_dependent() {
        let n = report.python_markers.len();
        let _ = writeln!(out, "Python ABI: dependent ({n} marker{} found)", plural(n));
        for m in &report.python_markers {
            let _ = writeln!(out, "  {}:{}: {}", m.file, m.line, m.marker);
        }
    } else {
        let _ = writeln!(out, "Python ABI: agnostic (no Python-ABI marker found)");
    }

    if report.stable_registration() {
        let _ = writeln!(out, "Stable registration: yes");
        for loc in &report.stable_registrations {
            let _ = writeln!(out, "  {}:{}", loc.file, loc.line);
        }
    } else {
        let _ = writeln!(out, "Stable registration: no");
    }

    let non_stable: Vec<_> = report.non_stable_headers().collect();
    let _ = writeln!(
        out,
        "Torch headers outside the stable ABI: {}",
        non_stable.len()
    );
    for t in non_stable {
        let _ = writeln!(out, "  {}:{}: {}", t.file, t.line, t.include);
    }

    if report.stable_candidate() {
        let _ = writeln!(
            out,
            "Stable-ABI candidate: yes (reported only; set `torch_stable_abi_target` to key on the stable ABI)"
        );
    } else {
        let _ = writeln!(out, "Stable-ABI candidate: no");
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
