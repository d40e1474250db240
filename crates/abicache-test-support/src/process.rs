//! A test that changes process-wide state runs in a process of its own.

use std::process::Command;

/// The variable that marks the child process [`alone_in_process`] starts.
const ALONE_VAR: &str = "ABICACHE_TEST_ALONE";

/// Whether the calling test is alone in its process, so that it may change
/// process-wide state (the current directory, an environment variable)
/// without racing the tests beside it. `test` is its name as the test
/// harness lists it (`module::function`, without the binary's name).
///
/// - Under nextest (`NEXTEST_EXECUTION_MODE=process-per-test`, what
///   `scripts/test.sh` runs), and in the child started below: true.
/// - Otherwise (`cargo test` runs a binary's tests as threads of one
///   process): runs this test binary again with only `test` (`--exact`), in
///   a child process, panics with the child's output unless exactly that one
///   test passed there, and returns false: the caller returns at once.
///
/// ```no_run
/// #[test]
/// fn a_bare_name_is_relative_to_the_current_directory() {
///     if !abicache_test_support::alone_in_process(
///         "regression::a_bare_name_is_relative_to_the_current_directory",
///     ) {
///         return;
///     }
///     std::env::set_current_dir("/").unwrap();
/// }
/// ```
pub fn alone_in_process(test: &str) -> bool {
    if std::env::var("NEXTEST_EXECUTION_MODE").as_deref() == Ok("process-per-test")
        || std::env::var(ALONE_VAR).as_deref() == Ok(test)
    {
        return true;
    }
    let exe = std::env::current_exe().expect("the running test binary's path");
    let out = Command::new(&exe)
        .args([test, "--exact", "--test-threads=1"])
        .env(ALONE_VAR, test)
        .output()
        .unwrap_or_else(|e| panic!("running {} again failed: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "`{test}`, run alone in a process of its own ({} {test} --exact), did not pass exactly \
         one test (is `{test}` the test's name as `--list` prints it?):\nstdout:\n{stdout}\nstderr:\n{}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}
