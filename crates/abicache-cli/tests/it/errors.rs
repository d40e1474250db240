//! What a user sees when something is wrong: exit codes (1 a failed build,
//! 2 bad input or an ABI refusal) and the messages on stderr, snapshot-tested.

use crate::common;

use common::*;

const ERRORS: &str = "tests/fixtures/errors/abicache.toml";

/// `abicache build ERRORS --extension NAME`, expecting exit `code`; returns stderr.
fn build_error(cache: &Cache, extension: &str, code: i32) -> String {
    let out = cache.run(args![
        "build",
        ERRORS,
        "--extension",
        extension,
        "--python",
        python(),
        "--quiet"
    ]);
    assert_exit(&out, code);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_input_exits_2_with_a_message_naming_the_problem() {
    let cache = Cache::new();
    let mut report = String::new();
    let mut case = |title: &str, argv: Vec<std::ffi::OsString>| {
        let out = cache.run(argv);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{err}");
        report.push_str(&format!("## {title}\n{err}\n"));
        err
    };
    let err = case(
        "bad extension name",
        args![
            "build",
            "tests/fixtures/bad_name/abicache.toml",
            "--python",
            python()
        ],
    );
    assert!(err.contains("not-an-identifier"), "{err}");
    let err = case(
        "missing source",
        args![
            "build",
            ERRORS,
            "--extension",
            "missing_source",
            "--python",
            python()
        ],
    );
    assert!(err.contains("does_not_exist.cpp"), "{err}");
    let err = case(
        "two extensions, no --extension",
        args!["build", ERRORS, "--python", python()],
    );
    assert!(err.contains("--extension"), "{err}");
    let err = case(
        "unknown --extension",
        args!["key", ERRORS, "--extension", "nope", "--python", python()],
    );
    assert!(err.contains("`nope`"), "{err}");
    case(
        "missing spec file",
        args![
            "build",
            "tests/fixtures/nope/abicache.toml",
            "--python",
            python()
        ],
    );
    case(
        "interpreter that does not exist",
        args![
            "key",
            "tests/fixtures/tiny/abicache.toml",
            "--python",
            "/nonexistent/python"
        ],
    );
    case(
        "scan of a missing source",
        args!["scan", "tests/fixtures/nope.cpp"],
    );
    case("unparseable gc size", args!["gc", "--max-size", "lots"]);
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("bad_input_errors", report));
    let stats = cache.stats();
    assert_eq!(
        (u64_of(&stats, "misses"), u64_of(&stats, "errors")),
        (0, 0),
        "bad input never reaches the cache: {stats}"
    );
}

#[test]
fn stable_target_above_the_installed_torch_is_refused_before_any_lookup() {
    let cache = Cache::new();
    let err = build_error(&cache, "stable_too_new", 2);
    assert!(
        err.contains("2.16") && err.contains("2.15.0"),
        "names the target and the torch found: {err}"
    );
    // Refused for the older torch too, and by `key` as well as `build`.
    let out = cache.run(args![
        "key",
        ERRORS,
        "--extension",
        "stable_too_new",
        "--python",
        python_compat()
    ]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("2.12.1"), "{}", stderr(&out));
    let stats = cache.stats();
    assert_eq!(
        u64_of(&stats, "misses"),
        0,
        "refused before the cache lookup: {stats}"
    );
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("refused_stable_target_above_torch", err));
}

#[test]
fn non_stable_header_under_a_stable_target_is_refused_naming_include_and_file() {
    let cache = Cache::new();
    let err = build_error(&cache, "stable_bad_header", 2);
    assert!(
        err.contains("ATen/core/Tensor.h") && err.contains("helper.h"),
        "{err}"
    );
    assert_eq!(u64_of(&cache.stats(), "misses"), 0);
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("refused_non_stable_header_under_stable_target", err));
}

#[test]
fn compile_error_exits_1_with_the_compiler_output_and_the_command() {
    let cache = Cache::new();
    let err = build_error(&cache, "compile_error", 1);
    assert!(
        err.contains("this_is_not_declared"),
        "the compiler's own message: {err}"
    );
    assert!(
        err.contains(" -c ") && err.contains("broken.cpp -o "),
        "the exact command: {err}"
    );
    assert_eq!(cache.ls(), Vec::<serde_json::Value>::new());
    let stats = cache.stats();
    assert_eq!(
        (u64_of(&stats, "errors"), u64_of(&stats, "builds")),
        (1, 0),
        "{stats}"
    );

    // Snapshot abicache's part and the compiler's diagnostic line; the rest of
    // the compiler's output (caret lines, notes) is the compiler's business.
    let (head, compiler) = err
        .split_once("compiler output:\n")
        .expect("a `compiler output:` section");
    let diagnostics: Vec<&str> = compiler
        .lines()
        .filter(|l| l.contains(": error:"))
        .collect();
    let shown = format!("{head}compiler output:\n{}\n", diagnostics.join("\n"));
    let mut settings = cache.settings();
    // The compiler as found (`CXX`, else `c++` on PATH) and the temporary object name.
    settings.add_filter(r"(?m)^  \S*(c\+\+|g\+\+|clang\+\+)\S* ", "  [CXX] ");
    settings.add_filter(r"\.\[HASH\]\.\d+-\d+\.tmp\.o", ".[OBJECT].tmp.o");
    settings.bind(|| insta::assert_snapshot!("compile_error", shown));
}

/// Issue 15: an unusable `ABICACHE_PCH` is a typed error
/// (`Error::InvalidVariable`) naming the variable, its value and the fix,
/// refused as bad input (exit 2) before any compiler runs.
#[test]
fn an_unusable_abicache_pch_is_refused_naming_the_variable() {
    let cache = Cache::new();
    let mut cmd = cache.cmd(args![
        "build",
        "examples/cpu_muladd/abicache.toml",
        "--python",
        python(),
        "--quiet"
    ]);
    cmd.env("ABICACHE_PCH", "sometimes");
    let out = cmd.output().expect("run abicache");
    assert_exit(&out, 2);
    assert_eq!(
        stderr(&out).trim_end(),
        "error: `ABICACHE_PCH=sometimes` is not understood: use `0` to turn precompiled \
         headers off, or `auto` (the default)"
    );
    assert!(cache.ls().is_empty(), "nothing was published");
}
