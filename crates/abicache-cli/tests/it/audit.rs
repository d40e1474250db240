//! Issue 5 through the binary: `abicache audit` on real libraries built by
//! the project's own build path, the audit on publish refusing libraries
//! that contradict their key, and malformed input.

use crate::common;

use std::path::Path;

use common::*;

#[test]
fn pybind11_module_audits_as_cpython_dependent_and_imports() {
    let cache = Cache::new();
    let built = cache.build(
        &repo_path("tests/fixtures/pybind_module/abicache.toml"),
        &python(),
        &[],
    );
    let library = Path::new(built["path"].as_str().unwrap());
    let audit = cache.json(args!["audit", library, "--json"]);
    let cpython = strings(&audit["imports"]["cpython"]);
    assert!(
        !cpython.is_empty(),
        "a pybind11 module imports CPython: {audit}"
    );
    assert!(
        cpython
            .iter()
            .all(|s| s.starts_with("Py") || s.starts_with("_Py")),
        "{cpython:?}"
    );
    let entry = &cache.ls()[0];
    assert!(
        entry["python_abi"]
            .as_str()
            .unwrap()
            .starts_with("cpython-"),
        "{entry}"
    );
    assert_eq!(entry["audit"], audit);
    let human = cache.run(args!["audit", library]);
    assert_success(&human);
    assert!(
        !stdout(&human).contains("independent of the Python ABI"),
        "{}",
        stdout(&human)
    );

    // It is a real module: importlib loads it and it computes.
    let code = r#"
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("pybind_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.add_one(torch.tensor([1.0, 2.0])).tolist())
"#;
    assert_eq!(python_run(&python(), code, library), "[2.0, 3.0]");
}

/// Builds `spec`, expects the publish-time audit to refuse it, and checks
/// that nothing was stored. Returns stderr.
fn refused_at_publish(cache: &Cache, spec: &str) -> String {
    let out = cache.run(args!["build", spec, "--python", python(), "--quiet"]);
    assert_exit(&out, 1);
    assert!(
        stdout(&out).is_empty(),
        "no path is printed: {}",
        stdout(&out)
    );
    assert_eq!(
        cache.ls(),
        Vec::<serde_json::Value>::new(),
        "a refused library must not be published"
    );
    let stats = cache.stats();
    assert_eq!(
        (
            u64_of(&stats, "builds"),
            u64_of(&stats, "errors"),
            u64_of(&stats, "entries")
        ),
        (0, 1, 0),
        "{stats}"
    );
    stderr(&out)
}

#[test]
fn agnostic_override_calling_pylong_fromlong_is_refused_at_publish() {
    let cache = Cache::new();
    let err = refused_at_publish(&cache, "tests/fixtures/pylong_agnostic/abicache.toml");
    assert!(err.contains("PyLong_FromLong"), "{err}");
    assert!(
        err.contains("python_abi_dependent = true"),
        "the fix is named: {err}"
    );
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("refused_agnostic_with_cpython_import", err));
}

#[test]
fn stable_target_calling_a_libtorch_cxx_symbol_through_extern_is_refused_at_publish() {
    let cache = Cache::new();
    // Header validation passes (only a torch/headeronly include): the key is computed.
    let key = cache.json(args![
        "key",
        "tests/fixtures/stable_extern_cxx/abicache.toml",
        "--python",
        python(),
        "--json"
    ]);
    assert_eq!(key["torch_abi"], "stable-2.10");
    let err = refused_at_publish(&cache, "tests/fixtures/stable_extern_cxx/abicache.toml");
    assert!(err.contains("c10::detail::torchCheckFail"), "{err}");
    assert!(
        err.contains("_ZN3c106detail14torchCheckFail"),
        "the raw name is shown too: {err}"
    );
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("refused_stable_with_libtorch_cxx_import", err));
}

#[test]
fn audit_of_truncated_non_elf_and_empty_files_exits_2_without_panicking() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    // A real ELF (this test's own binary under test), cut after its headers.
    let elf = std::fs::read(env!("CARGO_BIN_EXE_abicache")).unwrap();
    let cases: [(&str, &[u8]); 4] = [
        ("truncated.so", &elf[..200]),
        ("header_only.so", &elf[..64]),
        ("not_elf.so", b"this is a text file, not a shared library\n"),
        ("empty.so", b""),
    ];
    let mut report = String::new();
    for (name, bytes) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        for json in [false, true] {
            let mut argv = args!["audit", path];
            if json {
                argv.push("--json".into());
            }
            let out = cache.run(argv);
            assert_exit(&out, 2);
            let err = stderr(&out);
            assert!(!err.contains("panicked"), "{err}");
            assert!(err.contains(name), "the message names the file: {err}");
            if !json {
                report.push_str(&format!("$ abicache audit {name}\n{err}\n"));
            }
        }
    }
    let missing = cache.run(args!["audit", tmp.path().join("missing.so")]);
    assert_exit(&missing, 2);
    report.push_str(&format!(
        "$ abicache audit missing.so\n{}",
        stderr(&missing)
    ));
    common::settings(&[(tmp.path(), "[DIR]")])
        .bind(|| insta::assert_snapshot!("audit_malformed_inputs", report));
}
