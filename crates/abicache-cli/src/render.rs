//! What the commands print: JSON shapes (a scripting contract) and human text.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use abicache::key::Payload;
use abicache::scan::ScanReport;
use abicache::store::{Counters, EntryInfo, GcReport, Stats};
use serde_json::{json, Value};

/// `abicache scan --json`.
pub fn scan_json(report: &ScanReport) -> Value {
    let mut non_stable: Vec<&str> = Vec::new();
    for t in report.non_stable_headers() {
        if !non_stable.contains(&t.include.as_str()) {
            non_stable.push(&t.include);
        }
    }
    let missing: Vec<&String> = report
        .sources
        .iter()
        .flat_map(|s| &s.missing_includes)
        .collect();
    let computed: Vec<&abicache::scan::ComputedInclude> = report
        .sources
        .iter()
        .flat_map(|s| &s.computed_includes)
        .collect();
    json!({
        "files": report.unique_files(),
        "missing_includes": missing,
        "computed_includes": computed,
        "python_abi_dependent": report.python_abi_dependent(),
        "python_markers": report.python_markers,
        "stable_registration": report.stable_registration(),
        "non_stable_headers": non_stable,
        "stable_candidate": report.stable_candidate(),
    })
}

/// `abicache key --json`.
pub fn key_json(name: &str, key: &str, payload: &Payload) -> Value {
    json!({
        "name": name,
        "key": key,
        "payload": payload.lines(),
        "python_abi": payload.python_abi(),
        "torch_abi": payload.torch_abi(),
    })
}

