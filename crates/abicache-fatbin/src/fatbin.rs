//! Reading the image headers of CUDA fat binaries (layout: see the crate docs).

use std::collections::BTreeSet;
use std::path::Path;

use crate::source::{u16_at, u32_at, u64_at, Failure, Source};
use crate::{ArchVariant, DeviceImage, Error, SmArch};

/// The first word of every fat binary (`__cudaFatMAGIC2`), little-endian.
pub(crate) const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// The fat binary header: magic (u32), version (u16), header size (u16),
/// size of the images that follow the header (u64).
const FATBIN_HEADER_LEN: usize = 16;
/// The part of an image header this reader needs: kind (u16), version
/// (u16), header size (u32), payload size (u64), compressed size (u32), …,
/// code version (u16 minor, u16 major), architecture (u32, e.g. 90),
/// name offset and length (u32 each), flags (u64), …, uncompressed size (u64).
const IMAGE_HEADER_LEN: usize = 64;
/// Image kinds: PTX text and an ELF cubin (SASS). Others (8 is NVVM IR for
/// link-time optimisation) are neither and are passed over.
const KIND_PTX: u16 = 1;
const KIND_ELF: u16 = 2;
/// Flag bits of an image header that mark an `sm_XYa` / `sm_XYf` image
/// (seen in nvcc 12.9–13.2 output, agreeing with `cuobjdump`).
const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
const FLAG_FAMILY_SPECIFIC: u64 = 0x20_0000;
/// How many bytes of zero padding are read at once between fat binaries.
const PADDING_CHUNK: usize = 4096;

/// The device images of the fat binaries in `fatbin`, one after another as
/// in an ELF `.nv_fatbin` section (zero padding between them allowed);
/// sorted and deduplicated, `[]` for empty or all-zero input. `path` only
/// names errors. Reads headers only (a compressed image is never
/// decompressed); a truncated or malformed fat binary is an
/// [`Error::MalformedFatbin`], never a panic.
///
/// ```
/// let err = abicache_fatbin::images_in_fatbin(b"not a fat binary", "lib.so".as_ref()).unwrap_err();
/// assert!(err.to_string().contains("`lib.so`"), "{err}");
/// ```
pub fn images_in_fatbin(fatbin: &[u8], path: &Path) -> Result<Vec<DeviceImage>, Error> {
    let mut images = BTreeSet::new();
    let source = Source::Bytes(fatbin);
    read_fatbins(source, 0, source.len(), "the fat binary", &mut images)
        .map_err(|failure| failure_to_error(failure, path))?;
    Ok(images.into_iter().collect())
}

/// Turns a reading failure into the crate's error naming `path`.
pub(crate) fn failure_to_error(failure: Failure, path: &Path) -> Error {
    match failure {
        Failure::Malformed(reason) => Error::MalformedFatbin {
            path: path.to_owned(),
            reason,
        },
        Failure::Io(source) => Error::Io {
            path: path.to_owned(),
            source,
        },
    }
}

/// Reads the fat binaries lying in `[start, start + len)` of `source`
/// (`region` names it in messages, e.g. "section `.nv_fatbin`") into `images`.
///
/// Every loop advances by at least one byte of the region, so it ends; every
/// size is checked against the region before it is used.
pub(crate) fn read_fatbins(
    source: Source<'_>,
    start: u64,
    len: u64,
    region: &str,
    images: &mut BTreeSet<DeviceImage>,
) -> Result<(), Failure> {
    let end = start
        .checked_add(len)
        .filter(|&end| end <= source.len())
        .ok_or_else(|| {
            malformed(format!(
                "{region} ({len:#x} bytes at offset {start:#x}) runs past the end of the data ({:#x} bytes)",
                source.len()
            ))
        })?;
    let mut pos = start;
    while pos < end {
        let left = end - pos;
        let zeros = zero_run(source, pos, end)?;
        if zeros > 0 {
            pos += zeros;
            continue;
        }
        let at = pos - start;
        if left < FATBIN_HEADER_LEN as u64 {
            return Err(malformed(format!(
                "{region} ends with {left} bytes at offset {at:#x}, too few for a fat binary header ({FATBIN_HEADER_LEN} bytes)"
            )));
        }
        let mut header = [0u8; FATBIN_HEADER_LEN];
        source.read_at(pos, &mut header)?;
        let magic = u32_at(&header, 0);
        if magic != FATBIN_MAGIC {
            return Err(malformed(format!(
                "{region} has {magic:#010x} at offset {at:#x} where a fat binary starts with {FATBIN_MAGIC:#010x}"
            )));
        }
        let header_len = u64::from(u16_at(&header, 6));
        let images_len = u64_at(&header, 8);
        if header_len < FATBIN_HEADER_LEN as u64 || header_len > left {
            return Err(malformed(format!(
                "the fat binary at offset {at:#x} of {region} declares a {header_len}-byte header; it must be at least {FATBIN_HEADER_LEN} and fit in the {left} bytes left"
            )));
        }
        if images_len > left - header_len {
            return Err(malformed(format!(
                "the fat binary at offset {at:#x} of {region} declares {images_len:#x} bytes of images, but only {:#x} bytes follow its header",
                left - header_len
            )));
        }
        read_images(source, pos + header_len, images_len, start, region, images)?;
        pos += header_len + images_len;
    }
    Ok(())
}

