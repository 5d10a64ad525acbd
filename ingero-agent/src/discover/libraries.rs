//! Locating the CUDA libraries to probe, both the runtime (`libcudart`) and the driver
//! (`libcuda`): those mapped by running processes (`/proc/*/maps`), those in the usual install
//! places of the host ([`super::places`]), and the driver that the NVIDIA container toolkit
//! bind-mounts into each container (its standard places below `/proc/<pid>/root`). Copies are
//! deduplicated by device and inode, because uprobes attach to an inode: a library reached
//! through several paths (symlinks, a bind mount, a container's view) is attached once.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use ingero_ebpf::CudaLibrary;

use super::embedded::{linked_runtime_at, linked_runtime_functions};
use super::kind::{kind_from_exports, kind_from_path};
use super::looked::{Looked, linked_runtimes_in};
use super::places::{DRIVER_PATTERNS, host_patterns, matching_below};
use super::proc_maps::{mapped_paths, pids_in, reachable};
use super::symbols::{ExportedSymbol, exported_functions};

/// One distinct library file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryFile {
    /// A path that reaches the file (the first one found).
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// Processes seen mapping it.
    pub mapped_by: Vec<u32>,
    /// Runtime or driver: which ops of the table are attached to it.
    pub kind: CudaLibrary,
    /// The runtime linked into a program (`nvcc -cudart static`) rather than a library: its
    /// functions are read from the `.symtab` ([`super::embedded`]), not the exports.
    pub linked_in: bool,
}

impl LibraryFile {
    /// The functions uprobes attach to, with their file offsets: the exports, or for a
    /// runtime linked into a program, the runtime's functions in its `.symtab`.
    pub fn functions(&self) -> Result<Vec<ExportedSymbol>> {
        if self.linked_in {
            linked_runtime_functions(&self.path)
        } else {
            exported_functions(&self.path)
        }
    }
}

/// Where a library search looks.
#[derive(Clone, Debug, Default)]
pub struct Search {
    /// Only these processes' mappings (`--pid`); `None` scans every process.
    pub pids: Option<Vec<u32>>,
    /// Also look in the common install places (the host's and each container's).
    pub install_places: bool,
    /// Root of the proc filesystem (tests point it elsewhere).
    pub proc_root: PathBuf,
    /// Root the host's install places are searched below (tests point it elsewhere; then the
    /// environment's Python prefixes are not searched either).
    pub fs_root: PathBuf,
}

impl Search {
    pub fn new(pids: Option<Vec<u32>>) -> Self {
        Search {
            pids,
            install_places: true,
            proc_root: PathBuf::from("/proc"),
            fs_root: PathBuf::from("/"),
        }
    }
}

/// CUDA libraries mapped by one process, from its maps file: each path once, with its kind.
pub fn mapped_cuda_libraries(maps: &str) -> Vec<(PathBuf, CudaLibrary)> {
    let mut out: Vec<(PathBuf, CudaLibrary)> = Vec::new();
    for path in mapped_paths(maps) {
        let Some(kind) = kind_from_path(path) else {
            continue;
        };
        if !out.iter().any(|(p, _)| p == path) {
            out.push((path.to_path_buf(), kind));
        }
    }
    out
}

/// Distinct libraries by (device, inode, linked in), in the order of that key. One file can be
/// two: NCCL's `libnccl.so.2` is attached for its exports (NCCL's calls) and for the CUDA
/// runtime linked into it (the runtime calls NCCL makes itself).
#[derive(Default)]
struct Found(BTreeMap<(u64, u64, bool), LibraryFile>);

impl Found {
    /// A runtime linked into a program that `pid` runs.
    fn add_linked(&mut self, library: LibraryFile, pid: u32) {
        let key = (library.dev, library.ino, library.linked_in);
        let entry = self.0.entry(key).or_insert(library);
        if !entry.mapped_by.contains(&pid) {
            entry.mapped_by.push(pid);
        }
    }

    fn add(&mut self, path: PathBuf, kind: CudaLibrary, pid: Option<u32>) {
        // Through /proc/<pid>/root the file is reachable even in another mount namespace.
        let Ok(meta) = fs::metadata(&path) else {
            return;
        };
        if !meta.is_file() {
            return;
        }
        let entry = self
            .0
            .entry((meta.dev(), meta.ino(), false))
            .or_insert_with(|| LibraryFile {
                path: path.clone(),
                dev: meta.dev(),
                ino: meta.ino(),
                mapped_by: Vec::new(),
                kind,
                linked_in: false,
            });
        if let Some(pid) = pid {
            if !entry.mapped_by.contains(&pid) {
                entry.mapped_by.push(pid);
            }
        }
    }

