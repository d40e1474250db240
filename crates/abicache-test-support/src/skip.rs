//! Skips that are seen: a test that cannot run here says so, and a run that
//! promised everything is there turns a skip into a failure.
//!
//! Rust's test harness has no "skipped" result: a test that returns early
//! passes. [`skip`] makes that visible twice over. It prints the reason to
//! stderr and appends one line to the file `$ABICACHE_TEST_SKIP_LOG` when
//! that is set (`scripts/test.sh` lists the file at the end of the run). With
//! `ABICACHE_TEST_NO_SKIPS=1` (which `scripts/test.sh` sets, since it installs
//! everything the tests need first) it panics instead, so a missing
//! prerequisite fails the run instead of passing it unseen.

use std::io::Write;

/// The variable naming the file every skip is appended to.
pub const SKIP_LOG_VAR: &str = "ABICACHE_TEST_SKIP_LOG";
/// The variable that turns a [`skip`] into a failure when it is `1`.
pub const NO_SKIPS_VAR: &str = "ABICACHE_TEST_NO_SKIPS";

/// The start of the reason of a [`skip_for_hardware`] (the same words as
/// `tests/skip_report.py`'s `skip_for_hardware`).
pub const HARDWARE: &str = "needs hardware this machine lacks: ";
/// The start of the reason of a [`skip_for_privilege`].
pub const PRIVILEGE: &str = "needs a privilege this process lacks: ";

/// Reports that the calling test cannot run here, for `why` (what is
/// missing and how to get it); the caller then returns. Panics instead
/// under `ABICACHE_TEST_NO_SKIPS=1`.
#[track_caller]
pub fn skip(why: &str) {
    let test = test_name();
    if std::env::var(NO_SKIPS_VAR).is_ok_and(|v| v == "1") {
        panic!(
            "{test} would be skipped ({why}), but {NO_SKIPS_VAR}=1 (scripts/test.sh sets up \
             everything the tests need, so a skip there means the set-up is broken)"
        );
    }
    record(&test, why);
}

/// Reports that the calling test cannot run because this machine lacks
/// hardware it needs (a GPU, a CPU feature), which no set-up can install:
/// seen like [`skip`], but allowed under `ABICACHE_TEST_NO_SKIPS=1`.
pub fn skip_for_hardware(what: &str) {
    record(&test_name(), &format!("{HARDWARE}{what}"));
}

/// Reports that the calling test cannot run because the process lacks an
/// operating-system privilege it needs (mounting, changing a file's owner),
/// which containers often withhold: seen like [`skip`], but allowed under
/// `ABICACHE_TEST_NO_SKIPS=1`. A test using it should have a sibling that
/// checks the same rule without the privilege.
pub fn skip_for_privilege(what: &str) {
    record(&test_name(), &format!("{PRIVILEGE}{what}"));
}

/// Prints the skip to stderr and appends it to `$ABICACHE_TEST_SKIP_LOG`.
fn record(test: &str, why: &str) {
    eprintln!("\n!!!!!!!! SKIPPED: {why} !!!!!!!!\n");
    if let Some(log) = std::env::var_os(SKIP_LOG_VAR) {
        let line = format!("rust {test}: {}\n", why.replace('\n', " "));
        // One `write` of one line with O_APPEND: lines from tests running at
        // once do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "could not record the skip in `{}`: {e}",
                log.to_string_lossy()
            );
        }
    }
}

/// `binary::test` of the running test (libtest names each test's thread
/// after it; nextest runs one test a process).
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_owned())
        })
        .unwrap_or_else(|| "?".to_owned());
    let thread = std::thread::current();
    format!("{binary}::{}", thread.name().unwrap_or("?"))
}
