//! Sorting an undefined dynamic symbol into the library group it comes from.
//!
//! The rules, first match wins:
//!
//! 1. **libstdcxx** — the symbol requires a libstdc++ version (`GLIBCXX_*`,
//!    `CXXABI_*`): the linker already resolved it against libstdc++.
//! 2. **other** — the symbol requires a glibc version (`GLIBC_*`).
//! 3. **cpython** — C names `Py[A-Z_]*` and `_Py[A-Z_]*`.
//! 4. **libtorch_python** — C names `THP*`; mangled names whose outermost
//!    scope is `pybind11`, `torch::python` or a `THP*` identifier (e.g.
//!    `THPVariable_Wrap(at::TensorBase const&)`); mangled names whose
//!    demangled text mentions `pybind11::` or `torch::python::` anywhere
//!    (e.g. a `c10` function taking a `pybind11::object`). A `THP*` name
//!    inside another scope is not enough: `torch::utils::THP_decodeBuffer`
//!    lives in libtorch_cpu.
//! 5. **libtorch_cxx** — mangled names whose outermost scope is `c10`,
//!    `c10d`, `at`, `torch` or `caffe2`: functions, const/volatile/ref-qualified
//!    members (`_ZNK…`), vtables, VTTs, typeinfo and typeinfo names (`_ZTV`,
//!    `_ZTT`, `_ZTI`, `_ZTS`), guard variables (`_ZGV`), TLS init functions and
//!    wrappers (`_ZTH`, `_ZTW`), thunks (`_ZTh`, `_ZTv`) and function-local
//!    statics (`_ZZ`); also `std::`/`__gnu_cxx::` names whose
//!    template arguments name one of those namespaces
//!    (`std::vector<at::Tensor>::…`), since libstdc++ cannot provide them.
//! 6. **torch_stable_c** — C names `aoti_torch_*` and `torch_*`.
//! 7. **cuda** — C names `cuda*`, `cu[A-Z]*`, `__cuda*` (incl.
//!    `__cudaRegister*`) and the CUDA libraries' prefixes `cublas`, `cudnn`,
//!    `cufft`, `cupti`, `curand`, `cusolver`, `cusparse`, `nvrtc`, `nvtx`,
//!    `nvml`, `nccl`.
//! 8. **libstdcxx** — mangled names whose outermost scope is `std`,
//!    `__gnu_cxx` or `__cxxabiv1` (`_ZSt…`, `_ZNSt…`, `_ZNKSt…`, `_ZTISt…`,
//!    `_ZTVN10__cxxabiv1…`, the `Sa`/`Sb`/`Ss`/`Si`/`So`/`Sd` abbreviations);
//!    the global `operator new`/`operator delete` (`_Znwm`, `_ZdlPv`, …);
//!    typeinfo of builtin types (`_ZTIi`); `__cxa_*` except glibc's
//!    `__cxa_atexit`, `__cxa_finalize` and `__cxa_thread_atexit_impl`;
//!    `__gxx_personality_v0` and `__dynamic_cast`.
//! 9. **other** — everything else: libc, libm, libgcc (`_Unwind_*`), the
//!    library's own unscoped C++ functions (`_Z3foov`), ….
//!
//! Limits: only the outermost scope of a mangled name is decoded (a
//! hand-written reader of the `<encoding>` prefix, not a full demangler), so
//! names that begin with a substitution, a template parameter or a `decltype`
//! fall through to "other"; covariant thunks (`_ZTc`) and special names not
//! listed above are "other" as well. Demangling is used only to confirm
//! the rarer rules (4 and the `std::` part of 5) after a cheap textual hint.

use serde::{Deserialize, Serialize};

use crate::demangle::{demangle, mentions};

