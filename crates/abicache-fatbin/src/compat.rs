//! CUDA's compatibility rule: which device image a GPU can run.

use crate::{Capability, DeviceImage};

/// How a GPU would run a library's device code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runs {
    /// It runs this SASS image as is.
    Sass(DeviceImage),
    /// The driver JIT-compiles this PTX image at load.
    PtxJit(DeviceImage),
    /// No image can run on it.
    No,
}

/// Whether `gpu` can run `image`, under CUDA's compatibility rule.
pub fn runs_on(image: &DeviceImage, gpu: Capability) -> Runs {
    let _ = (image, gpu);
    todo!()
}

/// The image `gpu` would run among `images`: SASS preferred over PTX JIT.
pub fn best_image(images: &[DeviceImage], gpu: Capability) -> Runs {
    let _ = (images, gpu);
    todo!()
}
