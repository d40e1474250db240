//! Finding the fat binaries in an ELF shared library or object.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;

use object::elf::{self, FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, SectionHeader};
use object::read::ReadCache;
use object::{Endianness, FileKind, ReadRef};

use crate::fatbin::{failure_to_error, read_fatbins, FATBIN_MAGIC};
use crate::source::{u32_at, u64_at, Failure, Source};
use crate::{DeviceImage, Error};

/// The section nvcc puts the fat binaries of a linked library or a
/// whole-program (`-c`) object in.
const FATBIN_SECTION: &[u8] = b".nv_fatbin";
/// The section of a relocatable-device-code object (`-rdc=true -c`). A
/// linked library may keep its objects' copies too, but what it loads is the
/// device-linked result in `.nv_fatbin`: this section is read in
/// relocatable objects (`ET_REL`) only, as `cuobjdump` does.
const RELFATBIN_SECTION: &[u8] = b"__nv_relfatbin";
/// The section of `__fatBinC_Wrapper_t` records, each pointing at one fat binary.
const WRAPPER_SECTION: &[u8] = b".nvFatBinSegment";
/// The first word of a `__fatBinC_Wrapper_t` record.
const WRAPPER_MAGIC: u32 = 0x4662_43B1;

/// The device images of the ELF shared library or object at `path`: every
/// SASS and PTX image of every fat binary it carries, sorted and
/// deduplicated; `[]` when it carries no device code (a CPU library).
///
/// Reads the ELF header, the section headers and the image headers only,
/// at their offsets: a 500 MB `libtorch_cuda.so` costs a few megabytes of
/// reads. Never panics; a file that is not ELF, or whose ELF structure or
/// fat binary is truncated or malformed, is an [`Error`] naming `path`.
pub fn images_in_elf(path: &Path) -> Result<Vec<DeviceImage>, Error> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let cache = ReadCache::new(&file);
    let sections = read_sections(&cache, len).map_err(|failure| elf_error(failure, path))?;
    images_in_sections(Source::File { file: &file, len }, &sections)
        .map_err(|failure| failure_to_error(failure, path))
}

/// The device images of the ELF file held in `elf`, as [`images_in_elf`]
/// reads them from a file; `path` only names errors.
pub fn images_in_elf_bytes(elf: &[u8], path: &Path) -> Result<Vec<DeviceImage>, Error> {
    let sections = read_sections(elf, elf.len() as u64).map_err(|f| elf_error(f, path))?;
    images_in_sections(Source::Bytes(elf), &sections).map_err(|f| failure_to_error(f, path))
}

/// The sections of an ELF file this crate looks at.
struct Sections {
    /// Every section with file data: name, address and file range.
    all: Vec<Section>,
    /// Whether the file is 64-bit (the size of a wrapper's pointers).
    is_64: bool,
    /// Whether the file is a relocatable object (`ET_REL`), not a linked library.
    is_relocatable: bool,
}

struct Section {
    name: Vec<u8>,
    address: u64,
    offset: u64,
    size: u64,
}

/// Why the ELF structure could not be read.
enum ElfFailure {
    /// The file does not start with the ELF magic: what it starts with.
    NotElf(String),
    /// Truncated or malformed.
    Malformed(String),
}

impl From<object::Error> for ElfFailure {
    fn from(error: object::Error) -> Self {
        ElfFailure::Malformed(error.to_string())
    }
}

fn elf_error(failure: ElfFailure, path: &Path) -> Error {
    match failure {
        ElfFailure::NotElf(found) => Error::NotElf {
            path: path.to_owned(),
            found,
        },
        ElfFailure::Malformed(reason) => Error::MalformedElf {
            path: path.to_owned(),
            reason,
        },
    }
}