    /// Every match of `patterns` below `root` whose name is a CUDA library's.
    fn add_places(&mut self, root: &Path, patterns: &[impl AsRef<str>]) {
        for path in matching_below(root, patterns) {
            if let Some(kind) = kind_from_path(&path) {
                self.add(path, kind, None);
            }
        }
    }
}

fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Finds the distinct CUDA runtime and driver libraries to attach to, programs that have the
/// runtime linked in included.
pub fn find_cuda_libraries(search: &Search) -> Result<Vec<LibraryFile>> {
    find_cuda_libraries_with(search, &mut Looked::default())
}

/// As [`find_cuda_libraries`], reading only the mapped files `looked` has not seen for a
/// runtime linked in (a rescan's search).
pub fn find_cuda_libraries_with(search: &Search, looked: &mut Looked) -> Result<Vec<LibraryFile>> {
    let mut found = Found::default();
    let pids = search
        .pids
        .clone()
        .unwrap_or_else(|| pids_in(&search.proc_root));
    let host_root = dev_ino(&search.fs_root);
    // Container roots already searched, by the (device, inode) of their root directory.
    let mut roots_seen: BTreeSet<(u64, u64)> = host_root.into_iter().collect();
    for pid in pids {
        let proc_dir = search.proc_root.join(pid.to_string());
        let root = proc_dir.join("root");
        if let Ok(maps) = fs::read_to_string(proc_dir.join("maps")) {
            for (path, kind) in mapped_cuda_libraries(&maps) {
                found.add(reachable(&proc_dir, &path), kind, Some(pid));
            }
            for library in linked_runtimes_in(&proc_dir, &maps, looked) {
                found.add_linked(library, pid);
            }
        }
        // A process whose root is not the host's runs in a container: the container toolkit
        // mounts the host's driver there, where a process that has not loaded it yet will.
        if search.install_places {
            if let Some(key) = dev_ino(&root) {
                if roots_seen.insert(key) {
                    found.add_places(&root, DRIVER_PATTERNS);
                }
            }
        }
    }
    if search.install_places {
        if search.fs_root == Path::new("/") {
            found.add_places(&search.fs_root, &host_patterns());
        } else {
            // A test's fake root: only the fixed places, none from this host's environment.
            found.add_places(&search.fs_root, &super::places::fixed_patterns());
        }
    }
    Ok(found.0.into_values().collect())
}

/// The CUDA libraries (by name) that `patterns` match on this host, each file once.
pub fn libraries_matching(patterns: &[String]) -> Vec<LibraryFile> {
    let mut found = Found::default();
    found.add_places(Path::new("/"), patterns);
    found.0.into_values().collect()
}

/// Resolves an explicit `--cuda-lib` path into a library file. Its kind comes from its name
/// (or its symlink target's), else from what it exports (`cuInit` ⇒ driver, `cudaMalloc` ⇒
/// runtime), else from the runtime linked into it (a program built with `-cudart static`).
pub fn library_at(path: &Path) -> Result<LibraryFile> {
    let meta = fs::metadata(path)
        .with_context(|| format!("--cuda-lib {}: cannot read the file", path.display()))?;
    let named = kind_from_path(path)
        .or_else(|| fs::canonicalize(path).ok().and_then(|t| kind_from_path(&t)));
    let kind = match named {
        Some(kind) => kind,
        None => {
            let exports = exported_functions(path)
                .with_context(|| format!("--cuda-lib {}", path.display()))?;
            match kind_from_exports(exports.iter().map(|e| e.name.as_str())) {
                Some(kind) => kind,
                None => {
                    return linked_runtime_at(path)
                        .with_context(|| format!("--cuda-lib {}", path.display()))?
                        .with_context(|| {
                            format!(
                                "--cuda-lib {}: neither a CUDA runtime nor a CUDA driver library \
                                 (it exports neither cudaMalloc nor cuInit, and has no runtime \
                                 linked in)",
                                path.display()
                            )
                        });
                }
            }
        }
    };
    Ok(LibraryFile {
        path: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
        mapped_by: Vec::new(),
        kind,
        linked_in: false,
    })
}

#[cfg(test)]
#[path = "libraries_tests.rs"]
mod tests;
