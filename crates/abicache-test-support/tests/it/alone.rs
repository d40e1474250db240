//! `alone_in_process` as `cargo test` runs a binary (its tests as threads of
//! one process, no `NEXTEST_EXECUTION_MODE`): the test reruns alone in a
//! child process, and a misnamed test fails instead of passing unseen.

use std::path::Path;
use std::process::{Command, Stdio};

use abicache_test_support::alone_in_process;

/// Where `changes_the_current_directory` writes the id of the process it ran in.
const PID_FILE_VAR: &str = "ABICACHE_TEST_ALONE_PID_FILE";

#[test]
fn changes_the_current_directory() {
    if !alone_in_process("alone::changes_the_current_directory") {
        return;
    }
    std::env::set_current_dir("/").unwrap();
    assert_eq!(std::env::current_dir().unwrap(), Path::new("/"));
    if let Some(file) = std::env::var_os(PID_FILE_VAR) {
        std::fs::write(file, std::process::id().to_string()).unwrap();
    }
}

#[test]
#[ignore = "run only by a_misnamed_test_fails_naming_its_name"]
fn misnamed() {
    alone_in_process("alone::not_this_test");
}

/// This test binary, run as `cargo test` runs it, with only `test`.
fn as_cargo_test(test: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--include-ignored"])
        .env_remove("NEXTEST_EXECUTION_MODE")
        .env_remove("ABICACHE_TEST_ALONE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn under_cargo_test_the_test_runs_in_a_child_process_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let runner = as_cargo_test("alone::changes_the_current_directory")
        .env(PID_FILE_VAR, &pid_file)
        .spawn()
        .unwrap();
    let runner_pid = runner.id();
    let out = runner.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}"
    );
    let ran_in: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert_ne!(
        ran_in, runner_pid,
        "the body ran in the runner's own process"
    );
}

#[test]
fn a_misnamed_test_fails_naming_its_name() {
    let out = as_cargo_test("alone::misnamed").output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("`alone::not_this_test`, run alone in a process of its own")
            && text.contains("did not pass exactly one test"),
        "{text}"
    );
}
