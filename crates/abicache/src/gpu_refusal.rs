//! The GPU guard's refusal, in a module of its own so that the crate's
//! error type can carry it without depending on the guard ([`crate::gpu`]).

/// A CUDA library that no image of can run on one or more visible GPUs
/// (the [`Error::GpuRefused`](crate::Error::GpuRefused) an `AbiError` carries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{library} has device code for {images}; {gpus} can run none of it; {fix}, then rebuild \
     (or set `ABICACHE_GPU_CHECK=0` to load it anyway, and fail at its first kernel launch)"
)]
pub struct GpuRefusal {
    /// The library's file name (`muladd_cuda.so`).
    pub library: String,
    /// Its images, `, `-joined (`sm_80, sm_86`; `no image` when none).
    pub images: String,
    /// The GPUs refused, `GPU 0 (NVIDIA H100, 9.0)`, joined by ` and `.
    pub gpus: String,
    /// What to set: the arch list of every visible GPU, and `+PTX` when
    /// PTX of an image's architecture would serve the refused GPUs.
    pub fix: String,
}
