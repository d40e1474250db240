//! Computed includes (`#include MACRO`) resolved by macro expansion
//! (docs/key.md, step 1), and the byte-order mark that used to hide a
//! directive. Real trees in temporary directories, scanned for real.

use std::fs;
use std::path::Path;

use abicache_scan::{scan, ScanConfig, ScanReport};
use tempfile::TempDir;

fn tree(files: &[(&str, &[u8])]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, content) in files {
        let path = dir.path().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    dir
}

fn scan_src(root: &Path, config: ScanConfig) -> ScanReport {
    scan(&[root.join("src/a.cpp")], &config).unwrap()
}

fn files(report: &ScanReport) -> Vec<&str> {
    report.sources[0].files.iter().map(|f| &*f.path).collect()
}

fn markers(report: &ScanReport) -> Vec<(&str, u32, &str)> {
    report
        .python_markers
        .iter()
        .map(|m| (m.file.as_str(), m.line, m.marker.as_str()))
        .collect()
}

#[test]
fn object_like_macro_names_a_local_header() {
    let t = tree(&[
        (
            "src/a.cpp",
            b"#define KERNEL_HEADER \"kernels/gemm.h\"\n#include KERNEL_HEADER\n",
        ),
        ("src/kernels/gemm.h", b"int gemm;\n"),
    ]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["src/a.cpp", "src/kernels/gemm.h"]);
    assert!(r.sources[0].computed_includes.is_empty());
    assert!(!r.python_abi_dependent(), "{:?}", r.python_markers);
}

#[test]
fn function_like_macro_from_another_header_resolves_through_include_paths() {
    // The reproduction: `#define PICK(x) <hidden/x.h>`.
    let t = tree(&[
        (
            "src/a.cpp",
            b"#include \"pick.h\"\n#include PICK(value)\nint f() { return VALUE; }\n",
        ),
        (
            "src/pick.h",
            b"#pragma once\n#define PICK(x) <hidden/x.h>\n",
        ),
        ("inc/hidden/value.h", b"#define VALUE 1\n"),
    ]);
    let config = ScanConfig::new(t.path()).include_path(t.path().join("inc"));
    let r = scan_src(t.path(), config);
    assert_eq!(files(&r), ["src/a.cpp", "src/pick.h", "inc/hidden/value.h"]);
    assert!(r.sources[0].computed_includes.is_empty());
}

#[test]
fn nested_macros_and_cutlass_stringizing_and_pasting() {
    // How headers build names: a stringizing helper behind an expanding
    // one, a pasted suffix, and a macro defined on the command line.
    let t = tree(&[
        (
            "src/a.cpp",
            concat!(
                "#define STR_(x) #x\n",
                "#define STR(x) STR_(x)\n",
                "#define CAT(a, b) a##b\n",
                "#define ARCH_HEADER(arch) STR(CAT(kernel_, arch).h)\n",
                "#include ARCH_HEADER(SM)\n",
            )
            .as_bytes(),
        ),
        ("src/kernel_sm90.h", b"// sm90\n"),
        ("src/kernel_SM.h", b"// never: SM is expanded first\n"),
    ]);
    let config = ScanConfig::new(t.path()).defines_from_flags(&["-DSM=sm90".to_owned()]);
    let r = scan_src(t.path(), config);
    assert_eq!(files(&r), ["src/a.cpp", "src/kernel_sm90.h"]);
}

#[test]
fn every_definition_of_a_name_counts_like_conditionals() {
    // CUTLASS defines CUDA_STD_HEADER twice, in #if branches: both count.
    let t = tree(&[
        (
            "src/a.cpp",
            concat!(
                "#if defined(USE_CCCL)\n",
                "#  define STD_HEADER(h) <cccl/std/h>\n",
                "#else\n",
                "#  define STD_HEADER(h) <std/h>\n",
                "#endif\n",
                "#include STD_HEADER(tuple)\n",
            )
            .as_bytes(),
        ),
        ("inc/cccl/std/tuple", b"// cccl\n"),
        ("inc/std/tuple", b"// plain\n"),
    ]);
    let config = ScanConfig::new(t.path()).include_path(t.path().join("inc"));
    let r = scan_src(t.path(), config);
    assert_eq!(
        files(&r),
        ["src/a.cpp", "inc/cccl/std/tuple", "inc/std/tuple"]
    );
}

#[test]
fn cutlass_cuda_std_header_resolves_to_system_headers_and_is_harmless() {
    let t = tree(&[
        (
            "src/a.cpp",
            b"#include <cutlass/cutlass.h>\n#include CUDA_STD_HEADER(tuple)\n",
        ),
        (
            "cutlass/include/cutlass/cutlass.h",
            concat!(
                "#ifdef CCCL\n",
                "  #define CUDA_STD_HEADER(header) <cccl/cuda/std/header>\n",
                "#else\n",
                "  #define CUDA_STD_HEADER(header) <cuda/std/header>\n",
                "#endif\n",
            )
            .as_bytes(),
        ),
        ("cuda/include/cuda/std/tuple", b"// the toolkit's\n"),
    ]);
    let config = ScanConfig::new(t.path())
        .include_path(t.path().join("cutlass/include"))
        .system_root(t.path().join("cuda/include"));
    let r = scan_src(t.path(), config);
    assert_eq!(
        files(&r),
        ["src/a.cpp", "cutlass/include/cutlass/cutlass.h"]
    );
    assert!(r.sources[0].computed_includes.is_empty());
    assert!(r.sources[0].missing_includes.is_empty());
    assert!(!r.python_abi_dependent(), "{:?}", r.python_markers);
}