/// `abicache key`: the key, the two ABI decisions, then the payload.
pub fn key_human(name: &str, key: &str, payload: &Payload) -> String {
    let mut out = format!(
        "{name} {key}\n  python_abi: {}\n  torch_abi:  {}\npayload:\n",
        payload.python_abi().unwrap_or("?"),
        payload.torch_abi().unwrap_or("?"),
    );
    for line in payload.lines() {
        out.push_str("  ");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One entry of `abicache ls --json`.
pub fn entry_json(e: &EntryInfo) -> Value {
    let payload = Payload::parse(&e.manifest.payload).ok();
    let payload = payload.as_ref();
    json!({
        "key": e.key,
        "name": e.name,
        "library": e.dir.join(&e.manifest.library),
        "size": e.size,
        "created": e.created,
        "last_used": unix_secs(e.last_used),
        "python_abi": payload.and_then(Payload::python_abi),
        "torch_abi": payload.and_then(Payload::torch_abi),
        "compile_seconds": e.manifest.compile_seconds,
        "units": e.manifest.units,
        "toolchain": e.manifest.toolchain,
        "audit": e.manifest.audit,
    })
}

/// `abicache ls`: one line per entry.
pub fn entries_human(entries: &[EntryInfo]) -> String {
    if entries.is_empty() {
        return "the cache is empty\n".into();
    }
    let mut out = format!(
        "{:<24} {:<32} {:>10} {:<24} {}\n",
        "NAME", "KEY", "SIZE", "PYTHON ABI", "TORCH ABI"
    );
    for e in entries {
        let v = entry_json(e);
        let s = |k: &str| v[k].as_str().unwrap_or("-").to_string();
        out.push_str(&format!(
            "{:<24} {:<32} {:>10} {:<24} {}\n",
            e.name,
            e.key,
            human_size(e.size),
            s("python_abi"),
            s("torch_abi")
        ));
    }
    out
}

/// `abicache gc`.
pub fn gc_human(r: &GcReport) -> String {
    let mut out = format!(
        "evicted {} entr{} ({} → {})\n",
        r.evicted.len(),
        if r.evicted.len() == 1 { "y" } else { "ies" },
        human_size(r.bytes_before),
        human_size(r.bytes_after)
    );
    for e in &r.evicted {
        out.push_str(&format!("  {} {} {}\n", e.name, e.key, human_size(e.size)));
    }
    if r.objects_evicted > 0 {
        out.push_str(&format!(
            "  {} compiled object{} ({})\n",
            r.objects_evicted,
            if r.objects_evicted == 1 { "" } else { "s" },
            human_size(r.object_bytes_freed)
        ));
    }
    if r.objects_skipped_busy {
        out.push_str(
            "  compiled objects kept: a build is running (run `abicache gc` again later)\n",
        );
    }
    for key in &r.skipped_locked {
        out.push_str(&format!(
            "  skipped {key}: being built or used by another process\n"
        ));
    }
    if r.skipped_recent > 0 {
        out.push_str(&format!(
            "  kept {} entries or objects used in the last `ABICACHE_GC_GRACE` seconds\n",
            r.skipped_recent
        ));
    }
    for err in &r.errors {
        out.push_str(&format!("  error: {err}\n"));
    }
    out
}

/// `abicache stats`, laid out like `ccache -s`.
pub fn stats_human(stats: &Stats, root: &Path) -> String {
    let s = &stats.counters;
    let lookups = s.hits + s.misses;
    let rate = if lookups == 0 {
        0.0
    } else {
        100.0 * s.hits as f64 / lookups as f64
    };
    format!(
        "cache directory      {}\n\
         cache mode           {}\n\
         hits                 {}\n\
         misses               {}\n\
         hit rate             {rate:.1} %\n\
         builds               {}\n\
         failed builds        {}\n\
         corrupt entries      {}\n\
         evictions            {}\n\
         build time           {:.1} s\n\
         time saved by hits   {:.1} s\n\
         entries              {}\n\
         size                 {}\n",
        root.display(),
        stats.mode.reason,
        s.hits,
        s.misses,
        s.builds,
        s.errors,
        s.corrupt,
        s.evictions,
        s.build_seconds,
        s.saved_seconds,
        stats.entries,
        human_size(stats.bytes)
    ) + &layer_stats_human(s)
        + &pch_stats_human(stats)
        + &peak_stats_human(stats)
        + &device_step_stats_human(s)
        + &remote_stats_human(s)
}

/// The CUDA device-step lines of `abicache stats`, one per architecture,
/// shown once a CUDA unit was compiled through nvcc's phase split
/// (docs/building.md, "CUDA device code per architecture").
fn device_step_stats_human(s: &Counters) -> String {
    s.device_steps
        .iter()
        .map(|(arch, counts)| {
            let remote = match counts.from_remote {
                0 => String::new(),
                n => format!(" ({n} from the remote)"),
            };
            format!(
                "device steps {arch:<8}{} reused{remote}, {} compiled\n",
                counts.reused, counts.compiled
            )
        })
        .collect()
}

/// The compile-memory line of `abicache stats`, shown once a compile was
/// measured: the largest peak resident memory one compile had (it sets how
/// many compiles run at once, docs/building.md).
fn peak_stats_human(stats: &Stats) -> String {
    match stats.largest_peak_rss {
        Some(bytes) => format!("largest compile RSS  {}\n", human_size(bytes)),
        None => String::new(),
    }
}

/// The read-only-layer line of `abicache stats`, shown once a layer served a hit.
fn layer_stats_human(s: &Counters) -> String {
    if s.layer_hits == 0 {
        return String::new();
    }
    format!("hits from layers     {}\n", s.layer_hits)
}

/// The precompiled-header lines of `abicache stats`, shown once one was built or used.
fn pch_stats_human(stats: &Stats) -> String {
    let c = &stats.counters;
    let skipped = c.pch_skipped_first_use
        + c.pch_skipped_busy
        + c.pch_skipped_machine_slots
        + c.pch_skipped_over_cap;
    if stats.pchs + c.pch_hits + c.pch_builds_started + skipped == 0 {
        return String::new();
    }
    format!(
        "precompiled headers  {}\n\
         pch size             {}\n\
         units using a pch    {}\n\
         pch builds           {} started, {} finished, {} evicted\n\
         pch builds skipped   {} first use, {} busy, {} machine slots full, {} over cap\n",
        stats.pchs,
        human_size(stats.pch_bytes),
        c.pch_hits,
        c.pch_builds_started,
        c.pch_builds_finished,
        c.pch_evicted,
        c.pch_skipped_first_use,
        c.pch_skipped_busy,
        c.pch_skipped_machine_slots,
        c.pch_skipped_over_cap,
    )
}

/// The remote-cache lines of `abicache stats`, shown once a remote was used.
fn remote_stats_human(s: &Counters) -> String {
    let objects = s.remote_object_hits + s.remote_object_uploads;
    if s.remote_hits + s.remote_misses + s.remote_errors + s.remote_uploads + objects == 0 {
        return String::new();
    }
    format!(
        "remote hits          {}\n\
         remote misses        {}\n\
         remote errors        {}\n\
         remote uploads       {}\n\
         remote objects       {} down, {} up\n\
         remote downloaded    {}\n\
         remote uploaded      {}\n",
        s.remote_hits,
        s.remote_misses,
        s.remote_errors,
        s.remote_uploads,
        s.remote_object_hits,
        s.remote_object_uploads,
        human_size(s.remote_bytes_down),
        human_size(s.remote_bytes_up)
    )
}

/// Bytes as `1.5 MiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The line `abicache audit` and `abicache explain` show for a library's
/// device code: `device code: sm_80, compute_90` (`none` for a CPU library).
pub fn device_images_line(images: &[String]) -> String {
    match images {
        [] => "device code: none (no CUDA fat binary)\n".to_owned(),
        _ => format!("device code: {}\n", images.join(", ")),
    }
}
