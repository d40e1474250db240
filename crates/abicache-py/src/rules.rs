//! Rules the Python package asks Rust for instead of restating them.

use pyo3::prelude::*;

use crate::convert::spec_from_json;

/// `TORCH_CUDA_ARCH_LIST` when set, else the compute capabilities of the
/// GPUs `nvidia-smi` lists (`"8.6 9.0"`, asked once per process), else
/// `None`: what a CUDA extension without `cuda_archs` is built for.
#[pyfunction]
pub fn visible_cuda_archs(py: Python<'_>) -> Option<String> {
    py.detach(abicache::default_cuda_archs)
}

/// Whether the spec (JSON, as `prepare` takes it) is a CUDA extension: its
/// `requires_cuda`, else whether any source is a CUDA source (`.cu`).
#[pyfunction]
pub fn requires_cuda(spec: &str) -> PyResult<bool> {
    Ok(spec_from_json(spec)?.requires_cuda())
}
