//! The function symbols of one ELF file, compact and sorted, to name an address.
//!
//! Built from `.symtab` (local symbols included: libtorch_cuda's kernel host stubs are local)
//! or, for a file without one, `.dynsym`. Only what a lookup needs is kept: a sorted vector of
//! (address, size, name position) and the bytes of the function names, not the file's whole
//! string table (libtorch_cuda: 232k symbols, 74 MB of strings, most of them not functions).
//! The file is read through `object`'s `ReadCache`, which reads just the headers, the symbol
//! table and its string table, not the 520 MB of code.

use std::fs::File;
use std::io;

use object::Endianness;
use object::elf::{PT_LOAD, SHN_UNDEF, STT_FUNC};
use object::read::ReadCache;
use object::read::elf::{ElfFile64, ProgramHeader, SectionHeader, Sym};

use super::name::NameSource;

/// Why a file could not be indexed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IndexError {
    /// Opening or reading the file failed.
    #[error("reading the file: {0}")]
    Io(#[from] io::Error),
    /// Not a 64-bit ELF file, or a malformed one.
    #[error("parsing the ELF file: {0}")]
    Elf(#[from] object::Error),
    /// Neither `.symtab` nor `.dynsym` has a function symbol.
    #[error("no function symbols")]
    NoFunctions,
}

/// One function symbol: 24 bytes instead of the 24-byte ELF symbol plus its name.
#[derive(Clone, Copy, Debug)]
struct Function {
    start: u64,
    size: u32,
    name_start: u32,
    name_len: u32,
}

/// A loadable segment, to turn a file offset into the virtual address symbols use.
#[derive(Clone, Copy, Debug)]
struct LoadSegment {
    file_offset: u64,
    file_size: u64,
    vaddr: u64,
}

/// Appends `symbol` if it is a defined function with a size and a name.
fn add_function<S: Sym<Endian = Endianness>>(
    symbol: &S,
    endian: Endianness,
    strings: &[u8],
    functions: &mut Vec<Function>,
    names: &mut Vec<u8>,
) {
    let size: u64 = symbol.st_size(endian).into();
    if symbol.st_type() != STT_FUNC || size == 0 || symbol.st_shndx(endian) == SHN_UNDEF {
        return;
    }
    let name = usize::try_from(symbol.st_name(endian))
        .ok()
        .and_then(|start| strings.get(start..))
        .and_then(|rest| rest.split(|&byte| byte == 0).next())
        .unwrap_or_default();
    // `f.cold` is the cold part gcc split off `f`: the launched address is the hot part's
    // start, and a containment match on the cold part would mislead.
    if name.is_empty() || name.ends_with(b".cold") || name.windows(6).any(|w| w == b".cold.") {
        return;
    }
    let (Ok(name_start), Ok(name_len)) = (u32::try_from(names.len()), u32::try_from(name.len()))
    else {
        return;
    };
    names.extend_from_slice(name);
    functions.push(Function {
        start: symbol.st_value(endian).into(),
        size: u32::try_from(size).unwrap_or(u32::MAX),
        name_start,
        name_len,
    });
}

/// The function symbols of one file.
#[derive(Debug)]
pub(crate) struct SymbolIndex {
    functions: Vec<Function>,
    names: Vec<u8>,
    segments: Vec<LoadSegment>,
    /// `.symtab` or `.dynsym`.
    pub(crate) source: NameSource,
}

impl SymbolIndex {
    /// Reads the function symbols of `file`.
    pub(crate) fn build(file: File) -> Result<Self, IndexError> {
        let cache = ReadCache::new(file);
        let elf = ElfFile64::<Endianness, _>::parse(&cache)?;
        let endian = elf.endian();
        let segments = elf
            .elf_program_headers()
            .iter()
            .filter(|header| header.p_type(endian) == PT_LOAD)
            .map(|header| LoadSegment {
                file_offset: header.p_offset(endian),
                file_size: header.p_filesz(endian),
                vaddr: header.p_vaddr(endian),
            })
            .collect();
        let tables = [
            (elf.elf_symbol_table(), NameSource::ElfSymtab),
            (elf.elf_dynamic_symbol_table(), NameSource::ElfDynsym),
        ];
        for (table, source) in tables {
            if table.is_empty() {
                continue;
            }
            let strings = elf
                .elf_section_table()
                .section(table.string_section())
                .and_then(|section| section.data(endian, &cache))?;
            let mut functions = Vec::new();
            let mut names = Vec::new();
            for symbol in table.symbols() {
                add_function(symbol, endian, strings, &mut functions, &mut names);
            }
            if functions.is_empty() {
                continue;
            }
            // Of symbols at one address (aliases) the first in the table stays.
            functions.sort_by_key(|function| function.start);
            functions.dedup_by_key(|function| function.start);
            functions.shrink_to_fit();
            names.shrink_to_fit();
            return Ok(SymbolIndex {
                functions,
                names,
                segments,
                source,
            });
        }
        Err(IndexError::NoFunctions)
    }

    /// Bytes held, for the cache's memory bound.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.functions.len() * size_of::<Function>() + self.names.len()
    }

    /// The virtual address (as symbols give it) of a file offset, through the `PT_LOAD`
    /// segments.
    pub(crate) fn vaddr_of_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|segment| {
                (segment.file_offset..segment.file_offset.saturating_add(segment.file_size))
                    .contains(&offset)
            })
            .map(|segment| offset - segment.file_offset + segment.vaddr)
    }

    /// The function starting at `vaddr`, or else the one whose [start, start + size) holds it.
    pub(crate) fn function_at(&self, vaddr: u64) -> Option<&[u8]> {
        let after = self
            .functions
            .partition_point(|function| function.start <= vaddr);
        let function = self.functions.get(after.checked_sub(1)?)?;
        if vaddr - function.start >= u64::from(function.size) {
            return None;
        }
        let start = function.name_start as usize;
        self.names.get(start..start + function.name_len as usize)
    }
}
