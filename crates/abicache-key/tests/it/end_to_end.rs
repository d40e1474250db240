//! spec file → real scan of real files → key, in temp dirs.

use std::path::{Path, PathBuf};

use abicache_key::{compute_key, KeyError, Keyed, SpecFile};
use abicache_scan::{scan, ScanConfig};
use abicache_test_support::environment::cpython312 as env;
use abicache_test_support::write;

/// A project: `abicache.toml`, `csrc/ops.cpp` including `"ops.h"`, which
/// includes `<detail/impl.h>` from `include/`.
fn project(dir: &Path, impl_h: &str, target: &str) {
    write(
        &dir.join("abicache.toml"),
        &format!(
            "[[extension]]\nname = \"ops\"\nsources = [\"csrc/ops.cpp\"]\n\
             extra_include_paths = [\"include\"]\n{target}"
        ),
    );
    write(&dir.join("csrc/ops.cpp"), "#include \"ops.h\"\n#include <torch/csrc/stable/library.h>\nSTABLE_TORCH_LIBRARY(ops, m) {}\n");
    write(
        &dir.join("csrc/ops.h"),
        "#pragma once\n#include <detail/impl.h>\n",
    );
    write(&dir.join("include/detail/impl.h"), impl_h);
}

fn key_of(dir: &Path, torch: &str) -> Result<Keyed, KeyError> {
    let spec_file = SpecFile::load(&dir.join("abicache.toml"))?;
    let spec = spec_file.extension(None)?;
    let env = env(torch);
    spec.check_for(&env)?;
    let report = scan(
        &spec.sources,
        &spec.scan_config(Some(&env), &spec_file.root),
    )
    .unwrap();
    compute_key(spec, &env, &report, &spec_file.root)
}

#[test]
fn same_project_in_two_places_has_one_key() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    project(a.path(), "int f();\n", "");
    project(b.path(), "int f();\n", "");
    let (ka, kb) = (
        key_of(a.path(), "2.10.0+cpu").unwrap(),
        key_of(b.path(), "2.10.0+cu128").unwrap(),
    );
    assert_eq!(ka.key, kb.key);
    let files: Vec<String> = ka
        .payload
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("file="))
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[2].ends_with(" include/detail/impl.h"), "{files:?}");
    assert!(!ka.payload.text().contains(&a.path().display().to_string()));
}

#[test]
fn editing_a_transitive_header_changes_the_key() {
    let d = tempfile::tempdir().unwrap();
    project(d.path(), "int f();\n", "");
    let before = key_of(d.path(), "2.10.0").unwrap();
    write(&d.path().join("include/detail/impl.h"), "int f(int);\n");
    let after = key_of(d.path(), "2.10.0").unwrap();
    assert_ne!(before.key, after.key);
    let changes: Vec<String> = before
        .payload
        .diff(&after.payload)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].starts_with("file changed: include/detail/impl.h (via csrc/ops.cpp)"),
        "{changes:?}"
    );
}

#[test]
fn stable_target_rejects_aten_include_in_a_transitive_header_naming_that_header() {
    let d = tempfile::tempdir().unwrap();
    project(
        d.path(),
        "#pragma once\n\n#include <ATen/ATen.h>\n",
        "torch_stable_abi_target = \"2.10\"\n",
    );
    let e = key_of(d.path(), "2.10.0").unwrap_err();
    match &e {
        KeyError::NonStableHeader {
            file,
            line,
            include,
            ..
        } => {
            assert_eq!(
                (file.as_str(), *line, include.as_str()),
                ("include/detail/impl.h", 3, "ATen/ATen.h")
            );
        }
        other => panic!("{other:?}"),
    }
    // Only stable headers: accepted, keyed on the target, shared across torch releases.
    project(
        d.path(),
        "#include <torch/headeronly/util/Half.h>\n",
        "torch_stable_abi_target = \"2.10\"\n",
    );
    let k10 = key_of(d.path(), "2.10.0").unwrap();
    let k15 = key_of(d.path(), "2.15.0+cu130").unwrap();
    assert_eq!(k10.key, k15.key);
    assert!(matches!(
        key_of(d.path(), "2.9.0"),
        Err(KeyError::TorchBelowFloor { .. })
    ));
}

