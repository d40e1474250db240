//! Reading the dynamic-linking facts out of an ELF file with `object`.
//!
//! Works over any [`ReadRef`]: a byte slice, or a lazily read
//! [`object::read::ReadCache`] over a `File`, in which case only the ELF
//! header, the section headers and the few sections below are read.

use std::collections::HashMap;

use object::elf::{self, FileHeader32, FileHeader64};
use object::read::elf::{Dyn, FileHeader, SectionHeader, SectionTable, Sym};
use object::{Endianness, FileKind, ReadRef, SectionIndex, StringTable};

/// An undefined symbol of `.dynsym`, with the version it requires, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UndefinedSymbol {
    /// The name without any `@VERSION` suffix.
    pub name: String,
    /// The required version from `.gnu.version_r` (e.g. `GLIBCXX_3.4.21`).
    pub version: Option<String>,
}

/// What an ELF file needs from the dynamic linker.
#[derive(Debug, Default)]
pub(crate) struct DynamicFacts {
    /// `DT_NEEDED` entries, in file order.
    pub needed: Vec<String>,
    /// Undefined dynamic symbols, in `.dynsym` order.
    pub undefined: Vec<UndefinedSymbol>,
    /// Every version name in `.gnu.version_r`.
    pub version_needs: Vec<String>,
}

/// Why reading failed.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// The first bytes are not the ELF magic (they are returned).
    NotElf(Vec<u8>),
    /// The structure is truncated or malformed; the text says where.
    Malformed(String),
}

impl From<object::Error> for ReadFailure {
    fn from(error: object::Error) -> Self {
        ReadFailure::Malformed(error.to_string())
    }
}

const MAGIC: &[u8] = b"\x7fELF";

/// Reads the dynamic-linking facts of the ELF file in `data`.
pub(crate) fn read<'data, R: ReadRef<'data>>(data: R) -> Result<DynamicFacts, ReadFailure> {
    let len = data
        .len()
        .map_err(|()| ReadFailure::Malformed("cannot determine the file size".into()))?;
    let head = data
        .read_bytes_at(0, len.min(16))
        .map_err(|()| ReadFailure::Malformed("cannot read the ELF header".into()))?;
    if !head.starts_with(MAGIC) {
        if !head.is_empty() && MAGIC.starts_with(head) {
            return Err(ReadFailure::Malformed(format!(
                "only {len} bytes, shorter than the ELF header"
            )));
        }
        return Err(ReadFailure::NotElf(head.to_vec()));
    }
    let result = match FileKind::parse(data)? {
        FileKind::Elf32 => read_elf::<FileHeader32<Endianness>, R>(data),
        FileKind::Elf64 => read_elf::<FileHeader64<Endianness>, R>(data),
        _ => Err(ReadFailure::Malformed("unknown ELF class".into())),
    };
    result.map_err(|failure| match failure {
        ReadFailure::Malformed(reason) => {
            ReadFailure::Malformed(format!("{reason}; the file is {len} bytes"))
        }
        other => other,
    })
}

fn read_elf<'data, Elf, R>(data: R) -> Result<DynamicFacts, ReadFailure>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let shoff: u64 = header.e_shoff(endian).into();
    let align = std::mem::align_of::<Elf::SectionHeader>() as u64;
    if !shoff.is_multiple_of(align) {
        return Err(ReadFailure::Malformed(format!(
            "the section header table starts at offset {shoff}, which is not {align}-byte aligned"
        )));
    }
    let table = header.sections(endian, data)?;
    let sections = Sections {
        table: &table,
        endian,
        data,
    };
    sections.check_table_alignment()?;
    let mut facts = DynamicFacts::default();

    if let Some((entries, link)) = table.dynamic(endian, data)? {
        let strings = sections.string_table(link)?;
        for entry in entries {
            match entry.tag32(endian) {
                Some(elf::DT_NULL) => break,
                Some(elf::DT_NEEDED) => {
                    facts.needed.push(text(entry.string(endian, strings)?));
                }
                _ => {}
            }
        }
    }

    let versions = sections.read_version_needs(&mut facts.version_needs)?;

    for (index, section) in table.enumerate() {
        if section.sh_type(endian) != elf::SHT_DYNSYM {
            continue;
        }
        let symbols: &[Elf::Sym] = section.data_as_array(endian, data)?;
        let strings = sections.string_table(section.link(endian))?;
        let versym = sections.versym_for(index)?;
        for (i, symbol) in symbols.iter().enumerate().skip(1) {
            if !symbol.is_undefined(endian) {
                continue;
            }
            let raw = symbol.name(endian, strings)?;
            let name = text(raw.split(|&b| b == b'@').next().unwrap_or(raw));
            if name.is_empty() {
                continue;
            }
            let version = versym
                .and_then(|table| table.get(i))
                .map(|v| v.0.get(endian) & elf::VERSYM_VERSION)
                .and_then(|v| versions.get(&v).cloned());
            facts.undefined.push(UndefinedSymbol { name, version });
        }
    }
    Ok(facts)
}