/// The library group an undefined symbol is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// The CPython C API (`Py*`, `_Py*`).
    Cpython,
    /// `libtorch_python.so`: `THP*`, pybind11, `torch::python`.
    LibtorchPython,
    /// The unstable C++ API of libtorch (`c10`, `at`, `torch`, `caffe2`).
    LibtorchCxx,
    /// The stable C shim of libtorch (`aoti_torch_*`, `torch_*`).
    TorchStableC,
    /// The CUDA runtime, driver and libraries.
    Cuda,
    /// The C++ runtime: libstdc++ and its ABI support.
    Libstdcxx,
    /// Anything else (libc, libm, libgcc, …).
    Other,
}

impl Group {
    /// Every group, in the order reports list them.
    pub const ALL: [Group; 7] = [
        Group::Cpython,
        Group::LibtorchPython,
        Group::LibtorchCxx,
        Group::TorchStableC,
        Group::Cuda,
        Group::Libstdcxx,
        Group::Other,
    ];

    /// The group's name as it appears in JSON (`libtorch_cxx`, …).
    pub fn name(self) -> &'static str {
        match self {
            Group::Cpython => "cpython",
            Group::LibtorchPython => "libtorch_python",
            Group::LibtorchCxx => "libtorch_cxx",
            Group::TorchStableC => "torch_stable_c",
            Group::Cuda => "cuda",
            Group::Libstdcxx => "libstdcxx",
            Group::Other => "other",
        }
    }
}

const TORCH_NAMESPACES: [&str; 5] = ["c10", "c10d", "at", "torch", "caffe2"];
const STD_NAMESPACES: [&str; 3] = ["std", "__gnu_cxx", "__cxxabiv1"];
const GLIBC_CXA: [&str; 3] = ["__cxa_atexit", "__cxa_finalize", "__cxa_thread_atexit_impl"];
const CUDA_LIBRARY_PREFIXES: [&str; 11] = [
    "cublas", "cudnn", "cufft", "cupti", "curand", "cusolver", "cusparse", "nvrtc", "nvtx", "nvml",
    "nccl",
];

/// Classifies one undefined dynamic symbol by its name (without `@VERSION`)
/// and the symbol version it requires, following the rules in the module
/// documentation. Never panics.
pub fn classify(name: &str, version: Option<&str>) -> Group {
    if let Some(version) = version {
        if version.starts_with("GLIBCXX_") || version.starts_with("CXXABI_") {
            return Group::Libstdcxx;
        }
        if version.starts_with("GLIBC_") {
            return Group::Other;
        }
    }
    if is_cpython(name) {
        return Group::Cpython;
    }
    let scope = mangled_scope(name);
    if is_libtorch_python(name, scope) {
        return Group::LibtorchPython;
    }
    if is_libtorch_cxx(name, scope) {
        return Group::LibtorchCxx;
    }
    if name.starts_with("aoti_torch_") || name.starts_with("torch_") {
        return Group::TorchStableC;
    }
    if is_cuda(name) {
        return Group::Cuda;
    }
    if is_libstdcxx(name, scope) {
        return Group::Libstdcxx;
    }
    Group::Other
}

fn is_cpython(name: &str) -> bool {
    let rest = name.strip_prefix("_Py").or_else(|| name.strip_prefix("Py"));
    rest.and_then(|r| r.bytes().next())
        .is_some_and(|c| c.is_ascii_uppercase() || c == b'_')
}

fn is_libtorch_python(name: &str, scope: Option<Scope<'_>>) -> bool {
    if name.starts_with("THP") {
        return true;
    }
    let Some(scope) = scope else { return false };
    if let Scope::Named { outer, rest } = scope {
        if outer == "pybind11" || (outer == "torch" && rest.starts_with("6python")) {
            return true;
        }
    }
    if let Scope::Named { outer, .. } = scope {
        if outer.starts_with("THP") {
            return true;
        }
    }
    if name.contains("8pybind11") || name.contains("6python") {
        let text = demangle(name);
        return mentions(&text, "pybind11::") || mentions(&text, "torch::python::");
    }
    false
}

