//! `abicache run -- CMD`: the environment it sets, and the command's exit
//! status, terminating signal and streams passed through (the process is
//! replaced). Interception in Python processes is tested end to end in
//! `tests/python/test_intercept.py`.

use crate::common;

use std::os::unix::process::ExitStatusExt;

use common::*;

#[test]
fn run_sets_the_interception_variables_and_an_absolute_cache_dir() {
    let cache = Cache::new();
    let out = cache
        .cmd(args![
            "run",
            "--cache-dir",
            "relative/cache",
            "--",
            "sh",
            "-c",
            "printf '%s|%s|%s' \"$ABICACHE_INTERCEPT\" \"$ABICACHE_DIR\" \"${PYTHONPATH-unset}\""
        ])
        .output()
        .unwrap();
    assert_success(&out);
    // The cargo binary knows no package directory: PYTHONPATH is left alone.
    let expected = format!("1|{}|unset", repo_path("relative/cache").display());
    assert_eq!(stdout(&out), expected);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn run_verbose_asks_for_verbose_interception_and_says_what_it_set() {
    let cache = Cache::new();
    let out = cache.run(args![
        "run",
        "--verbose",
        "sh",
        "-c",
        "printf %s \"$ABICACHE_INTERCEPT\""
    ]);
    assert_success(&out);
    assert_eq!(stdout(&out), "verbose");
    assert!(
        stderr(&out).starts_with("abicache run: ABICACHE_INTERCEPT=verbose\n"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn run_passes_the_exit_status_the_signal_and_the_streams_through() {
    let cache = Cache::new();
    assert_exit(&cache.run(args!["run", "--", "sh", "-c", "exit 7"]), 7);
    let out = cache.run(args!["run", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.signal(), Some(15), "{:?}", out.status);
    let out = cache.run(args!["run", "--", "sh", "-c", "echo out; echo err >&2"]);
    assert_success(&out);
    assert_eq!(
        (stdout(&out).as_str(), stderr(&out).as_str()),
        ("out\n", "err\n")
    );
}

#[test]
fn run_without_a_command_or_with_an_unknown_one_is_a_clear_error() {
    let cache = Cache::new();
    let missing = cache.run(args!["run"]);
    assert_exit(&missing, 2);
    let unknown = cache.run(args!["run", "--", "abicache-no-such-command", "x"]);
    assert_exit(&unknown, 127);
    insta::assert_snapshot!(
        "run_errors",
        format!(
            "## no CMD (exit 2)\n{}\n## unknown CMD (exit 127)\n{}",
            stderr(&missing),
            stderr(&unknown)
        )
    );
}
