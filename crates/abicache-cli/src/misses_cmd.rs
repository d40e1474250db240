//! `abicache misses [FILE]`: the miss report (one JSON line per cache miss,
//! appended by every abicache process with `ABICACHE_MISS_REPORT` set) as a
//! table, or as one JSON array with `--json`.

use std::path::Path;

use abicache::settings::Settings;
use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::args::MissesArgs;
use crate::output::print_json_or;

/// `abicache misses`: reads the report (`FILE`, else the settings' one) and
/// prints it; a line that is not a JSON object (a report from elsewhere, a
/// line cut by a full disk) is named on stderr and skipped.
pub fn misses(settings: &Settings, args: MissesArgs) -> Result<()> {
    let Some(path) = args.file.or_else(|| settings.misses.report.clone()) else {
        bail!(
            "no miss report to show: give its path (`abicache misses FILE`), or set \
             `ABICACHE_MISS_REPORT` (or `miss_report` in the config file)"
        );
    };
    let lines = read_report(&path)?;
    print_json_or(args.json, &lines, || table(&lines))
}

/// The report's JSON lines, in order.
fn read_report(path: &Path) -> Result<Vec<Value>> {
    let bytes = std::fs::read(path).with_context(|| {
        format!(
            "cannot read the miss report `{}`; check the path (a report is created by the \
                 first miss of a process with `ABICACHE_MISS_REPORT` set)",
            path.display()
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(value) if value.is_object() => lines.push(value),
            _ => eprintln!(
                "warning: line {} of `{}` is not a miss record; skipped",
                number + 1,
                path.display()
            ),
        }
    }
    Ok(lines)
}

/// One row per miss: time, extension, key, reason, offline mode and the
/// fields that differ from the closest cached entry; then a count.
fn table(lines: &[Value]) -> String {
    if lines.is_empty() {
        return "no misses recorded\n".into();
    }
    let mut out = format!(
        "{:<24} {:<24} {:<32} {:<10} {:<7} {}\n",
        "TIME", "EXTENSION", "KEY", "REASON", "OFFLINE", "DIFFERS FROM THE CLOSEST ENTRY"
    );
    for line in lines {
        let s = |k: &str| line[k].as_str().unwrap_or("-").to_owned();
        let differs = match line["closest"]["differs"].as_array() {
            Some(items) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; "),
            None => "-".to_owned(),
        };
        out.push_str(&format!(
            "{:<24} {:<24} {:<32} {:<10} {:<7} {}\n",
            s("time"),
            s("extension"),
            s("key"),
            s("reason"),
            s("offline"),
            differs
        ));
    }
    let mut names: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["extension"].as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "es" });
    out.push_str(&format!(
        "{} of {} extension{}; `abicache misses --json` shows what rebuilds each\n",
        plural(lines.len(), "miss"),
        names.len(),
        if names.len() == 1 { "" } else { "s" }
    ));
    out
}
