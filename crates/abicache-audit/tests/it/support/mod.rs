//! Compiles tiny shared libraries with the system compilers for the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A C library that calls the CPython API and libm.
pub const PYTHON_C: &str = r#"
extern void *PyLong_FromLong(long);
extern void _Py_Dealloc(void *);
extern void *THPVariableClass;
double cos(double);
void *make(long x) { _Py_Dealloc(THPVariableClass); return PyLong_FromLong(x + (long)cos((double)x)); }
"#;

/// A C++ library that calls into c10, at, torch and pybind11.
pub const TORCH_CXX: &str = r#"
namespace c10 {
void foo();
struct Base { virtual ~Base(); virtual int get() const; };
}
namespace at { struct Tensor { long dim() const; }; }
namespace torch { namespace python { void init(); } }
namespace pybind11 { void bar(); }
int THPVariable_Check(int);
struct Derived : c10::Base { int get() const override { return 1; } };
extern "C" int local_entry(const at::Tensor &t) {
    c10::foo();
    torch::python::init();
    pybind11::bar();
    Derived d;
    return (int)t.dim() + d.get() + d.c10::Base::get() + THPVariable_Check(3);
}
"#;

/// A C library that keeps to the stable C shim and calls CUDA.
pub const STABLE_CUDA_C: &str = r#"
typedef int AOTITorchError;
extern AOTITorchError aoti_torch_foo(void *);
extern int torch_get_current_cuda_blas_handle(void **);
extern int cudaMalloc(void **, unsigned long);
extern int cuLaunchKernel(void *);
extern void **__cudaRegisterFatBinary(void *);
int run(void *p) {
    void *h;
    return aoti_torch_foo(p) + torch_get_current_cuda_blas_handle(&h) + cudaMalloc(&h, 16)
        + cuLaunchKernel(h) + (__cudaRegisterFatBinary(p) != 0);
}
"#;

/// A C++ library that uses std::string and exceptions (needs GLIBCXX versions).
pub const STD_STRING_CXX: &str = r#"
#include <stdexcept>
#include <string>
std::string greet(const char *name) {
    std::string s(name);
    s += "!";
    if (s.size() > 100) throw std::runtime_error(s);
    return s;
}
"#;

/// Compiles `source` into `dir/lib<name>.so` with `cc` (C) or `c++` (C++).
pub fn compile(dir: &Path, name: &str, cxx: bool, source: &str, extra: &[&str]) -> PathBuf {
    let ext = if cxx { "cpp" } else { "c" };
    let src = dir.join(format!("{name}.{ext}"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(format!("lib{name}.so"));
    let compiler = if cxx { "c++" } else { "cc" };
    let output = Command::new(compiler)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{compiler}`: {e}"));
    assert!(
        output.status.success(),
        "{compiler} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// The bytes of a real C++ shared library, compiled once per test binary.
pub fn real_library_bytes() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let lib = compile(dir.path(), "std_string", true, STD_STRING_CXX, &["-lm"]);
        std::fs::read(lib).unwrap()
    })
}