/// Issue 9: a torch header reached through a resolved computed include is
/// refused under a stable target, named as resolved.
#[test]
fn stable_target_refuses_a_torch_header_reached_through_a_macro_named_as_resolved() {
    let d = tempfile::tempdir().unwrap();
    project(
        d.path(),
        "#pragma once\n#define TORCH_HEADER(name) <torch/name.h>\n#include TORCH_HEADER(all)\n",
        "torch_stable_abi_target = \"2.10\"\n",
    );
    match key_of(d.path(), "2.10.0").unwrap_err() {
        KeyError::NonStableHeader {
            file,
            line,
            include,
            ..
        } => assert_eq!(
            (file.as_str(), line, include.as_str()),
            ("include/detail/impl.h", 3, "torch/all.h")
        ),
        other => panic!("{other:?}"),
    }
}

/// Issue 9: a computed include that resolves to harmless (system) headers
/// keeps a stable extension keyed on the stable ABI and Python-agnostic, as
/// CUTLASS's `#include CUDA_STD_HEADER(tuple)` does for swordfish.
#[test]
fn resolved_computed_include_to_system_headers_keeps_a_stable_key() {
    let d = tempfile::tempdir().unwrap();
    project(
        d.path(),
        "#define CUDA_STD_HEADER(header) <cuda/std/header>\n\
         #define CUDA_STD_HEADER(header) <cccl/cuda/std/header>\n\
         #include CUDA_STD_HEADER(tuple)\n",
        "torch_stable_abi_target = \"2.10\"\n",
    );
    let k12 = key_of(d.path(), "2.12.0").unwrap();
    let k15 = key_of(d.path(), "2.15.0+cu132").unwrap();
    assert_eq!(k12.key, k15.key);
    assert!(!k12.python_abi_dependent);
    assert!(k12.payload.text().contains("torch_abi=stable-2.10"));
    assert!(!k12.payload.text().contains("computed_include="));
}

/// Issue 9: an unresolvable computed include stays conservative: recorded
/// in the payload, a Python-ABI marker, refused under a stable target.
#[test]
fn unresolvable_computed_include_is_recorded_dependent_and_refused_under_stable() {
    let d = tempfile::tempdir().unwrap();
    project(d.path(), "#include KERNEL_IMPL\n", "");
    let k = key_of(d.path(), "2.10.0").unwrap();
    assert!(k.python_abi_dependent);
    assert!(
        k.payload
            .text()
            .contains("computed_include=include/detail/impl.h:1:KERNEL_IMPL"),
        "{}",
        k.payload.text()
    );
    project(
        d.path(),
        "#include KERNEL_IMPL\n",
        "torch_stable_abi_target = \"2.10\"\n",
    );
    assert!(matches!(
        key_of(d.path(), "2.10.0"),
        Err(KeyError::ComputedIncludeUnderStable { .. })
    ));
}

#[test]
fn include_paths_outside_the_root_stay_absolute() {
    let d = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    project(d.path(), "int f();\n", "");
    let spec_file = SpecFile::load(&d.path().join("abicache.toml")).unwrap();
    let mut spec = spec_file.extension(None).unwrap().clone();
    spec.extra_include_paths.push(outside.path().to_path_buf());
    let report = scan(
        &spec.sources,
        &ScanConfig::new(&spec_file.root).include_path(d.path().join("include")),
    )
    .unwrap();
    let k = compute_key(&spec, &env("2.10.0"), &report, &spec_file.root).unwrap();
    let canon: PathBuf = std::fs::canonicalize(outside.path()).unwrap();
    assert!(
        k.payload
            .lines()
            .contains(&format!("include_path={}", canon.display())),
        "{:?}",
        k.payload.lines()
    );
}