fn is_libtorch_cxx(name: &str, scope: Option<Scope<'_>>) -> bool {
    match scope {
        Some(Scope::Named { outer, .. }) if TORCH_NAMESPACES.contains(&outer) => true,
        Some(Scope::Named { outer, .. }) if STD_NAMESPACES.contains(&outer) => {
            names_torch_namespace(name)
        }
        _ => false,
    }
}

/// Whether a mangled name mentions a torch namespace anywhere (confirmed by
/// demangling, after a cheap look for `3c10`, `2at`, `5torch`, `6caffe2`).
fn names_torch_namespace(name: &str) -> bool {
    let hint = ["3c10", "4c10d", "2at", "5torch", "6caffe2"]
        .iter()
        .any(|token| {
            name.match_indices(token)
                .any(|(at, _)| !name[..at].ends_with(|c: char| c.is_ascii_digit()))
        });
    if !hint {
        return false;
    }
    let text = demangle(name);
    TORCH_NAMESPACES
        .iter()
        .any(|ns| mentions(&text, &format!("{ns}::")))
}

fn is_cuda(name: &str) -> bool {
    if name.starts_with("cuda") || name.starts_with("__cuda") {
        return true;
    }
    if name
        .strip_prefix("cu")
        .and_then(|r| r.bytes().next())
        .is_some_and(|c| c.is_ascii_uppercase())
    {
        return true;
    }
    CUDA_LIBRARY_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn is_libstdcxx(name: &str, scope: Option<Scope<'_>>) -> bool {
    match scope {
        Some(Scope::Named { outer, .. }) => STD_NAMESPACES.contains(&outer),
        Some(Scope::Operator(op)) => matches!(op, "nw" | "na" | "dl" | "da"),
        Some(Scope::Builtin) => true,
        Some(Scope::Unknown) => false,
        None => {
            (name.starts_with("__cxa_") && !GLIBC_CXA.contains(&name))
                || name == "__gxx_personality_v0"
                || name == "__dynamic_cast"
        }
    }
}

/// The outermost scope of an Itanium-mangled name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope<'a> {
    /// The first name component, e.g. `c10` for `c10::impl::foo` (`std` for
    /// `St` and the standard abbreviations), and the mangled text after it.
    Named { outer: &'a str, rest: &'a str },
    /// A global operator, by its two-letter code (`nw`, `dl`, …).
    Operator(&'a str),
    /// The typeinfo or vtable of a builtin type (`_ZTIi`).
    Builtin,
    /// Mangled, but in a form this reader does not decode.
    Unknown,
}

/// Decodes the outermost scope of a mangled name; `None` when `name` is not
/// an Itanium-mangled name at all.
fn mangled_scope(name: &str) -> Option<Scope<'_>> {
    name.strip_prefix("_Z").map(|s| encoding_scope(s, 0))
}

/// How many wrappers (thunks, local names) are unwrapped before giving up,
/// so a hostile name cannot exhaust the stack.
const MAX_DEPTH: u32 = 16;

/// `<encoding>` and the `<special-name>`s that wrap one.
fn encoding_scope(s: &str, depth: u32) -> Scope<'_> {
    if depth > MAX_DEPTH {
        return Scope::Unknown;
    }
    let depth = depth + 1;
    if let Some(t) = ["TV", "TT", "TI", "TS"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
    {
        return type_scope(t, depth);
    }
    if let Some(t) = s.strip_prefix("Th") {
        return skip_call_offset_number(t).map_or(Scope::Unknown, |t| encoding_scope(t, depth));
    }
    if let Some(t) = s.strip_prefix("Tv") {
        return skip_call_offset_number(t)
            .and_then(skip_call_offset_number)
            .map_or(Scope::Unknown, |t| encoding_scope(t, depth));
    }
    if let Some(t) = ["GV", "GR", "TH", "TW"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
    {
        return name_scope(t, depth);
    }
    if let Some(t) = s.strip_prefix('L') {
        return name_scope(t, depth);
    }
    name_scope(s, depth)
}

/// Skips `[n]<digits>_` of a call offset.
fn skip_call_offset_number(s: &str) -> Option<&str> {
    let s = s.strip_prefix('n').unwrap_or(s);
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    s[digits..].strip_prefix('_')
}

fn type_scope(s: &str, depth: u32) -> Scope<'_> {
    let builtin = s
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() && c != b'u');
    let pointer_to_builtin = s
        .strip_prefix("PK")
        .or_else(|| s.strip_prefix('P'))
        .and_then(|t| t.bytes().next())
        .is_some_and(|c| c.is_ascii_lowercase() && c != b'u');
    if builtin || pointer_to_builtin {
        return Scope::Builtin;
    }
    name_scope(s, depth)
}

