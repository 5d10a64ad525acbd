//! Naming a launched address from the ELF symbols of the file mapped there, for kernels
//! registered before the agent started (their `__cudaRegisterFunction` calls were missed).
//!
//! `(pid, address)` → the executable mapping holding it (`/proc/<pid>/maps`) → the file,
//! opened as the process sees it (`/proc/<pid>/root/<path>`, or `/proc/<pid>/map_files/…`
//! when that is not the mapped file, e.g. deleted or replaced) → file offset → virtual
//! address through the `PT_LOAD` segments → the function symbol there.
//!
//! The name found is the host-side symbol, which differs from the device name for
//! internal-linkage and lambda kernels (`_ZN4demoL5scaleILi4EEEvPffi`, or a
//! `__device_stub__` wrapper), so it is reported with source `symtab` or `dynsym`.
//!
//! Bounds: indexes of at most [`MAX_INDEXED_FILES`] files and [`MAX_INDEX_BYTES`] bytes
//! (libtorch_cuda's alone may take tens of MB), evicted by CLOCK; parsed maps of at most
//! [`MAX_PROCESSES`] processes.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clock::ClockMap;
use super::elf_index::SymbolIndex;
use super::maps::{FileId, Mapping, executable_mappings};
use super::name::NameSource;

/// Files whose symbol index is kept.
pub const MAX_INDEXED_FILES: usize = 8;
/// Bytes of symbol indexes kept, all files together.
pub const MAX_INDEX_BYTES: usize = 256 << 20;
/// Processes whose parsed maps are kept.
pub const MAX_PROCESSES: usize = 1024;

/// A process's maps are read again for an address they do not cover only when the copy is
/// older than this. The fallback is for libraries mapped *before* the agent started, which
/// the first read sees; later ones register through the probes. Without the interval every
/// unknown driver handle (a heap pointer, never in a file mapping) would reread the maps.
const MAPS_REFRESH: Duration = Duration::from_secs(1);

/// Names an address of a process from what is mapped there; the seam the store uses, so its
/// tests can count the calls.
pub trait AddressSymbolizer: Send {
    /// The symbol name at `addr` in process `pid`, with the table it came from.
    fn symbolize(&mut self, pid: u32, addr: u64) -> Option<(Vec<u8>, NameSource)>;
    /// Drops what is kept for an exited process.
    fn forget_process(&mut self, pid: u32);
}

struct CachedMaps {
    read_at: Instant,
    mappings: Vec<Mapping>,
}

/// The ELF symbolizer over `/proc` (or another root, for tests).
pub struct ElfFallback {
    proc_root: PathBuf,
    maps: ClockMap<u32, CachedMaps>,
    /// `None`: the file could not be indexed; remembered so it is not read again.
    indexes: ClockMap<FileId, Option<Arc<SymbolIndex>>>,
    index_bytes: usize,
}

impl ElfFallback {
    /// A symbolizer reading `<proc_root>/<pid>/maps` and the files through
    /// `<proc_root>/<pid>/root`; `proc_root` is `/proc` outside tests.
    pub fn new(proc_root: impl Into<PathBuf>) -> Self {
        Self {
            proc_root: proc_root.into(),
            maps: ClockMap::new(),
            indexes: ClockMap::new(),
            index_bytes: 0,
        }
    }

    fn mapping_for(&mut self, pid: u32, addr: u64) -> Option<Mapping> {
        let cached = self.maps.get(&pid).and_then(|maps| {
            let found = maps.mappings.iter().find(|m| m.contains(addr)).cloned();
            match found {
                Some(mapping) => Some(Ok(mapping)),
                None if maps.read_at.elapsed() < MAPS_REFRESH => Some(Err(())),
                None => None,
            }
        });
        match cached {
            Some(Ok(mapping)) => return Some(mapping),
            Some(Err(())) => return None,
            None => {}
        }
        let text = std::fs::read_to_string(self.process_path(pid, "maps")).ok()?;
        let mappings = executable_mappings(&text);
        let found = mappings.iter().find(|m| m.contains(addr)).cloned();
        let fresh = CachedMaps {
            read_at: Instant::now(),
            mappings,
        };
        self.maps.insert_bounded(pid, fresh, MAX_PROCESSES);
        found
    }

    fn index_for(&mut self, pid: u32, mapping: &Mapping) -> Option<Arc<SymbolIndex>> {
        if let Some(known) = self.indexes.get(&mapping.file) {
            return known.clone();
        }
        let built = open_mapped_file(&self.process_path(pid, ""), mapping).and_then(|file| {
            match SymbolIndex::build(file) {
                Ok(index) => Some(Arc::new(index)),
                Err(err) => {
                    tracing::debug!(path = %mapping.path, %err, "no symbol index");
                    None
                }
            }
        });
        let bytes = built.as_ref().map_or(0, |index| index.heap_bytes());
        while self.indexes.len() >= MAX_INDEXED_FILES
            || (self.indexes.len() > 0 && self.index_bytes + bytes > MAX_INDEX_BYTES)
        {
            let Some((_, evicted)) = self.indexes.evict_one() else {
                break;
            };
            self.index_bytes -= evicted.map_or(0, |index| index.heap_bytes());
        }
        self.index_bytes += bytes;
        self.indexes.insert(mapping.file, built.clone());
        built
    }

    fn process_path(&self, pid: u32, leaf: &str) -> PathBuf {
        self.proc_root.join(pid.to_string()).join(leaf)
    }
}

/// Opens the file a mapping shows, checking it is that file (same inode): through the
/// process's root first (works across mount namespaces), else its `map_files` link (works
/// for deleted files; needs CAP_SYS_ADMIN, which the agent has).
fn open_mapped_file(process_dir: &Path, mapping: &Mapping) -> Option<File> {
    let through_root = process_dir
        .join("root")
        .join(mapping.path.trim_start_matches('/'));
    let through_map_files = process_dir
        .join("map_files")
        .join(format!("{:x}-{:x}", mapping.start, mapping.end));
    [through_root, through_map_files]
        .into_iter()
        .find_map(|path| {
            let file = File::open(path).ok()?;
            let inode = file.metadata().ok()?.ino();
            (inode == mapping.file.inode).then_some(file)
        })
}

impl AddressSymbolizer for ElfFallback {
    fn symbolize(&mut self, pid: u32, addr: u64) -> Option<(Vec<u8>, NameSource)> {
        let mapping = self.mapping_for(pid, addr)?;
        let index = self.index_for(pid, &mapping)?;
        let vaddr = index.vaddr_of_file_offset(mapping.file_offset(addr))?;
        let name = index.function_at(vaddr)?;
        Some((name.to_vec(), index.source))
    }

    fn forget_process(&mut self, pid: u32) {
        self.maps.remove(&pid);
    }
}