/// The section table of one file, with what reading a section needs.
struct Sections<'t, 'data, Elf: FileHeader, R: ReadRef<'data>> {
    table: &'t SectionTable<'data, Elf, R>,
    endian: Endianness,
    data: R,
}

impl<'data, Elf, R> Sections<'_, 'data, Elf, R>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    /// Refuses tables whose file offset breaks their entries' alignment (the
    /// section header table is checked the same way before it is read). Such a
    /// file is malformed, and without this check the verdict would depend on
    /// where the bytes happen to sit in memory: `object` reads an array in place
    /// from a byte slice (refusing a misaligned one) but copies it out of a file.
    fn check_table_alignment(&self) -> Result<(), ReadFailure> {
        let endian = self.endian;
        for section in self.table.iter() {
            let align = match section.sh_type(endian) {
                elf::SHT_DYNAMIC => std::mem::align_of::<Elf::Dyn>(),
                elf::SHT_DYNSYM => std::mem::align_of::<Elf::Sym>(),
                elf::SHT_GNU_VERSYM => std::mem::align_of::<elf::Versym<Endianness>>(),
                elf::SHT_GNU_VERNEED => std::mem::align_of::<elf::Verneed<Endianness>>(),
                _ => continue,
            } as u64;
            let offset: u64 = section.sh_offset(endian).into();
            if !offset.is_multiple_of(align) {
                return Err(ReadFailure::Malformed(format!(
                    "a dynamic-linking table starts at offset {offset}, which is not {align}-byte aligned"
                )));
            }
        }
        Ok(())
    }

    /// Reads `.gnu.version_r`: fills `names` and returns version index → name.
    fn read_version_needs(
        &self,
        names: &mut Vec<String>,
    ) -> Result<HashMap<u16, String>, ReadFailure> {
        let mut by_index = HashMap::new();
        let Some((mut needs, link)) = self.table.gnu_verneed(self.endian, self.data)? else {
            return Ok(by_index);
        };
        let strings = self.string_table(link)?;
        while let Some((_need, mut auxes)) = needs.next()? {
            while let Some(aux) = auxes.next()? {
                let name = text(aux.name(self.endian, strings)?);
                by_index.insert(
                    aux.vna_other.get(self.endian) & elf::VERSYM_VERSION,
                    name.clone(),
                );
                names.push(name);
            }
        }
        Ok(by_index)
    }

    /// The `.gnu.version` table that belongs to the symbol table at `symtab`, if any.
    fn versym_for(
        &self,
        symtab: SectionIndex,
    ) -> Result<Option<&'data [elf::Versym<Endianness>]>, ReadFailure> {
        for section in self.table.iter() {
            if section.sh_type(self.endian) == elf::SHT_GNU_VERSYM
                && section.link(self.endian) == symtab
            {
                return Ok(Some(section.data_as_array(self.endian, self.data)?));
            }
        }
        Ok(None)
    }

    /// The string table in section `index`, read in one piece (one read for a
    /// lazily read file, rather than one per string).
    fn string_table(&self, index: SectionIndex) -> Result<StringTable<'data>, ReadFailure> {
        let section = self.table.section(index)?;
        if section.sh_type(self.endian) != elf::SHT_STRTAB {
            return Err(ReadFailure::Malformed(format!(
                "section {} linked as a string table is not one",
                index.0
            )));
        }
        let bytes = section.data(self.endian, self.data)?;
        Ok(StringTable::new(bytes, 0, bytes.len() as u64))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