/// `<name>`: a nested name `N…E`, a local name `Z<encoding>E…`, an unscoped
/// name or a `std` abbreviation.
fn name_scope(s: &str, depth: u32) -> Scope<'_> {
    if let Some(local) = s.strip_prefix('Z') {
        return encoding_scope(local, depth);
    }
    if let Some(nested) = s.strip_prefix('N') {
        let nested = nested.trim_start_matches(['r', 'V', 'K']);
        let nested = nested
            .strip_prefix('R')
            .or_else(|| nested.strip_prefix('O'))
            .unwrap_or(nested);
        return first_component(nested);
    }
    if let Some(op) = s
        .get(..2)
        .filter(|op| op.bytes().all(|c| c.is_ascii_lowercase()))
    {
        return Scope::Operator(op);
    }
    first_component(s)
}

/// The first `<source-name>` (`<length><identifier>`) or `std` abbreviation.
fn first_component(s: &str) -> Scope<'_> {
    if let Some(rest) = s.strip_prefix("St") {
        return Scope::Named { outer: "std", rest };
    }
    if s.starts_with('S') && s[1..].starts_with(['a', 'b', 's', 'i', 'o', 'd']) {
        return Scope::Named {
            outer: "std",
            rest: &s[1..],
        };
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let Some(len) = s[..digits].parse::<usize>().ok().filter(|&n| n > 0) else {
        return Scope::Unknown;
    };
    let body = &s[digits..];
    match (body.get(..len), body.get(len..)) {
        (Some(outer), Some(rest)) => Scope::Named { outer, rest },
        _ => Scope::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outermost_scope_of_common_forms() {
        let outer = |name: &str| match mangled_scope(name) {
            Some(Scope::Named { outer, .. }) => outer.to_owned(),
            other => format!("{other:?}"),
        };
        assert_eq!(outer("_ZN3c103fooEv"), "c10");
        assert_eq!(outer("_ZNK2at6Tensor4sizeEl"), "at");
        assert_eq!(outer("_ZNKR5torch7Library3defEv"), "torch");
        assert_eq!(outer("_ZTVN3c1011VariableHooksE"), "c10");
        assert_eq!(outer("_ZTIN6caffe28TypeMetaE"), "caffe2");
        assert_eq!(outer("_ZTS3Foo"), "Foo");
        assert_eq!(outer("_ZThn8_N2at4implD1Ev"), "at");
        assert_eq!(outer("_ZTv0_n24_N3c106detail3barEv"), "c10");
        assert_eq!(outer("_ZGVZN3c104implEvE1x"), "c10");
        assert_eq!(outer("_ZZN5torch3jit4initEvE5state"), "torch");
        assert_eq!(
            outer("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"),
            "std"
        );
        assert_eq!(outer("_ZSt9terminatev"), "std");
        assert_eq!(outer("_ZNSs4_Rep10_M_destroyERKSaIcE"), "std");
        assert_eq!(outer("_ZTVN10__cxxabiv117__class_type_infoE"), "__cxxabiv1");
        assert_eq!(outer("_ZN9__gnu_cxx9__freeresEv"), "__gnu_cxx");
        assert_eq!(outer("_Z3foov"), "foo");
        assert_eq!(outer("_ZTHN3c104impl26raw_local_dispatch_key_setE"), "c10");
        assert_eq!(outer("_ZTWN3c104impl26raw_local_dispatch_key_setE"), "c10");
        assert_eq!(
            format!("{:?}", mangled_scope("_Znwm")),
            "Some(Operator(\"nw\"))"
        );
        assert_eq!(format!("{:?}", mangled_scope("_ZTIi")), "Some(Builtin)");
        assert_eq!(format!("{:?}", mangled_scope("_ZTIPKc")), "Some(Builtin)");
        assert_eq!(format!("{:?}", mangled_scope("_ZN99x")), "Some(Unknown)");
        assert_eq!(mangled_scope("PyLong_FromLong"), None);
        let hostile = format!("_Z{}", "Z".repeat(100_000));
        assert_eq!(mangled_scope(&hostile), Some(Scope::Unknown));
    }

    #[test]
    fn classification_order() {
        let cases = [
            ("PyLong_FromLong", None, Group::Cpython),
            ("_Py_Dealloc", None, Group::Cpython),
            ("_Py_NoneStruct", None, Group::Cpython),
            ("Pyramid", None, Group::Other),
            ("THPVariableClass", None, Group::LibtorchPython),
            (
                "_Z16THPVariable_WrapRKN2at10TensorBaseE",
                None,
                Group::LibtorchPython,
            ),
            (
                "_ZN8pybind116detail11get_internalsEv",
                None,
                Group::LibtorchPython,
            ),
            (
                "_ZN5torch6python10initModuleEv",
                None,
                Group::LibtorchPython,
            ),
            (
                "_ZN3c104impl3fooEN8pybind116objectE",
                None,
                Group::LibtorchPython,
            ),
            ("_ZN3c103fooEv", None, Group::LibtorchCxx),
            ("_ZN4c10d12ProcessGroupD2Ev", None, Group::LibtorchCxx),
            // THP_decodeBuffer is defined in libtorch_cpu, not libtorch_python.
            (
                "_ZN5torch5utils19THP_nativeByteOrderEv",
                None,
                Group::LibtorchCxx,
            ),
            ("_ZN5torch3jit4initEv", None, Group::LibtorchCxx),
            ("_ZTVN3c1011VariableHooksE", None, Group::LibtorchCxx),
            (
                "_ZNSt6vectorIN2at6TensorESaIS1_EED1Ev",
                None,
                Group::LibtorchCxx,
            ),
            ("aoti_torch_empty_strided", None, Group::TorchStableC),
            (
                "torch_get_current_cuda_blas_handle",
                None,
                Group::TorchStableC,
            ),
            ("cudaMalloc", None, Group::Cuda),
            ("cuLaunchKernel", None, Group::Cuda),
            ("__cudaRegisterFatBinary", None, Group::Cuda),
            ("cublasCreate_v2", None, Group::Cuda),
            ("_ZNSt6vectorIiSaIiEED1Ev", None, Group::Libstdcxx),
            ("_ZNSt6vectorI4x2atSaIS0_EED1Ev", None, Group::Libstdcxx),
            ("_ZdlPvm", None, Group::Libstdcxx),
            ("__cxa_begin_catch", None, Group::Libstdcxx),
            ("__gxx_personality_v0", None, Group::Libstdcxx),
            ("__cxa_finalize", None, Group::Other),
            ("__cxa_finalize", Some("GLIBC_2.2.5"), Group::Other),
            ("_Znwm", Some("GLIBCXX_3.4"), Group::Libstdcxx),
            ("_Unwind_Resume", Some("GCC_3.0"), Group::Other),
            ("_Z3foov", None, Group::Other),
            ("memcpy", None, Group::Other),
        ];
        for (name, version, group) in cases {
            assert_eq!(classify(name, version), group, "{name} {version:?}");
        }
    }
}