/// Reads the section table of the ELF file in `data` (`len` bytes).
fn read_sections<'data, R: ReadRef<'data>>(data: R, len: u64) -> Result<Sections, ElfFailure> {
    let head = data
        .read_bytes_at(0, len.min(16))
        .map_err(|()| ElfFailure::Malformed("cannot read the ELF header".into()))?;
    if !head.starts_with(b"\x7fELF") {
        if !head.is_empty() && b"\x7fELF".starts_with(head) {
            return Err(ElfFailure::Malformed(format!(
                "only {len} bytes, shorter than the ELF header"
            )));
        }
        return Err(ElfFailure::NotElf(describe_start(head)));
    }
    let sections = match FileKind::parse(data)? {
        FileKind::Elf32 => sections_of::<FileHeader32<Endianness>, R>(data),
        FileKind::Elf64 => sections_of::<FileHeader64<Endianness>, R>(data),
        _ => Err(ElfFailure::Malformed("unknown ELF class".into())),
    };
    sections.map_err(|failure| match failure {
        ElfFailure::Malformed(reason) => {
            ElfFailure::Malformed(format!("{reason}; the file is {len} bytes"))
        }
        other => other,
    })
}

fn sections_of<'data, Elf, R>(data: R) -> Result<Sections, ElfFailure>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let shoff: u64 = header.e_shoff(endian).into();
    let align = std::mem::align_of::<Elf::SectionHeader>() as u64;
    // `object` refuses a misaligned table in a byte slice but copies it out of
    // a file: refusing it here gives a file and its bytes the same verdict.
    if !shoff.is_multiple_of(align) {
        return Err(ElfFailure::Malformed(format!(
            "the section header table starts at offset {shoff}, which is not {align}-byte aligned"
        )));
    }
    let table = header.sections(endian, data)?;
    let mut all = Vec::new();
    for section in table.iter() {
        let Some((offset, size)) = section.file_range(endian) else {
            continue;
        };
        if section.sh_type(endian) == elf::SHT_NULL {
            continue;
        }
        let name = table.section_name(endian, section)?;
        all.push(Section {
            name: name.to_vec(),
            address: section.sh_addr(endian).into(),
            offset,
            size,
        });
    }
    Ok(Sections {
        all,
        is_64: header.is_type_64(),
        is_relocatable: header.e_type(endian) == elf::ET_REL,
    })
}

/// The images of the fat binary sections; when there are none, of the fat
/// binaries the `.nvFatBinSegment` wrappers point at.
fn images_in_sections(
    source: Source<'_>,
    sections: &Sections,
) -> Result<Vec<DeviceImage>, Failure> {
    let mut images = BTreeSet::new();
    let mut read = ReadRegions::default();
    let mut any_fatbin_section = false;
    for section in &sections.all {
        if section.name == FATBIN_SECTION
            || (section.name == RELFATBIN_SECTION && sections.is_relocatable)
        {
            any_fatbin_section = true;
            let region = format!("section `{}`", String::from_utf8_lossy(&section.name));
            if read.first_time(section.offset, section.size, &region)? {
                read_fatbins(source, section.offset, section.size, &region, &mut images)?;
            }
        }
    }
    if !any_fatbin_section {
        for section in sections.all.iter().filter(|s| s.name == WRAPPER_SECTION) {
            if read.first_time(section.offset, section.size, "section `.nvFatBinSegment`")? {
                read_wrapped_fatbins(source, sections, section, &mut read, &mut images)?;
            }
        }
    }
    Ok(images.into_iter().collect())
}

/// The file ranges already read. Reading each range once, and refusing
/// ranges that overlap, keeps the work within one pass over the file
/// however many sections or wrappers name the same bytes.
#[derive(Default)]
struct ReadRegions {
    /// Start → (end, what it was).
    by_start: BTreeMap<u64, (u64, String)>,
}

impl ReadRegions {
    /// `true` when `[start, start + len)` is new, `false` when exactly that
    /// range was read before; an error when it overlaps another.
    fn first_time(&mut self, start: u64, len: u64, what: &str) -> Result<bool, Failure> {
        let end = start.saturating_add(len);
        if let Some((read_end, _)) = self.by_start.get(&start) {
            if *read_end == end {
                return Ok(false);
            }
        }
        let before = self.by_start.range(..=start).next_back();
        let after = self.by_start.range(start..).next();
        for (&other_start, (other_end, other)) in before.into_iter().chain(after) {
            if other_start < end && start < *other_end {
                return Err(Failure::Malformed(format!(
                    "{what} ({start:#x}..{end:#x} in the file) overlaps {other} ({other_start:#x}..{other_end:#x})"
                )));
            }
        }
        self.by_start.insert(start, (end, what.to_string()));
        Ok(true)
    }
}

