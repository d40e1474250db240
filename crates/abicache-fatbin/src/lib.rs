//! abicache-fatbin: the CUDA device code a library carries, and which GPU can run it.
//!
//! - [`images_in_elf`] / [`images_in_elf_bytes`]: the [`DeviceImage`]s (SASS
//!   `sm_XY`, `sm_XYa`, `sm_XYf`; PTX `compute_XY`…) of the fat binaries in
//!   an ELF shared library or object, in Rust, with no NVIDIA tool at run time.
//!   [`images_in_fatbin`] reads a fat binary already out of its file.
//! - [`runs_on`] / [`best_image`]: CUDA's compatibility rule, which image
//!   a GPU of a given [`Capability`] runs (SASS, PTX JIT, or none).
//! - [`expected_images`]: the images nvcc arch flags ask for (`-gencode`,
//!   `-arch`, `-code` and their long forms), to compare with what was built.
//!
//! # The layout read
//!
//! nvcc puts the fat binaries of a linked library or a whole-program object
//! in the section `.nv_fatbin`, and those of a relocatable-device-code
//! object (`-rdc=true -c`) in `__nv_relfatbin` (read in `ET_REL` objects
//! only: a linked library may keep its objects' copies there, but loads the
//! device-linked result in `.nv_fatbin`). The section `.nvFatBinSegment`
//! holds `__fatBinC_Wrapper_t` records (magic `0x466243b1`, version, pointer
//! to a fat binary, pointer) that the runtime registers; in nvcc's output
//! they point into `.nv_fatbin`, so they are followed only in a file that
//! has no fat binary section (the address is mapped to the file through the
//! section that holds it).
//!
//! A section holds fat binaries one after another, with zero padding allowed
//! between them. Each starts with a 16-byte header: magic `0xba55ed50`
//! (u32), version (u16), header size (u16), size of the images that follow
//! (u64). Each image starts with a header of at least 64 bytes: kind (u16:
//! 1 PTX, 2 ELF cubin, 8 NVVM IR for LTO, which is neither and is skipped),
//! version (u16), header size (u32), payload size (u64), compressed size
//! (u32), …, code version (two u16), architecture (u32 at byte 28: `90` for
//! `sm_90`), …, flags (u64 at byte 40: bit `0x10_0000` marks `sm_XYa`, bit
//! `0x20_0000` `sm_XYf`, `0x2000`/`0x8000` a compressed payload), …,
//! uncompressed size (u64). All little-endian. Only these headers are read:
//! a compressed payload is never decompressed, a payload never parsed.
//!
//! # What is trusted, and what is bounded
//!
//! Nothing in the file is trusted. Every size and offset is checked against
//! the region that holds it, with checked arithmetic, before it is used; a
//! loop over fat binaries or images advances by at least one header each
//! time, so it ends within the file's size; each file range is read once
//! (sections or wrappers naming the same bytes again are passed over, and
//! ranges that overlap are refused), so the work stays one pass over the
//! file whatever the section table says; the reader allocates a fixed
//! amount beyond the image list (at most one entry per distinct image) and
//! the section table (`object` checks it against the file's size). A file
//! is read with `pread` at the offsets needed, never whole: the 500 MB
//! `libtorch_cuda.so` takes well under a second. A hostile or truncated file
//! is an [`Error`] naming it, never a panic or a hang; the tests run 2,000
//! corrupted real libraries to check it, and compare the reader with
//! NVIDIA's `cuobjdump` on libraries built with the pip nvcc.
//!
//! ```
//! use abicache_fatbin::{best_image, expected_images, Capability, Runs};
//!
//! // What `TORCH_CUDA_ARCH_LIST="8.0 9.0+PTX"` asks nvcc for, and what a 10.0 GPU runs.
//! let flags: Vec<String> = [
//!     "-gencode=arch=compute_80,code=sm_80",
//!     "-gencode=arch=compute_90,code=sm_90",
//!     "-gencode=arch=compute_90,code=compute_90",
//! ].map(String::from).to_vec();
//! let images = expected_images(&flags).unwrap();
//! let b200: Capability = "10.0".parse().unwrap();
//! assert_eq!(best_image(&images, b200), Runs::PtxJit("compute_90".parse().unwrap()));
//! assert_eq!(best_image(&images, "8.6".parse().unwrap()), Runs::Sass("sm_80".parse().unwrap()));
//! ```
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
