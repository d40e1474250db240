//! The JSON contracts of `abicache scan` and `abicache key` (field names
//! are a scripting interface), and `--env ENV.toml` agreeing with
//! `--python` (wheel-tag normalisation end to end). No compiles.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use serde_json::Value;

fn field_names(value: &Value) -> BTreeSet<&str> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect()
}

const SCAN_FIELDS: [&str; 8] = [
    "computed_includes",
    "files",
    "missing_includes",
    "non_stable_headers",
    "python_abi_dependent",
    "python_markers",
    "stable_candidate",
    "stable_registration",
];

#[test]
fn scan_json_has_the_documented_fields_on_the_examples() {
    let cache = Cache::new();
    let muladd = cache.json(args![
        "scan",
        "examples/cpu_muladd/ops.cpp",
        "examples/cpu_muladd/kernel.cpp",
        "--root",
        "examples/cpu_muladd",
        "--json"
    ]);
    assert_eq!(field_names(&muladd), BTreeSet::from(SCAN_FIELDS));
    let files: Vec<&str> = muladd["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        ["ops.cpp", "muladd.h", "kernel.cpp"],
        "depth-first, each file once"
    );
    for file in muladd["files"].as_array().unwrap() {
        assert_eq!(field_names(file), BTreeSet::from(["path", "blake3"]));
        assert_eq!(file["blake3"].as_str().unwrap().len(), 64);
    }
    assert_eq!(muladd["python_abi_dependent"], false);
    assert_eq!(muladd["python_markers"], serde_json::json!([]));
    assert_eq!(muladd["stable_registration"], false);
    assert_eq!(muladd["stable_candidate"], false);
    assert!(
        strings(&muladd["non_stable_headers"]).contains(&"torch/library.h".to_string()),
        "{muladd}"
    );

    let stable = cache.json(args!["scan", "examples/stable_scale/scale.cpp", "--json"]);
    assert_eq!(field_names(&stable), BTreeSet::from(SCAN_FIELDS));
    assert_eq!(
        stable["files"][0]["path"], "examples/stable_scale/scale.cpp",
        "relative to the current directory"
    );
    assert_eq!(stable["stable_registration"], true);
    assert_eq!(stable["stable_candidate"], true);
    assert_eq!(stable["non_stable_headers"], serde_json::json!([]));
    assert_eq!(stable["python_abi_dependent"], false);
}

#[test]
fn scan_json_reports_python_markers_missing_and_computed_includes() {
    let cache = Cache::new();
    let out = cache.json(args![
        "scan",
        "tests/fixtures/scan_markers/markers.cpp",
        "--root",
        "tests/fixtures/scan_markers",
        "--json"
    ]);
    assert_eq!(field_names(&out), BTreeSet::from(SCAN_FIELDS));
    for marker in out["python_markers"].as_array().unwrap() {
        assert_eq!(
            field_names(marker),
            BTreeSet::from(["file", "line", "marker"])
        );
    }
    let markers: Vec<String> = out["python_markers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["marker"].to_string())
        .collect();
    assert!(
        !markers.iter().any(|m| m.contains("py::")),
        "a string literal is not a marker: {markers:?}"
    );
    let pretty = serde_json::to_string_pretty(&out).unwrap();
    common::settings(&[]).bind(|| insta::assert_snapshot!("scan_json_markers", pretty));

    // The human summary of the same scan.
    let human = cache.run(args![
        "scan",
        "tests/fixtures/scan_markers/markers.cpp",
        "--root",
        "tests/fixtures/scan_markers"
    ]);
    assert_success(&human);
    common::settings(&[]).bind(|| insta::assert_snapshot!("scan_human_markers", stdout(&human)));
}

#[test]
fn key_json_has_the_documented_fields() {
    let cache = Cache::new();
    let key = cache.json(args![
        "key",
        "examples/cpu_muladd/abicache.toml",
        "--python",
        python(),
        "--json"
    ]);
    assert_eq!(
        field_names(&key),
        BTreeSet::from(["key", "name", "payload", "python_abi", "torch_abi"])
    );
    assert_eq!(key["name"], "muladd_example");
    let hex = key["key"].as_str().unwrap();
    assert!(
        hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{hex}"
    );
    assert_eq!(key["python_abi"], "agnostic");
    assert_eq!(key["torch_abi"], "2.15.0");
    let payload = strings(&key["payload"]);
    assert_eq!(payload[0], "format=1");
    assert!(payload.contains(&"torch=2.15.0".to_string()), "{payload:?}");
    assert!(
        !payload.iter().any(|l| l.starts_with("torch_cuda=")),
        "CPU only: {payload:?}"
    );

    // The pybind11 module is keyed on the Python ABI.
    let module = cache.json(args![
        "key",
        "tests/fixtures/pybind_module/abicache.toml",
        "--python",
        python(),
        "--json"
    ]);
    assert!(
        module["python_abi"]
            .as_str()
            .unwrap()
            .starts_with("cpython-3"),
        "{module}"
    );

    let human = cache.run(args![
        "key",
        "examples/cpu_muladd/abicache.toml",
        "--python",
        python()
    ]);
    assert_success(&human);
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("key_human_muladd", stdout(&human)));
}

