//! Regressions of the command line, each named after what broke.

use std::process::{Command, Stdio};

/// `abicache ls --json | head -1` panicked with "failed printing to stdout:
/// Broken pipe" and a backtrace once `head` had closed the pipe.
#[test]
fn closed_stdout_pipe_is_not_a_panic() {
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_abicache"))
        .args(["ls", "--json", "--cache-dir"])
        .arg(cache.path().join("c"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before anything is written
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}