#[test]
fn quoted_expansion_found_nowhere_is_a_missing_include() {
    let t = tree(&[(
        "src/a.cpp",
        b"#define GEN \"generated/table.h\"\n#include GEN\n",
    )]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert_eq!(
        r.sources[0].missing_includes,
        ["src/a.cpp:generated/table.h"]
    );
    assert!(r.sources[0].computed_includes.is_empty());
}

#[test]
fn unresolvable_computed_include_stays_conservative() {
    // Defined nowhere the scan can see (e.g. in a system header).
    let t = tree(&[(
        "src/a.cpp",
        b"#include <vector>\n#include KERNEL_HEADER // which one?\n",
    )]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert_eq!(r.sources[0].computed_includes.len(), 1);
    assert_eq!(r.sources[0].computed_includes[0].text, "KERNEL_HEADER");
    assert_eq!(r.sources[0].computed_includes[0].line, 2);
    assert_eq!(markers(&r), [("src/a.cpp", 2, "#include KERNEL_HEADER")]);
}

#[test]
fn one_unknown_alternative_keeps_the_include_conservative_but_follows_the_known_one() {
    let t = tree(&[
        (
            "src/a.cpp",
            b"#define H \"known.h\"\n#define H OTHER_MACRO\n#include H\n",
        ),
        ("src/known.h", b"// known\n"),
    ]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["src/a.cpp", "src/known.h"]);
    assert_eq!(r.sources[0].computed_includes.len(), 1);
}

#[test]
fn computed_include_of_python_h_makes_the_extension_dependent() {
    let t = tree(&[(
        "src/a.cpp",
        b"#define PY_HEADER <Python.h>\n#include PY_HEADER\n",
    )]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert!(r.python_abi_dependent());
    assert_eq!(
        markers(&r),
        [(
            "src/a.cpp",
            2,
            "#include <Python.h> (via #include PY_HEADER)"
        )]
    );
    assert!(r.sources[0].computed_includes.is_empty());
}

#[test]
fn torch_header_reached_through_a_macro_is_named_as_resolved() {
    let t = tree(&[(
        "src/a.cpp",
        b"#define TORCH(name) <torch/name.h>\n#include TORCH(all)\n",
    )]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    let torch: Vec<(&str, u32, &str, bool)> = r
        .torch_includes
        .iter()
        .map(|t| (t.file.as_str(), t.line, t.include.as_str(), t.stable))
        .collect();
    assert_eq!(torch, [("src/a.cpp", 2, "torch/all.h", false)]);
}

#[test]
fn header_reached_only_through_a_computed_include_is_hashed_fresh() {
    let t = tree(&[
        ("src/a.cpp", b"#include \"pick.h\"\n#include PICK(value)\n"),
        ("src/pick.h", b"#define PICK(x) <hidden/x.h>\n"),
        ("inc/hidden/value.h", b"#define VALUE 1\n"),
    ]);
    let config = ScanConfig::new(t.path()).include_path(t.path().join("inc"));
    let before = scan_src(t.path(), config.clone());
    fs::write(t.path().join("inc/hidden/value.h"), b"#define VALUE 2\n").unwrap();
    let after = scan_src(t.path(), config);
    let hash = |r: &ScanReport| r.sources[0].files[2].blake3.clone();
    assert_eq!(&*after.sources[0].files[2].path, "inc/hidden/value.h");
    assert_ne!(hash(&before), hash(&after));
}

#[test]
fn a_macro_defined_in_a_header_reached_through_a_computed_include_counts() {
    // The first computed include reaches a header that defines the macro
    // of the second: the walk repeats until nothing new is reached.
    let t = tree(&[
        (
            "src/a.cpp",
            b"#define FIRST \"first.h\"\n#include FIRST\n#include SECOND\n",
        ),
        ("src/first.h", b"#define SECOND \"second.h\"\n"),
        ("src/second.h", b"PyObject* o;\n"),
    ]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["src/a.cpp", "src/first.h", "src/second.h"]);
    assert!(r.sources[0].computed_includes.is_empty());
    assert_eq!(markers(&r), [("src/second.h", 1, "PyObject")]);
}

#[test]
fn byte_order_mark_hides_no_directive() {
    let t = tree(&[
        (
            "src/a.cpp",
            b"\xEF\xBB\xBF#include \"h.h\"\n#include <Python.h>\n",
        ),
        ("src/h.h", b"// edited on Windows\n"),
        ("src/b.cpp", b"\xEF\xBB\xBF#include <Python.h>\n"),
    ]);
    let r = scan_src(t.path(), ScanConfig::new(t.path()));
    assert_eq!(files(&r), ["src/a.cpp", "src/h.h"]);
    let b = scan(&[t.path().join("src/b.cpp")], &ScanConfig::new(t.path())).unwrap();
    assert_eq!(markers(&b), [("src/b.cpp", 1, "#include <Python.h>")]);
}