/// Writes an environment TOML into `dir` and returns its path.
fn env_file(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn env_file_with_a_cpu_wheel_gives_the_same_key_as_the_cuda_wheel_venv_for_a_cpu_extension() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    let key_of = |how: Vec<std::ffi::OsString>, spec: &str| -> String {
        let mut argv = args!["key", spec, "--json"];
        argv.extend(how);
        cache.json(argv)["key"].as_str().unwrap().to_string()
    };
    let venv = args!["--python", python()];
    // Another Python too: a Python-agnostic key does not depend on it.
    let cpu_wheel = env_file(
        tmp.path(),
        "cpu.toml",
        r#"
python_version = "3.13.1"
python_soabi = "cpython-313-x86_64-linux-gnu"
python_abiflags = ""
torch_version = "2.15.0+cpu"
cxx11_abi = true
"#,
    );
    let muladd = "examples/cpu_muladd/abicache.toml";
    let with_venv = key_of(venv.clone(), muladd);
    assert_eq!(
        key_of(args!["--env", cpu_wheel], muladd),
        with_venv,
        "+cpu and +cu132 wheels share a CPU extension"
    );

    // A vendor build's local tag is kept; another C++ ABI is another key.
    let vendor = env_file(
        tmp.path(),
        "vendor.toml",
        "python_version = \"3.11.7\"\ntorch_version = \"2.15.0+git1234abc\"\ncxx11_abi = true\n",
    );
    assert_ne!(key_of(args!["--env", vendor], muladd), with_venv);
    let old_abi = env_file(
        tmp.path(),
        "old_abi.toml",
        "python_version = \"3.11.7\"\ntorch_version = \"2.15.0+cpu\"\ncxx11_abi = false\n",
    );
    assert_ne!(key_of(args!["--env", old_abi], muladd), with_venv);

    // A Python module does depend on the Python version.
    let module = "tests/fixtures/pybind_module/abicache.toml";
    assert_ne!(
        key_of(args!["--env", cpu_wheel], module),
        key_of(venv.clone(), module)
    );

    // Building needs a torch to build against: an env file without `torch_dir` says so.
    let out = cache.run(args!["build", muladd, "--env", cpu_wheel, "--quiet"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("torch_dir"), "{}", stderr(&out));
    cache
        .settings()
        .bind(|| insta::assert_snapshot!("build_env_without_torch_dir", stderr(&out)));
}

/// The `(path, blake3)` of every file a key hashes, from its payload's
/// `file=<blake3> <path>` lines.
fn keyed_files(key: &Value) -> BTreeSet<(String, String)> {
    strings(&key["payload"])
        .iter()
        .filter_map(|l| l.strip_prefix("file="))
        .map(|v| {
            let (hash, path) = v.split_once(' ').expect("file=<blake3> <path>");
            (path.to_owned(), hash.to_owned())
        })
        .collect()
}

/// The `(path, blake3)` of every file `abicache scan --json` lists.
fn scanned_files(scan: &Value) -> BTreeSet<(String, String)> {
    scan["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no files: {scan}"))
        .iter()
        .map(|f| {
            let field = |k: &str| f[k].as_str().unwrap().to_owned();
            (field("path"), field("blake3"))
        })
        .collect()
}