/// The image headers of one fat binary: `len` bytes from `first`.
fn read_images(
    source: Source<'_>,
    first: u64,
    len: u64,
    region_start: u64,
    region: &str,
    images: &mut BTreeSet<DeviceImage>,
) -> Result<(), Failure> {
    let end = first + len; // Checked by the caller: within the region.
    let mut pos = first;
    while pos < end {
        let at = pos - region_start;
        let left = end - pos;
        if left < IMAGE_HEADER_LEN as u64 {
            return Err(malformed(format!(
                "the image header at offset {at:#x} of {region} is cut short: {left} bytes are left of its fat binary, and a header takes at least {IMAGE_HEADER_LEN}"
            )));
        }
        let mut header = [0u8; IMAGE_HEADER_LEN];
        source.read_at(pos, &mut header)?;
        let kind = u16_at(&header, 0);
        let header_len = u64::from(u32_at(&header, 4));
        let payload_len = u64_at(&header, 8);
        let arch_number = u32_at(&header, 28);
        let flags = u64_at(&header, 40);
        if header_len < IMAGE_HEADER_LEN as u64 {
            return Err(malformed(format!(
                "the image at offset {at:#x} of {region} declares a {header_len}-byte header, shorter than the {IMAGE_HEADER_LEN} bytes every image header has"
            )));
        }
        let image_len = header_len
            .checked_add(payload_len)
            .filter(|&image_len| image_len <= left)
            .ok_or_else(|| {
                malformed(format!(
                    "the image at offset {at:#x} of {region} declares a {header_len:#x}-byte header and a {payload_len:#x}-byte payload, but only {left:#x} bytes are left of its fat binary"
                ))
            })?;
        let image = match kind {
            KIND_ELF => Some(DeviceImage::Sass(arch(arch_number, flags, at, region)?)),
            KIND_PTX => Some(DeviceImage::Ptx(arch(arch_number, flags, at, region)?)),
            _ => None,
        };
        images.extend(image);
        pos += image_len;
    }
    Ok(())
}

/// The architecture of an image header: its number (`90`) and its variant flags.
fn arch(number: u32, flags: u64, at: u64, region: &str) -> Result<SmArch, Failure> {
    let variant = match (
        flags & FLAG_ARCH_SPECIFIC != 0,
        flags & FLAG_FAMILY_SPECIFIC != 0,
    ) {
        (false, false) => ArchVariant::Plain,
        (true, false) => ArchVariant::ArchSpecific,
        (false, true) => ArchVariant::FamilySpecific,
        (true, true) => {
            return Err(malformed(format!(
                "the image at offset {at:#x} of {region} is marked both arch-specific and family-specific (flags {flags:#x})"
            )))
        }
    };
    if !(10..=9999).contains(&number) {
        return Err(malformed(format!(
            "the image at offset {at:#x} of {region} names architecture {number}, which is no GPU architecture (10 to 9999, e.g. 90 for sm_90)"
        )));
    }
    Ok(SmArch {
        major: number / 10,
        minor: number % 10,
        variant,
    })
}

/// How many zero bytes start at `pos` (up to `end`): the padding that may
/// lie between fat binaries.
fn zero_run(source: Source<'_>, pos: u64, end: u64) -> Result<u64, Failure> {
    let mut run = 0u64;
    let mut chunk = [0u8; PADDING_CHUNK];
    while pos + run < end {
        let take = (end - pos - run).min(PADDING_CHUNK as u64) as usize;
        let bytes = &mut chunk[..take];
        source.read_at(pos + run, bytes)?;
        match bytes.iter().position(|&b| b != 0) {
            Some(first_nonzero) => return Ok(run + first_nonzero as u64),
            None => run += take as u64,
        }
    }
    Ok(run)
}

fn malformed(reason: String) -> Failure {
    Failure::Malformed(reason)
}
