//! The temporary files an export writes beside its output (a bundle, a
//! cache wheel) and renames into place. A `kill -9` leaves one behind, so
//! each is named after its writer (`.abicache-<kind>-<pid>-<random>.partial`)
//! and the next export into the same directory removes those whose writer
//! is gone (no process with that id here) and that were last written more
//! than [`STALE_AFTER`] ago (a writer on another machine sharing the
//! directory is spared while it writes).

use std::path::Path;
use std::time::Duration;

/// How long a partial file of a dead writer is kept (it may be another
/// machine's, on a shared directory, still being written).
pub const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// **Test-only** (never set it otherwise): when this variable is set, an
/// export stops itself with `SIGSTOP` once its partial file is written and
/// before it is renamed into place, so a test can `kill -9` it at that
/// point. Read nowhere else and not a setting (not in the variable table).
pub const TEST_ONLY_STOP_BEFORE_RENAME: &str = "ABICACHE_TEST_ONLY_STOP_BEFORE_RENAME";

/// A fresh partial file for an output of `kind` (`wheel`, `bundle`) in
/// `dir`, after removing the stale ones of that kind there (best effort).
pub(crate) fn create(dir: &Path, kind: &str) -> std::io::Result<tempfile::NamedTempFile> {
    remove_stale(dir, kind);
    tempfile::Builder::new()
        .prefix(&format!(".abicache-{kind}-{}-", std::process::id()))
        .suffix(".partial")
        .tempfile_in(dir)
}

/// The test-only stop point ([`TEST_ONLY_STOP_BEFORE_RENAME`]).
pub(crate) fn test_only_stop_point() {
    if std::env::var_os(TEST_ONLY_STOP_BEFORE_RENAME).is_some() {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::STOP);
    }
}

/// Removes the partial files of `kind` in `dir` whose writer is gone and
/// that were last written more than [`STALE_AFTER`] ago.
fn remove_stale(dir: &Path, kind: &str) {
    let prefix = format!(".abicache-{kind}-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .filter(|n| n.ends_with(".partial"))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if meta.is_file() && old && !alive(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether a process with id `pid` exists on this machine (one we may not
/// signal exists too).
fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}
