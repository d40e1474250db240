//! The session's miss decision, in one place: what a key that no source
//! holds leads to under the miss settings (`abicache_settings::MissSettings`).
//!
//! - Offline (`ABICACHE_OFFLINE=1`): no compile; a [`CacheMiss`] error
//!   naming the extension, the key, the closest entry the cache holds with
//!   the fields that differ (as `abicache explain` shows them) and the
//!   command that would build it.
//! - `warn`: one line on stderr, then the build.
//! - With a miss report (`ABICACHE_MISS_REPORT`), in every mode: one JSON
//!   line appended per miss ([`append_line`]: one `write` of the whole line
//!   on a file opened with `O_APPEND`, under an exclusive `flock` on that
//!   file, so lines from many processes never interleave).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use abicache_key::FieldChange;

/// A key no source holds, under offline mode: nothing was compiled.
#[derive(Debug, Clone)]
pub struct CacheMiss {
    /// The extension.
    pub extension: String,
    /// The key asked for.
    pub key: String,
    /// Why it is a miss ([`MissReason`]).
    pub reason: MissReason,
    /// The sources it was looked for in, in order (`local cache`, …).
    pub sources: Vec<&'static str>,
    /// The closest entry of the same extension the local cache holds, with
    /// the fields that differ; `None` when it holds none.
    pub closest: Option<ClosestEntry>,
    /// The command that would build it where compiling is allowed.
    pub command: String,
}

/// Why a key is a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissReason {
    /// No source holds the key, and the cache holds no entry of the extension.
    NotCached,
    /// No source holds the key; the cache holds the extension under another key.
    KeyDiffers,
    /// A rebuild was asked for (`--rebuild`, `ABICACHE_REBUILD=1`, or a
    /// cached library the loader refused).
    Rebuild,
}

impl MissReason {
    /// A short phrase for tables and messages.
    pub fn describe(self) -> &'static str {
        match self {
            MissReason::NotCached => "not cached: no entry of the extension",
            MissReason::KeyDiffers => "key differs from the cached entries",
            MissReason::Rebuild => "rebuild asked for",
        }
    }
}

impl fmt::Display for CacheMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cache miss in offline mode (`ABICACHE_OFFLINE=1` or `--offline`): extension `{}` \
             key {} ",
            self.extension, self.key
        )?;
        match self.reason {
            MissReason::Rebuild => write!(f, "was to be rebuilt, which offline mode forbids")?,
            _ => write!(f, "is in none of: {}", self.sources.join(", "))?,
        }
        writeln!(f, "; nothing was compiled.")?;
        f.write_str(&render_closest(&self.extension, self.closest.as_ref()))?;
        write!(
            f,
            "To build it, run where compiling is allowed: {} (or set `ABICACHE_OFFLINE=warn` \
             to build and report each miss)",
            self.command
        )
    }
}

/// One line of the miss report.
#[derive(Debug, Serialize)]
pub struct MissLine<'a> {
    /// UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub time: String,
    /// The process that missed.
    pub pid: u32,
    /// The extension.
    pub extension: &'a str,
    /// The key.
    pub key: &'a str,
    /// Why it missed.
    pub reason: MissReason,
    /// The offline mode it missed under (`0`, `1`, `warn`).
    pub offline: &'static str,
    /// The closest cached entry's key and how this key differs, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closest: Option<ClosestLine>,
    /// What rebuilds it: the command, the spec, its fingerprint root and
    /// the environment the key was computed in.
    pub rebuild: RebuildLine<'a>,
}

/// The closest cached entry, in a [`MissLine`].
#[derive(Debug, Serialize)]
pub struct ClosestLine {
    /// Its key.
    pub key: String,
    /// Each differing field as `abicache explain` prints it.
    pub differs: Vec<String>,
}

/// What rebuilds a missed key, in a [`MissLine`].
#[derive(Debug, Serialize)]
pub struct RebuildLine<'a> {
    /// The command that would build it.
    pub command: &'a str,
    /// The extension spec.
    pub spec: &'a abicache_key::ExtensionSpec,
    /// The fingerprint root its paths are keyed under.
    pub root: PathBuf,
    /// The environment (ABI facts) the key was computed in.
    pub environment: &'a abicache_key::Environment,
}

impl ClosestLine {
    /// The text form of `closest`.
    pub fn of(closest: &ClosestEntry) -> Self {
        ClosestLine {
            key: closest.key.clone(),
            differs: closest.changes.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Appends `line` (one JSON object, no newline) and a newline to the miss
/// report at `path`, creating it (and its directory) when missing: the file
/// is opened with `O_APPEND`, locked with an exclusive `flock` (released
/// when it is closed), and the whole line is written by one `write_all`
/// (a single `write` for any line of reasonable size), so concurrent
/// appends from many processes never interleave.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::create_dir_all(dir)?;
    }
    let file = fs_err::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    rustix::fs::flock(file.file(), rustix::fs::FlockOperation::LockExclusive).map_err(|e| {
        std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("cannot lock the miss report `{}`: {e}", path.display()),
        )
    })?;
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let mut file = file;
    file.write_all(&bytes)
}

/// `time` as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_timestamp(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z: a leap day.
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(utc_timestamp(t), "2024-02-29T12:34:56.789Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_798_761_599);
        assert_eq!(utc_timestamp(t), "2026-12-31T23:59:59.000Z");
    }

    #[test]
    fn appends_add_whole_lines_and_create_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("sub/misses.jsonl");
        append_line(&report, r#"{"a":1}"#).unwrap();
        append_line(&report, r#"{"a":2}"#).unwrap();
        assert_eq!(
            std::fs::read_to_string(&report).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
    }
}

/// A cached entry of the same extension and how its payload differs.
#[derive(Debug, Clone, Serialize)]
pub struct ClosestEntry {
    /// Its key.
    pub key: String,
    /// Field-by-field changes, from the cached entry (old) to this request (new).
    pub changes: Vec<FieldChange>,
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