/// Follows each `__fatBinC_Wrapper_t { u32 magic, u32 version, ptr data,
/// ptr filename }` of a `.nvFatBinSegment` section to the fat binary at
/// `data`, a virtual address mapped to the file through the section that
/// holds it. A zero pointer (left to a relocation in an object) is passed over.
fn read_wrapped_fatbins(
    source: Source<'_>,
    sections: &Sections,
    wrappers: &Section,
    read: &mut ReadRegions,
    images: &mut BTreeSet<DeviceImage>,
) -> Result<(), Failure> {
    let record_len: u64 = if sections.is_64 { 24 } else { 16 };
    let count = wrappers.size / record_len;
    for index in 0..count {
        let mut record = [0u8; 24];
        let record = &mut record[..record_len as usize];
        let at = wrappers
            .offset
            .checked_add(index * record_len)
            .ok_or_else(|| {
                Failure::Malformed(format!(
                    "section `.nvFatBinSegment` starts at offset {:#x}, past any file",
                    wrappers.offset
                ))
            })?;
        source.read_at(at, record)?;
        if u32_at(record, 0) != WRAPPER_MAGIC {
            return Err(Failure::Malformed(format!(
                "record {index} of section `.nvFatBinSegment` starts with {:#010x}, not the wrapper magic {WRAPPER_MAGIC:#010x}",
                u32_at(record, 0)
            )));
        }
        let address = if sections.is_64 {
            u64_at(record, 8)
        } else {
            u64::from(u32_at(record, 8))
        };
        if address == 0 {
            continue;
        }
        let holder = sections
            .all
            .iter()
            .find(|s| address >= s.address && address - s.address < s.size && s.address != 0)
            .ok_or_else(|| {
                Failure::Malformed(format!(
                    "record {index} of section `.nvFatBinSegment` points at address {address:#x}, which no section of the file holds"
                ))
            })?;
        let offset = holder
            .offset
            .checked_add(address - holder.address)
            .ok_or_else(|| {
                Failure::Malformed(format!(
                    "the section holding address {address:#x} starts at offset {:#x}, past any file",
                    holder.offset
                ))
            })?;
        let left = holder.size - (address - holder.address);
        let mut header = [0u8; 16];
        if left < 16 {
            return Err(Failure::Malformed(format!(
                "record {index} of section `.nvFatBinSegment` points at address {address:#x}, {left} bytes before the end of its section: too few for a fat binary header"
            )));
        }
        source.read_at(offset, &mut header)?;
        if u32_at(&header, 0) != FATBIN_MAGIC {
            return Err(Failure::Malformed(format!(
                "record {index} of section `.nvFatBinSegment` points at address {address:#x}, where there is no fat binary (found {:#010x})",
                u32_at(&header, 0)
            )));
        }
        let total = u64::from(u16::from_le_bytes([header[6], header[7]]))
            .checked_add(u64_at(&header, 8))
            .filter(|&total| total <= left)
            .ok_or_else(|| {
                Failure::Malformed(format!(
                    "the fat binary at address {address:#x} runs past the end of its section"
                ))
            })?;
        let region = format!("the fat binary at address {address:#x}");
        if read.first_time(offset, total, &region)? {
            read_fatbins(source, offset, total, &region, images)?;
        }
    }
    Ok(())
}

/// `is empty`, or `starts with 23 21 2f 62 ("#!/b")`.
fn describe_start(head: &[u8]) -> String {
    if head.is_empty() {
        return "is empty".into();
    }
    let first = &head[..head.len().min(4)];
    let hex: Vec<String> = first.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = first
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    format!("starts with {} (\"{text}\")", hex.join(" "))
}
