//! abicache-fatbin: the CUDA device code a library carries, and which GPU can run it.
#![deny(missing_docs)]

mod arch;
mod compat;
mod elf;
mod error;
mod fatbin;
mod flags;
mod source;

pub use arch::{ArchVariant, Capability, DeviceImage, SmArch};
pub use compat::{best_image, runs_on, Runs};
pub use elf::{images_in_elf, images_in_elf_bytes};
pub use error::Error;
pub use fatbin::images_in_fatbin;
pub use flags::expected_images;
