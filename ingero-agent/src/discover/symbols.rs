//! Exported function symbols of a shared library and the file offsets uprobes attach at.

use std::path::Path;

use anyhow::{Context, Result};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// A defined, exported function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedSymbol {
    /// The name without a version suffix (`cudaMalloc`, not `cudaMalloc@@libcudart.so.12`).
    pub name: String,
    /// Offset of the first instruction in the file, for attaching a uprobe.
    pub file_offset: u64,
}

/// Reads the dynamic symbol table and returns every defined function with its file offset.
pub fn exported_functions(path: &Path) -> Result<Vec<ExportedSymbol>> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{} is not a readable ELF file", path.display()))?;
    let mut out = Vec::new();
    for sym in file.dynamic_symbols() {
        if sym.kind() != SymbolKind::Text || sym.is_undefined() {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        let name = name.split('@').next().unwrap_or(name);
        let Some(index) = sym.section_index() else {
            continue;
        };
        let Ok(section) = file.section_by_index(index) else {
            continue;
        };
        let Some((section_offset, _)) = section.file_range() else {
            continue;
        };
        let Some(relative) = sym.address().checked_sub(section.address()) else {
            continue;
        };
        out.push(ExportedSymbol {
            name: name.to_string(),
            file_offset: section_offset + relative,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary_without_error() {
        // The test binary is an ELF file; it may export nothing, but parsing must work.
        let exe = std::env::current_exe().expect("current exe");
        assert!(exported_functions(&exe).is_ok());
    }

    #[test]
    fn rejects_non_elf_files() {
        let path = std::env::temp_dir().join(format!("ingero-not-elf-{}", std::process::id()));
        std::fs::write(&path, b"not an elf").expect("write");
        let err = exported_functions(&path).expect_err("must fail");
        assert!(err.to_string().contains("not a readable ELF file"), "{err}");
        let _ = std::fs::remove_file(&path);
    }
}
