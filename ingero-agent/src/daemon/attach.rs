//! Which CUDA libraries (runtimes and drivers) are probed: the libraries found at start (or
//! named with `--cuda-lib`), each attached once (by device and inode), and the periodic rescan
//! for libraries that processes load later. The same for the NVTX libraries of the NVTX
//! fallback, when NVTX capture is on.
//!
//! Why the NVTX fallback is attached only with NVTX capture on (`--annotate`, `trace -- CMD`:
//! the NVTX socket is open): it is the socket's fallback, and it costs a uprobe hit (µs) on
//! every NVTX call of every process on the host that maps those libraries, which a session that
//! did not ask for NVTX ranges should not pay. With the socket open, its peers are known, so
//! a process captured by both routes is recorded once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use anyhow::Result;

use crate::discover::{self, LibraryFile, libraries::Search, looked::Looked, nvtx::NvtxLibrary};
use crate::probes::Probes;
use ingero_ebpf::NvtxCall;

/// Libraries attached so far, by (device, inode, linked in: a file's exports and the runtime
/// linked into it are attached apart), and processes already tracked.
#[derive(Default)]
pub(super) struct Attached {
    inodes: BTreeSet<(u64, u64, bool)>,
    /// NVTX libraries attached, by (device, inode).
    nvtx_inodes: BTreeSet<(u64, u64)>,
    pids: BTreeSet<u32>,
    /// The mapped files already looked at for a runtime linked in, so rescans read new ones only.
    looked: Looked,
    /// `path: symbols` per attached library, for the recording's session metadata.
    libraries: Vec<String>,
    /// NVTX libraries whose entry points are being read on a thread of their own (a large
    /// `.symtab` such as libtorch_python's takes long enough to stall the event loop), and
    /// where the results arrive.
    nvtx_results: Option<NvtxResults>,
}

/// An NVTX library and its entry points (or why they could not be read).
type NvtxParsed = (NvtxLibrary, Result<Vec<(NvtxCall, u64)>>);

struct NvtxResults {
    tx: mpsc::Sender<NvtxParsed>,
    rx: mpsc::Receiver<NvtxParsed>,
}

impl Attached {
    /// Rescans hand the files they have not seen to a thread (see `discover::looked`); where
    /// no thread can start, they read them in place.
    pub(super) fn read_linked_runtimes_in_background(&mut self) {
        if let Err(e) = self.looked.read_in_background() {
            tracing::warn!("reading programs' symbols in place: no thread ({e})");
        }
    }

    pub(super) fn probe_names(&self) -> Vec<String> {
        let mut names = self.libraries.clone();
        names.push("tracepoints: sched_switch, sched_process_exec, sched_process_exit, sched_process_fork, task_newtask".into());
        names
    }
}

/// Attaches the libraries not attached yet; with `track_mappers`, also traces the processes
/// that map them. Returns how many libraries were new.
pub(super) fn attach_new(
    probes: &mut Probes,
    attached: &mut Attached,
    libraries: Vec<LibraryFile>,
    track_mappers: bool,
) -> Result<usize> {
    let mut new = 0;
    for library in libraries {
        if track_mappers {
            let fresh: Vec<u32> = library
                .mapped_by
                .iter()
                .copied()
                .filter(|p| attached.pids.insert(*p))
                .collect();
            if let Err(e) = probes.track(&fresh) {
                tracing::warn!("could not track processes {fresh:?}: {e:#}");
            }
        }
        if !attached
            .inodes
            .insert((library.dev, library.ino, library.linked_in))
        {
            continue;
        }
        let report = match probes.attach_library(&library) {
            Ok(r) => r,
            // A copy found in a process's mappings can vanish before it is attached (the
            // process exited and its file was deleted): said and skipped (its inode stays
            // known, so a rescan does not say it again). A library the user named, or an
            // installed one, is an error.
            Err(e) if !library.mapped_by.is_empty() => {
                eprintln!("ingero: skipping {}: {e:#}", library.path.display());
                continue;
            }
            Err(e) => return Err(e),
        };
        new += 1;
        attached.libraries.push(format!(
            "{}: {}",
            library.path.display(),
            report.attached.join(", ")
        ));
        let mut line = format!(
            "ingero: {}: probing {} symbols",
            library.path.display(),
            report.attached.len()
        );
        if library.linked_in {
            // A program links in only the part of the runtime it uses: what it left out is
            // not worth a list.
            line.push_str(" of the CUDA runtime linked into it");
        } else if !report.missing.is_empty() {
            line.push_str(&format!(
                "; not exported here: {}",
                report.missing.join(", ")
            ));
        }
        eprintln!("{line}");
    }
    Ok(new)
}

