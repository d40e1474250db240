//! `abicache.toml` and environment files: real files in temp dirs.

use std::path::{Path, PathBuf};

use abicache_key::{Environment, KeyError, SpecFile, StableTarget};
use abicache_test_support::write;

/// Error text with the temp dir replaced by `[TMP]`.
fn msg(e: KeyError, dir: &Path) -> String {
    e.to_string().replace(&dir.display().to_string(), "[TMP]")
}

#[test]
fn spec_file_resolves_paths_against_its_directory_and_parses_every_field() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        &d.path().join("proj/abicache.toml"),
        r#"
[[extension]]
name = "gemm"
namespace = "gemm_ops"
required_ops = ["gemm_ops::mm"]
sources = ["csrc/a.cpp", "csrc/b.cu", "/abs/c.cc"]
extra_cflags = ["-O3"]
extra_cuda_cflags = ["--use_fast_math"]
extra_ldflags = ["-lcublas"]
extra_include_paths = ["include", "/opt/include"]
requires_cuda = true
is_python_module = false
python_abi_dependent = "auto"
torch_stable_abi_target = "2.10"
cuda_archs = "8.0;9.0+PTX"

[[extension]]
name = "pack"
sources = ["pack.cpp"]
python_abi_dependent = false
torch_stable_abi_target = [2, 16]
"#,
    );
    let f = SpecFile::load(&p).unwrap();
    let proj = d.path().join("proj");
    assert_eq!(f.root, proj);
    let g = f.extension(Some("gemm")).unwrap();
    assert_eq!(
        g.sources,
        [
            proj.join("csrc/a.cpp"),
            proj.join("csrc/b.cu"),
            PathBuf::from("/abs/c.cc")
        ]
    );
    assert_eq!(
        g.extra_include_paths,
        [proj.join("include"), PathBuf::from("/opt/include")]
    );
    assert_eq!(g.namespace(), "gemm_ops");
    assert_eq!(g.python_abi_dependent, None);
    assert_eq!(g.torch_stable_abi_target, Some(StableTarget::new(2, 10)));
    assert_eq!(g.cuda_archs.as_deref(), Some("8.0;9.0+PTX"));
    assert!(g.requires_cuda());
    let k = f.extension(Some("pack")).unwrap();
    assert_eq!(k.python_abi_dependent, Some(false));
    assert_eq!(k.torch_stable_abi_target, Some(StableTarget::new(2, 16)));
    assert_eq!(k.namespace(), "pack");
    assert!(!k.requires_cuda());
}

#[test]
fn extension_selection() {
    let d = tempfile::tempdir().unwrap();
    let one = write(
        &d.path().join("one.toml"),
        "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\n",
    );
    assert_eq!(
        SpecFile::load(&one).unwrap().extension(None).unwrap().name,
        "a"
    );
    let two = write(&d.path().join("two.toml"), "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\n[[extension]]\nname = \"b\"\nsources = [\"b.cpp\"]\n");
    let f = SpecFile::load(&two).unwrap();
    assert_eq!(f.extension(Some("b")).unwrap().name, "b");
    let errs = [
        f.extension(None).unwrap_err(),
        f.extension(Some("c")).unwrap_err(),
    ];
    insta::assert_snapshot!(
        "extension_selection",
        errs.map(|e| e.to_string()).join("\n")
    );
}

