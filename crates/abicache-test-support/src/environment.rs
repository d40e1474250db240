//! Environments built by hand for key tests (feature `key`).

use abicache_key::Environment;

/// CPython 3.12.9 (its SOABI and empty ABI flags) with torch `torch`, the
/// C++11 ABI, and nothing else: no CUDA, no `torch_dir`, no `host_cpu`.
/// Tests that need more set those fields with `..cpython312(torch)`.
pub fn cpython312(torch: &str) -> Environment {
    Environment {
        python_version: "3.12.9".into(),
        python_soabi: Some("cpython-312-x86_64-linux-gnu".into()),
        python_abiflags: Some(String::new()),
        torch_version: torch.into(),
        torch_cuda: None,
        torch_hip: None,
        cxx11_abi: true,
        nvcc_version: None,
        torch_dir: None,
        python_include: None,
        cuda_include_dirs: vec![],
        cuda_archs: None,
        host_cpu: None,
        compiler_isa: None,
        tvm_ffi_abi: None,
        tvm_ffi_include_dirs: Vec::new(),
        tvm_ffi_lib_dir: None,
    }
}
