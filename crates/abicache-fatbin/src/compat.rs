//! CUDA's compatibility rule: which device image a GPU can run.
//!
//! - SASS `sm_XY` runs on a GPU of capability `X.Z` with `Z ≥ Y` (binary
//!   compatibility holds within a major version only).
//! - Arch-specific `sm_XYa` / `compute_XYa` run only on `X.Y` exactly.
//! - Family-specific `sm_XYf` / `compute_XYf` (CUDA 12.9 and later) run on
//!   the GPUs of their family: the same major `X` with minor `≥ Y` (so
//!   `sm_100f` runs on 10.0 and 10.3, `sm_103f` on 10.3 only, `sm_120f` on
//!   12.0 and 12.1). See the CUDA Programming Guide, "Compute Capabilities:
//!   Feature Availability" (family-specific features), and NVIDIA's post
//!   "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce Family-Specific
//!   Architecture Features".
//! - Plain PTX `compute_XY` is JIT-compiled by the driver for any GPU of
//!   capability `≥ X.Y`.

use crate::{ArchVariant, Capability, DeviceImage};

/// How a GPU would run a library's device code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runs {
    /// It runs this SASS image as it is.
    Sass(DeviceImage),
    /// The driver JIT-compiles this PTX image for it when the library loads.
    PtxJit(DeviceImage),
    /// No image can run on it.
    No,
}

impl Runs {
    /// Whether the GPU can run the code at all (SASS or PTX JIT).
    pub fn runs(&self) -> bool {
        !matches!(self, Runs::No)
    }
}

/// Whether a GPU of capability `gpu` can run `image`, under CUDA's
/// compatibility rule (module docs): [`Runs::Sass`] or [`Runs::PtxJit`]
/// with `image` itself, or [`Runs::No`].
///
/// ```
/// use abicache_fatbin::{runs_on, Capability, DeviceImage, Runs};
///
/// let sm80: DeviceImage = "sm_80".parse().unwrap();
/// assert_eq!(runs_on(&sm80, "8.6".parse().unwrap()), Runs::Sass(sm80));
/// assert_eq!(runs_on(&sm80, "9.0".parse().unwrap()), Runs::No);
/// ```
pub fn runs_on(image: &DeviceImage, gpu: Capability) -> Runs {
    let arch = image.arch();
    let same_family = gpu.major == arch.major && gpu.minor >= arch.minor;
    let runs = match (image, arch.variant) {
        (_, ArchVariant::ArchSpecific) => gpu == arch.capability(),
        (_, ArchVariant::FamilySpecific) | (DeviceImage::Sass(_), ArchVariant::Plain) => {
            same_family
        }
        (DeviceImage::Ptx(_), ArchVariant::Plain) => gpu >= arch.capability(),
    };
    match (runs, image) {
        (false, _) => Runs::No,
        (true, DeviceImage::Sass(_)) => Runs::Sass(*image),
        (true, DeviceImage::Ptx(_)) => Runs::PtxJit(*image),
    }
}

/// The image a GPU of capability `gpu` would run among `images`: SASS
/// whenever some SASS image runs on it (the greatest such image in
/// [`DeviceImage`]'s order: the newest architecture, then the most
/// specific variant), else the PTX image of the greatest architecture that
/// can be JIT-compiled for it, else [`Runs::No`]. The result depends only
/// on the set of images, not their order or repetition.
pub fn best_image(images: &[DeviceImage], gpu: Capability) -> Runs {
    let best = |want_sass: bool| {
        images
            .iter()
            .filter(|image| image.is_ptx() != want_sass)
            .filter(|image| runs_on(image, gpu).runs())
            .max()
    };
    match (best(true), best(false)) {
        (Some(sass), _) => Runs::Sass(*sass),
        (None, Some(ptx)) => Runs::PtxJit(*ptx),
        (None, None) => Runs::No,
    }
}
