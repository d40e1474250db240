//! Finding the fat binary in an ELF file.

use std::path::Path;

use crate::{DeviceImage, Error};

/// The device images of the ELF shared library or object at `path`.
pub fn images_in_elf(path: &Path) -> Result<Vec<DeviceImage>, Error> {
    let _ = path;
    todo!()
}

/// The device images of the ELF file in `elf`; `path` only names errors.
pub fn images_in_elf_bytes(elf: &[u8], path: &Path) -> Result<Vec<DeviceImage>, Error> {
    let _ = (elf, path);
    todo!()
}