/// Attaches the NVTX fallback to the NVTX libraries that `pids` (or every process) map and
/// that are not attached yet. At start (`inline`) their entry points are read here; later a
/// new library's are read on a thread of its own and attached by [`collect_nvtx`] (each
/// second), so the event loop never waits on a large symbol table such as libtorch_python's.
/// Failures are said and skipped: NVTX is an extra.
pub(super) fn attach_nvtx(
    probes: &mut Probes,
    attached: &mut Attached,
    pids: &Option<Vec<u32>>,
    inline: bool,
) {
    let found = discover::nvtx::find_nvtx_libraries(Path::new("/proc"), pids.as_deref());
    for library in found {
        if !attached.nvtx_inodes.insert((library.dev, library.ino)) {
            continue;
        }
        if inline {
            let points = discover::nvtx::nvtx_entry_points(&library.path);
            attach_nvtx_points(probes, attached, library, points);
            continue;
        }
        let tx = attached.nvtx_results().tx.clone();
        let spawned = std::thread::Builder::new()
            .name("ingero-nvtx-elf".into())
            .spawn(move || {
                let points = discover::nvtx::nvtx_entry_points(&library.path);
                let _ = tx.send((library, points));
            });
        if let Err(e) = spawned {
            eprintln!("ingero: NVTX fallback: cannot read a library's symbols: {e}");
        }
    }
}

/// Attaches the NVTX libraries whose entry points were read since the last call.
pub(super) fn collect_nvtx(probes: &mut Probes, attached: &mut Attached) {
    loop {
        let Ok((library, points)) = attached.nvtx_results().rx.try_recv() else {
            return;
        };
        attach_nvtx_points(probes, attached, library, points);
    }
}

fn attach_nvtx_points(
    probes: &mut Probes,
    attached: &mut Attached,
    library: NvtxLibrary,
    points: Result<Vec<(NvtxCall, u64)>>,
) {
    match points.and_then(|p| probes.attach_nvtx_points(&library, &p)) {
        Ok(symbols) if symbols.is_empty() => {}
        Ok(symbols) => {
            eprintln!(
                "ingero: {}: NVTX fallback on {} symbols",
                library.path.display(),
                symbols.len()
            );
            attached.libraries.push(format!(
                "{} (NVTX fallback): {}",
                library.path.display(),
                symbols.join(", ")
            ));
        }
        Err(e) => eprintln!(
            "ingero: {}: NVTX fallback not attached: {e:#}",
            library.path.display()
        ),
    }
}

impl Attached {
    fn nvtx_results(&mut self) -> &NvtxResults {
        self.nvtx_results.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel();
            NvtxResults { tx, rx }
        })
    }
}

/// The libraries to attach at start: `cuda_libs` when given, else the runtimes and drivers
/// that `pids` (or every process) map or have linked in, and those the install places hold.
pub(super) fn discover_libraries(
    pids: &Option<Vec<u32>>,
    cuda_libs: &[PathBuf],
    attached: &mut Attached,
) -> Result<Vec<LibraryFile>> {
    if cuda_libs.is_empty() {
        discover::libraries::find_cuda_libraries_with(
            &Search::new(pids.clone()),
            &mut attached.looked,
        )
    } else {
        cuda_libs
            .iter()
            .map(|p| discover::libraries::library_at(p))
            .collect()
    }
}

/// Looks for libraries that running processes loaded since the last look, and attaches them.
/// Failures are logged: tracing goes on with what is attached.
pub(super) fn rescan(
    probes: &mut Probes,
    attached: &mut Attached,
    pids: &Option<Vec<u32>>,
    track_mappers: bool,
) {
    let search = Search {
        install_places: false,
        ..Search::new(pids.clone())
    };
    if let Ok(found) = discover::libraries::find_cuda_libraries_with(&search, &mut attached.looked)
    {
        if let Err(e) = attach_new(probes, attached, found, track_mappers) {
            tracing::warn!("attaching a newly loaded CUDA library failed: {e:#}");
        }
    }
}