#[test]
fn spec_file_errors_name_the_file_and_the_field() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("unknown_field", "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\nsourcs = [\"b.cpp\"]\n"),
        ("unknown_top_level", "[build]\njobs = 3\n"),
        ("missing_sources", "[[extension]]\nname = \"a\"\n"),
        ("bad_python_abi", "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\npython_abi_dependent = \"yes\"\n"),
        ("bad_target_str", "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\ntorch_stable_abi_target = \"2.10.1\"\n"),
        ("bad_target_seq", "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\ntorch_stable_abi_target = [2]\n"),
        ("bad_target_range", "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\ntorch_stable_abi_target = [2, 300]\n"),
        ("syntax", "[[extension]\nname = \"a\"\n"),
        ("no_extension", "# nothing\n"),
        ("bad_name", "[[extension]]\nname = \"my-ext\"\nsources = [\"a.cpp\"]\n"),
        ("bad_namespace", "[[extension]]\nname = \"a\"\nnamespace = \"1ns\"\nsources = [\"a.cpp\"]\n"),
        ("header_source", "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\", \"k.cuh\"]\n"),
        ("unknown_source", "[[extension]]\nname = \"a\"\nsources = [\"a.py\"]\n"),
        ("empty_sources", "[[extension]]\nname = \"a\"\nsources = []\n"),
        (
            "duplicate",
            "[[extension]]\nname = \"a\"\nsources = [\"a.cpp\"]\n[[extension]]\nname = \"a\"\nsources = [\"b.cpp\"]\n",
        ),
    ];
    let mut out = Vec::new();
    for (name, text) in cases {
        let p = write(&d.path().join(format!("{name}.toml")), text);
        let e = SpecFile::load(&p).expect_err(name);
        out.push(format!("{name}: {}", msg(e, d.path())));
    }
    let e = SpecFile::load(&d.path().join("absent.toml")).unwrap_err();
    out.push(format!("absent: {}", msg(e, d.path())));
    insta::assert_snapshot!("spec_file_errors", out.join("\n"));
}

#[test]
fn environment_file_resolves_paths_and_lists_present_include_roots() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("venv/torch/include/torch/csrc/api/include")).unwrap();
    std::fs::create_dir_all(d.path().join("cuda/include")).unwrap();
    let p = write(
        &d.path().join("env.toml"),
        r#"
python_version = "3.13.1"
python_soabi = "cpython-313t-x86_64-linux-gnu"
python_abiflags = "t"
torch_version = "2.10.0+cu128"
torch_cuda = "12.8"
cxx11_abi = true
nvcc_version = "12.8"
torch_dir = "venv/torch"
python_include = "/nonexistent/python3.13t"
cuda_include_dirs = ["cuda/include", "missing/include"]
cuda_archs = "9.0"
"#,
    );
    let env = Environment::load(&p).unwrap();
    assert_eq!(
        env.torch_dir.as_deref(),
        Some(d.path().join("venv/torch").as_path())
    );
    assert_eq!(env.torch_hip, None);
    assert_eq!(
        env.system_include_roots(),
        [
            d.path().join("venv/torch/include"),
            d.path().join("venv/torch/include/torch/csrc/api/include"),
            d.path().join("cuda/include"),
        ]
    );
    // A probe emits JSON with the same field names.
    let json = serde_json::to_string(&env).unwrap();
    let back: Environment = serde_json::from_str(&json).unwrap();
    assert_eq!(back, env);
}

#[test]
fn environment_file_errors_name_the_file_and_the_field() {
    let d = tempfile::tempdir().unwrap();
    let base = "python_version = \"3.12.9\"\ntorch_version = \"2.10.0\"\ncxx11_abi = true\n";
    let cases = [
        (
            "unknown_field",
            format!("{base}torch_cuda_version = \"12.8\"\n"),
        ),
        (
            "missing_torch",
            "python_version = \"3.12.9\"\ncxx11_abi = true\n".to_string(),
        ),
        (
            "wrong_type",
            "python_version = \"3.12.9\"\ntorch_version = \"2.10.0\"\ncxx11_abi = \"yes\"\n"
                .to_string(),
        ),
    ];
    let mut out = Vec::new();
    for (name, text) in cases {
        let p = write(&d.path().join(format!("{name}.toml")), &text);
        out.push(format!(
            "{name}: {}",
            msg(Environment::load(&p).unwrap_err(), d.path())
        ));
    }
    insta::assert_snapshot!("env_file_errors", out.join("\n"));
}
