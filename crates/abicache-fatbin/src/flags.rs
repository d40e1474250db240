//! The device images nvcc arch flags ask for.

use crate::{DeviceImage, Error};

/// The images the nvcc flags ask for.
pub fn expected_images(nvcc_flags: &[String]) -> Result<Vec<DeviceImage>, Error> {
    let _ = nvcc_flags;
    todo!()
}
