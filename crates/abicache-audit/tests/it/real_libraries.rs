//! Audits of shared libraries compiled by the system `cc`/`c++` in a tempdir.

use crate::support;

use abicache_audit::{audit_bytes, audit_file, demangle, render_human, AuditReport, Group};
use support::*;

/// Symbols the toolchain's start-up files add to every library.
const TOOLCHAIN_NOISE: [&str; 4] = [
    "__cxa_finalize",
    "__gmon_start__",
    "_ITM_deregisterTMCloneTable",
    "_ITM_registerTMCloneTable",
];

fn group_of(report: &AuditReport, symbol: &str) -> Option<Group> {
    Group::ALL
        .into_iter()
        .find(|&g| report.imports.group(g).iter().any(|s| s == symbol))
}

#[test]
fn c_library_calling_cpython_lands_in_cpython_and_lists_libm() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile(dir.path(), "py", false, PYTHON_C, &["-lm"]);
    let report = audit_file(&lib).unwrap();

    assert_eq!(report.imports.cpython, ["PyLong_FromLong", "_Py_Dealloc"]);
    assert_eq!(report.imports.libtorch_python, ["THPVariableClass"]);
    assert!(
        report.needed.iter().any(|n| n == "libm.so.6"),
        "{:?}",
        report.needed
    );
    assert_eq!(group_of(&report, "cos"), Some(Group::Other));
    assert_eq!(group_of(&report, "__cxa_finalize"), Some(Group::Other));
    assert_eq!(
        report.python_symbols(),
        ["PyLong_FromLong", "_Py_Dealloc", "THPVariableClass"]
    );
    assert!(report.non_stable_torch_symbols() == ["THPVariableClass"]);
    assert!(!report.needs_libpython() && !report.needs_libtorch_python());
    assert_eq!(report.glibcxx_max, None, "a C library needs no libstdc++");
    // The in-memory path gives the same answer as the lazily read file.
    assert_eq!(audit_bytes(&std::fs::read(&lib).unwrap()).unwrap(), report);
}

#[test]
fn cxx_library_calling_torch_namespaces_lands_in_libtorch_groups() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile(dir.path(), "torchy", true, TORCH_CXX, &[]);
    let report = audit_file(&lib).unwrap();

    let cxx: Vec<String> = report
        .imports
        .libtorch_cxx
        .iter()
        .map(|s| demangle(s))
        .collect();
    assert_eq!(
        cxx,
        [
            "c10::foo()",
            "c10::Base::~Base()",
            "at::Tensor::dim() const",
            "c10::Base::get() const",
            "typeinfo for c10::Base",
        ]
    );
    let python: Vec<String> = report
        .imports
        .libtorch_python
        .iter()
        .map(|s| demangle(s))
        .collect();
    assert_eq!(
        python,
        [
            "THPVariable_Check(int)",
            "torch::python::init()",
            "pybind11::bar()"
        ]
    );
    assert!(report.imports.cpython.is_empty());
    assert!(report
        .imports
        .libstdcxx
        .iter()
        .any(|s| s.starts_with("_ZTVN10__cxxabiv1")));
    assert!(report.needed.iter().any(|n| n.starts_with("libstdc++.so")));
    assert_eq!(report.non_stable_torch_symbols().len(), 8);
}

#[test]
fn c_library_on_the_stable_shim_calling_cuda_lands_in_stable_and_cuda() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile(dir.path(), "stable", false, STABLE_CUDA_C, &[]);
    let report = audit_file(&lib).unwrap();

    assert_eq!(
        report.imports.torch_stable_c,
        ["aoti_torch_foo", "torch_get_current_cuda_blas_handle"]
    );
    assert_eq!(
        report.imports.cuda,
        ["__cudaRegisterFatBinary", "cuLaunchKernel", "cudaMalloc"]
    );
    assert!(report.python_symbols().is_empty());
    assert!(report.non_stable_torch_symbols().is_empty());
}

#[test]
fn cxx_library_using_std_string_reports_glibcxx_max() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile(dir.path(), "strings", true, STD_STRING_CXX, &[]);
    let report = audit_file(&lib).unwrap();

    let max = report.glibcxx_max.as_deref().expect("a glibcxx version");
    let patch: u32 = max
        .strip_prefix("GLIBCXX_3.4.")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected version {max}"));
    assert!(
        patch >= 21,
        "std::__cxx11::basic_string needs GLIBCXX_3.4.21+, got {max}"
    );
    assert!(!report.imports.libstdcxx.is_empty());
    assert!(report
        .imports
        .libstdcxx
        .iter()
        .any(|s| s.starts_with("_ZNSt7__cxx11")));
    assert!(report
        .imports
        .libstdcxx
        .iter()
        .any(|s| s == "__cxa_allocate_exception"));
    assert!(report.imports.libstdcxx.iter().all(|s| !s.contains('@')));
    assert!(report.imports.libtorch_cxx.is_empty());
}

#[test]
fn json_has_exactly_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile(dir.path(), "stable", false, STABLE_CUDA_C, &[]);
    let report = audit_file(&lib).unwrap();
    let value = serde_json::to_value(&report).unwrap();

    let keys =
        |v: &serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    let mut top = keys(&value);
    top.sort();
    assert_eq!(top, ["glibcxx_max", "imports", "needed"]);
    let text = serde_json::to_string(&report).unwrap();
    let order = [
        "\"needed\"",
        "\"imports\"",
        "\"cpython\"",
        "\"libtorch_python\"",
        "\"libtorch_cxx\"",
        "\"torch_stable_c\"",
        "\"cuda\"",
        "\"libstdcxx\"",
        "\"other\"",
        "\"glibcxx_max\":null",
    ];
    let positions: Vec<usize> = order.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    let back: AuditReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, report);
}

#[test]
fn human_rendering_groups_demangled_names_with_counts() {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile(dir.path(), "torchy", true, TORCH_CXX, &["-lm"]);
    let mut report = audit_file(&lib).unwrap();
    // Start-up symbols differ between toolchains; the layout is what is pinned.
    report
        .imports
        .other
        .retain(|s| !TOOLCHAIN_NOISE.contains(&s.as_str()));
    report.needed.retain(|n| !n.starts_with("ld-linux"));
    insta::assert_snapshot!(render_human(&report));
}
