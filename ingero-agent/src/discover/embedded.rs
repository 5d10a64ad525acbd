//! The CUDA runtime linked into a program: `nvcc`'s default (`-cudart static`) and CMake's
//! (`CMAKE_CUDA_RUNTIME_LIBRARY` is `Static` unless set) copy `libcudart_static.a` into the
//! executable, so no `libcudart.so` is ever mapped and only the driver calls the runtime makes
//! would be seen. The runtime's functions are then local symbols of the program's `.symtab`
//! (`cudaMalloc`, `cudaLaunchKernel`, `__cudaRegisterFunction`), and uprobes attach to them at
//! their file offsets exactly as to a `libcudart.so`'s exports.
//!
//! Looking is cheap where it can be: a file is read only as far as its section headers unless
//! it carries device code (`.nv_fatbin` or `.nvFatBinSegment`, which `nvcc` writes into every
//! program with kernels) and a `.symtab`; only then is its symbol table read. A stripped
//! program keeps no `.symtab`, and its runtime calls are seen as the driver calls they make. A
//! file that loads `libcudart.so` (`DT_NEEDED`) calls that library, attached on its own, and
//! its `.symtab` is not read either (libtorch_cuda's is 80 MB). A
//! runtime linked into a file with no device code of its own is not looked for on its own:
//! `--cuda-lib FILE` names it.

use std::{
    collections::BTreeSet,
    fs::{self, File},
    os::unix::fs::MetadataExt,
    path::Path,
};

use anyhow::{Context, Result};
use ingero_ebpf::CudaLibrary;
use object::{
    Endianness, FileKind,
    elf::{DT_NEEDED, FileHeader64, SHT_SYMTAB, STT_FUNC},
    read::{
        ReadCache,
        elf::{Dyn, FileHeader, SectionHeader, SectionTable, Sym},
    },
};

use super::LibraryFile;
use super::kind::{kind_from_exports, kind_from_name, probed_symbols};
use super::symbols::ExportedSymbol;

/// The sections `nvcc` puts a program's device code in: the fat binary and its wrapper.
const DEVICE_CODE_SECTIONS: [&[u8]; 2] = [b".nv_fatbin", b".nvFatBinSegment"];

/// The runtime functions a file defines in its `.symtab` (local or global), with their file
/// offsets, when the file carries device code; empty when it has none of them, carries no
/// device code or has no `.symtab` (stripped). Only the functions ingero probes and the
/// runtime's marker (`cudaMalloc`) are returned, each once.
pub fn linked_runtime_functions(path: &Path) -> Result<Vec<ExportedSymbol>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let cache = ReadCache::new(file);
    let data = &cache;
    // Only 64-bit ELF: CUDA runs on x86_64 and aarch64 hosts.
    if !matches!(FileKind::parse(data), Ok(FileKind::Elf64)) {
        return Ok(Vec::new());
    }
    let not_elf = || format!("{} is not a readable ELF file", path.display());
    let header = FileHeader64::<Endianness>::parse(data).with_context(not_elf)?;
    let endian = header.endian().with_context(not_elf)?;
    let sections = header.sections(endian, data).with_context(not_elf)?;
    let has_device_code = DEVICE_CODE_SECTIONS
        .iter()
        .any(|name| sections.section_by_name(endian, name).is_some());
    if !has_device_code || needs_the_runtime_library(endian, data, &sections) {
        return Ok(Vec::new());
    }
    let symbols = sections
        .symbols(endian, data, SHT_SYMTAB)
        .with_context(|| format!("reading the symbol table of {}", path.display()))?;
    let wanted: BTreeSet<&str> = probed_symbols(CudaLibrary::Runtime)
        .into_iter()
        .chain(["cudaMalloc"])
        .collect();
    let mut out: Vec<ExportedSymbol> = Vec::new();
    for symbol in symbols.iter() {
        if symbol.st_type() != STT_FUNC || symbol.is_undefined(endian) {
            continue;
        }
        let Ok(name) = symbol.name(endian, symbols.strings()) else {
            continue;
        };
        let Some(name) = std::str::from_utf8(name)
            .ok()
            .filter(|n| wanted.contains(n))
        else {
            continue;
        };
        let Ok(section) = sections.section(object::SectionIndex(symbol.st_shndx(endian).into()))
        else {
            continue;
        };
        let Some(relative) = symbol.st_value(endian).checked_sub(section.sh_addr(endian)) else {
            continue;
        };
        out.push(ExportedSymbol {
            name: name.to_owned(),
            file_offset: section.sh_offset(endian) + relative,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    Ok(out)
}

/// Whether the file loads `libcudart.so` (a `DT_NEEDED` entry): then its runtime is that
/// library, attached on its own, and its `.symtab` (libtorch_cuda's is 80 MB) is not read.
fn needs_the_runtime_library<'data>(
    endian: Endianness,
    data: &'data ReadCache<File>,
    sections: &SectionTable<'data, FileHeader64<Endianness>, &'data ReadCache<File>>,
) -> bool {
    // The index that comes with the entries is their string table's.
    let Ok(Some((entries, strings_index))) = sections.dynamic(endian, data) else {
        return false;
    };
    let Ok(strings) = sections.strings(endian, data, strings_index) else {
        return false;
    };
    entries.iter().any(|entry| {
        entry.d_tag(endian) == u64::from(DT_NEEDED)
            && u32::try_from(entry.d_val(endian))
                .ok()
                .and_then(|offset| strings.get(offset).ok())
                .and_then(|name| std::str::from_utf8(name).ok())
                .is_some_and(|name| kind_from_name(name) == Some(CudaLibrary::Runtime))
    })
}

/// Whether these functions are a runtime's: more of the runtime's than of the driver's
/// (the same rule as for a library under another name).
pub fn is_runtime(functions: &[ExportedSymbol]) -> bool {
    kind_from_exports(functions.iter().map(|f| f.name.as_str())) == Some(CudaLibrary::Runtime)
}

/// The program at `path` as a runtime to attach to, when the runtime is linked into it.
pub fn linked_runtime_at(path: &Path) -> Result<Option<LibraryFile>> {
    let functions = linked_runtime_functions(path)?;
    if !is_runtime(&functions) {
        return Ok(None);
    }
    let meta = fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Some(LibraryFile {
        path: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
        mapped_by: Vec::new(),
        kind: CudaLibrary::Runtime,
        linked_in: true,
    }))
}

#[cfg(test)]
#[path = "embedded_tests.rs"]
mod tests;
