//! Finding the NVTX libraries the fallback uprobes attach to: `libnvToolsExt.so*` (NVTX v2)
//! and `libnvtx3interop.so*` (NVTX3 built with its API exported), which export the C API, and
//! torch's `libtorch_python.so`, whose local (`.symtab`) copies of five NVTX functions are
//! what `torch.cuda.nvtx` calls. Only libraries mapped by running processes are found (a
//! periodic rescan finds those loaded later), deduplicated by device and inode like the CUDA
//! libraries: a uprobe attaches to an inode.
//!
//! NVTX3 compiled into other libraries (cuBLAS, NCCL, CCCL) is inline and has nothing to
//! probe.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use super::proc_maps::{mapped_paths, pids_in, reachable};
use ingero_ebpf::NvtxCall;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// One distinct NVTX library file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvtxLibrary {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// Whether a file name is one the fallback probes.
pub fn is_nvtx_library(name: &str) -> bool {
    let is = |stem: &str| {
        name.strip_prefix(stem)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    };
    is("libnvToolsExt.so") || is("libnvtx3interop.so") || is("libtorch_python.so")
}

/// The NVTX libraries mapped by `pids` (or every process), one per inode.
pub fn find_nvtx_libraries(proc_root: &Path, pids: Option<&[u32]>) -> Vec<NvtxLibrary> {
    let all: Vec<u32>;
    let pids = match pids {
        Some(p) => p,
        None => {
            all = pids_in(proc_root);
            &all
        }
    };
    let mut found: BTreeMap<(u64, u64), NvtxLibrary> = BTreeMap::new();
    for pid in pids {
        let proc_dir = proc_root.join(pid.to_string());
        let Ok(maps) = fs::read_to_string(proc_dir.join("maps")) else {
            continue;
        };
        for path in mapped_nvtx_libraries(&maps) {
            let path = reachable(&proc_dir, &path);
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            if meta.is_file() {
                found
                    .entry((meta.dev(), meta.ino()))
                    .or_insert(NvtxLibrary {
                        path,
                        dev: meta.dev(),
                        ino: meta.ino(),
                    });
            }
        }
    }
    found.into_values().collect()
}

/// NVTX library paths in a maps file, each once.
pub fn mapped_nvtx_libraries(maps: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in mapped_paths(maps) {
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_nvtx_library);
        if named && !out.iter().any(|p| p == path) {
            out.push(path.to_path_buf());
        }
    }
    out
}

/// Each probed NVTX function the file defines, with the file offset of every copy: exported
/// ones from `.dynsym`, local ones from `.symtab` (a header-only NVTX3 user may hold several
/// local copies, one per translation unit that took the function's address; each is probed).
pub fn nvtx_entry_points(path: &Path) -> Result<Vec<(NvtxCall, u64)>> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{} is not a readable ELF file", path.display()))?;
    let mut out = Vec::new();
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        if sym.kind() != SymbolKind::Text || sym.is_undefined() {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        let name = name.split('@').next().unwrap_or(name);
        let Some(call) = NvtxCall::ALL.iter().find(|c| c.symbol() == name) else {
            continue;
        };
        let Some(section) = sym
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
        else {
            continue;
        };
        let Some((section_offset, _)) = section.file_range() else {
            continue;
        };
        let Some(relative) = sym.address().checked_sub(section.address()) else {
            continue;
        };
        out.push((*call, section_offset + relative));
    }
    out.sort_by_key(|(c, offset)| (*c as u16, *offset));
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nvtx_libraries_names_match() {
        for yes in [
            "libnvToolsExt.so.1",
            "libnvToolsExt.so",
            "libnvtx3interop.so.1",
            "libtorch_python.so",
        ] {
            assert!(is_nvtx_library(yes), "{yes}");
        }
        for no in ["libnvToolsExt.so-old", "libtorch_cuda.so", "libnvtx.so"] {
            assert!(!is_nvtx_library(no), "{no}");
        }
    }

    #[test]
    fn maps_lines_give_each_library_once() {
        let maps = "\
7f00-7f01 r--p 00000000 08:01 12 /opt/nv/libnvToolsExt.so.1
7f01-7f02 r-xp 00001000 08:01 12 /opt/nv/libnvToolsExt.so.1
7f02-7f03 r-xp 00001000 08:01 13 /usr/lib/libc.so.6
7f03-7f04 r-xp 00001000 08:01 14 /site/torch/lib/libtorch_python.so (deleted)
";
        assert_eq!(
            mapped_nvtx_libraries(maps),
            vec![
                PathBuf::from("/opt/nv/libnvToolsExt.so.1"),
                PathBuf::from("/site/torch/lib/libtorch_python.so"),
            ]
        );
    }
}