/// Issue 15: `abicache scan` built its own scan configuration without the
/// environment's system roots, so a local `torch/all.h` next to a source
/// was followed by `scan` and not by `key`. Both now take their
/// configuration from `ExtensionSpec::scan_config`; `--python`/`--env` give
/// `scan` the environment `key` uses, and they agree on every file.
#[test]
fn scan_with_python_or_env_agrees_with_key_on_every_file() {
    let cache = Cache::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().canonicalize().unwrap();
    let write = |rel: &str, text: &str| {
        let path = project.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "ops.cpp",
        "#include <torch/all.h>\n#include \"local.h\"\n#include HDR\n\
         int ops() { return local() + computed(); }\n",
    );
    write(
        "local.h",
        "#pragma once\ninline int local() { return 1; }\n",
    );
    write(
        "inc/computed.h",
        "#pragma once\ninline int computed() { return 2; }\n",
    );
    // Shadows torch's own header: a system header for a compiler given torch's roots.
    write("torch/all.h", "#pragma once\n#include \"shadow_only.h\"\n");
    write("torch/shadow_only.h", "#pragma once\n");
    write(
        "abicache.toml",
        "[[extension]]\nname = \"shadowed\"\nsources = [\"ops.cpp\"]\n\
         extra_include_paths = [\"inc\"]\nextra_cflags = ['-DHDR=\"computed.h\"']\n",
    );
    let key = cache.json(args![
        "key",
        project.join("abicache.toml"),
        "--python",
        python(),
        "--json"
    ]);
    let keyed = keyed_files(&key);
    let paths: BTreeSet<&str> = keyed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        BTreeSet::from(["ops.cpp", "local.h", "inc/computed.h"]),
        "the key follows local and computed includes, not the shadow of <torch/all.h>"
    );
    // Scans run against a cache of their own: `scan` must not create it.
    let scan_cache = Cache::new();
    let scan = |how: Vec<std::ffi::OsString>| {
        let mut argv = args![
            "scan",
            project.join("ops.cpp"),
            "--root",
            project,
            "-I",
            project.join("inc"),
            "-D",
            "HDR=\"computed.h\"",
            "--json"
        ];
        argv.extend(how);
        scanned_files(&scan_cache.json(argv))
    };
    assert_eq!(scan(args!["--python", python()]), keyed, "scan --python");

    // An environment file naming the same torch gives the same system roots.
    let torch_dir = std::fs::read_dir(repo_path(".venv/lib"))
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages/torch"))
        .find(|t| t.join("include/torch").is_dir())
        .expect("the venv's torch package");
    let env = env_file(
        &project,
        "env.toml",
        &format!(
            "python_version = \"3.12.0\"\ntorch_version = \"2.15.0\"\ncxx11_abi = true\n\
             torch_dir = \"{}\"\n",
            torch_dir.display()
        ),
    );
    assert_eq!(scan(args!["--env", env]), keyed, "scan --env");

    // With no environment there are no system roots: the shadow is a local header.
    let without = scan(Vec::new());
    assert!(
        without.iter().any(|(p, _)| p == "torch/all.h")
            && without.iter().any(|(p, _)| p == "torch/shadow_only.h"),
        "{without:?}"
    );
    assert!(
        !scan_cache.dir.exists(),
        "`abicache scan` opened the cache `{}`",
        scan_cache.dir.display()
    );
}

#[test]
fn gc_removes_the_key_memos_an_edit_made_stale_and_keeps_the_others() {
    let cache = Cache::new();
    let project = tempfile::tempdir().unwrap();
    copy_dir(&repo_path("examples/cpu_muladd"), project.path());
    // Files younger than the racy window are never remembered.
    std::thread::sleep(abicache_fs::RACY_WINDOW + std::time::Duration::from_millis(100));
    let spec = project.path().join("abicache.toml");
    cache.json(args!["key", &spec, "--python", python(), "--json"]);
    let memos = || {
        std::fs::read_dir(cache.dir.join("v1/key-memo"))
            .unwrap()
            .count()
    };
    assert_eq!(memos(), 1, "the key is remembered");
    let gc = || {
        let mut cmd = cache.cmd(args!["gc", "--max-size", "10G", "--json"]);
        let out = cmd.env("ABICACHE_GC_GRACE", "0").output().unwrap();
        assert_success(&out);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let report = gc();
    assert_eq!(report["key_memos_removed"], 0, "{report}");
    assert!(
        report.get("evicted").is_some(),
        "the store's report is kept"
    );
    assert_eq!(memos(), 1, "a memo that still answers stays");
    let ops = project.path().join("ops.cpp");
    let text = std::fs::read_to_string(&ops).unwrap();
    std::fs::write(&ops, text + "// edited\n").unwrap();
    assert_eq!(gc()["key_memos_removed"], 1);
    assert_eq!(memos(), 0);
}

/// A warm `abicache key` is answered from the key memo (no scan) with the
/// same key and payload a scan prints; `--scan` always scans.
#[test]
fn a_warm_key_is_answered_from_the_key_memo_with_the_scans_key_and_payload() {
    let cache = Cache::new();
    let spec = "examples/cpu_muladd/abicache.toml";
    for json in [false, true] {
        let args = |extra: &[&str]| {
            let mut a = args!["-v", "key", spec, "--python", python()];
            if json {
                a.push("--json".into());
            }
            a.extend(extra.iter().map(Into::into));
            a
        };
        let first = cache.run(args(&["--scan"]));
        assert_success(&first);
        assert!(
            !stderr(&first).contains("from the key memo"),
            "{}",
            stderr(&first)
        );
        let warm = cache.run(args(&[]));
        assert_success(&warm);
        assert!(
            stderr(&warm).contains("key: from the key memo"),
            "the second key scanned: {}",
            stderr(&warm)
        );
        assert_eq!(stdout(&warm), stdout(&first));
        let scanned = cache.run(args(&["--scan"]));
        assert_success(&scanned);
        assert!(!stderr(&scanned).contains("from the key memo"));
        assert_eq!(stdout(&scanned), stdout(&first));
    }
}
