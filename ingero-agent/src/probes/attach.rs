//! Attaching programs: the CUDA entry/return pair to each exported symbol of a library (with
//! the op and its flags in the attach cookie), the NVTX fallback's entry program to each NVTX
//! function of an NVTX library (the call in the cookie), and the kernel tracepoints.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use aya::{
    Ebpf,
    programs::{
        TracePoint, UProbe,
        trace_point::TracePointLinkId,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLinkId, UProbeScope},
    },
};
use ingero_ebpf::{CudaOp, NvtxCall, OpFlags, cuda_ops::cookie};

use crate::discover::{LibraryFile, nvtx::NvtxLibrary};

const ENTRY: &str = "cuda_enter";
/// The sleepable entry program of the registrations (it may fault a kernel name in).
const REGISTER: &str = "cuda_register";
const NVTX_ENTRY: &str = "nvtx_enter";
const RETURN: &str = "cuda_return";
const TRACEPOINTS: &[(&str, &str, &str)] = &[
    ("sched_switch", "sched", "sched_switch"),
    ("sched_process_exec", "sched", "sched_process_exec"),
    ("sched_process_exit", "sched", "sched_process_exit"),
    ("sched_process_fork", "sched", "sched_process_fork"),
    ("task_newtask", "task", "task_newtask"),
];

/// Every message the kernel logs passes here; the program keeps the NVIDIA drivers' only.
const DRIVER_LOG_TRACEPOINT: (&str, &str, &str) = ("printk_console", "printk", "console");

/// Every link, by program, so they can be detached explicitly.
#[derive(Default)]
pub struct Links {
    entries: Vec<UProbeLinkId>,
    returns: Vec<UProbeLinkId>,
    tracepoints: Vec<(&'static str, TracePointLinkId)>,
    loaded: BTreeSet<&'static str>,
    /// Whether [`REGISTER`] was refused (a kernel without sleepable uprobes): registrations
    /// then go to [`ENTRY`], which reads only names on pages already present.
    register_refused: bool,
}

impl Links {
    pub fn len(&self) -> usize {
        self.entries.len() + self.returns.len() + self.tracepoints.len()
    }

    /// Detaches the tracepoints (quick, unlike uprobes: see `Probes::stop`).
    pub fn detach_tracepoints(&mut self, ebpf: &mut Ebpf) {
        for (name, id) in self.tracepoints.drain(..) {
            if let Some(Ok(p)) = ebpf.program_mut(name).map(<&mut TracePoint>::try_from) {
                let _ = p.detach(id);
            }
        }
    }
}

/// What attaching one library did.
#[derive(Clone, Debug, Default)]
pub struct LibraryAttach {
    /// Symbols attached (entry and return each).
    pub attached: Vec<&'static str>,
    /// Traced symbols this library does not export.
    pub missing: Vec<&'static str>,
}

fn uprobe<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut UProbe> {
    let program = ebpf
        .program_mut(name)
        .with_context(|| format!("the eBPF object has no program {name}"))?;
    <&mut UProbe>::try_from(program).with_context(|| format!("{name} is not a uprobe"))
}

fn ensure_loaded(ebpf: &mut Ebpf, links: &mut Links, name: &'static str) -> Result<()> {
    if links.loaded.insert(name) {
        let result = match ebpf.program_mut(name) {
            Some(p) => match p {
                aya::programs::Program::UProbe(u) => u.load(),
                aya::programs::Program::TracePoint(t) => t.load(),
                _ => Ok(()),
            },
            None => anyhow::bail!("the eBPF object has no program {name}"),
        };
        result.with_context(|| format!("the kernel rejected the eBPF program {name}"))?;
    }
    Ok(())
}

/// Attaches the entry and return programs to every traced symbol the library exports: every
/// export of every op of the library's kind (`_v2`, `_ptsz`, `_ptds`, legacy), each with the
/// cookie that names its op, flags and variant. Entry-only ops (`__cudaRegisterFunction`) get
/// no return probe. A runtime linked into a program is attached at the same functions, found
/// in its `.symtab`.
pub fn library(ebpf: &mut Ebpf, links: &mut Links, library: &LibraryFile) -> Result<LibraryAttach> {
    ensure_loaded(ebpf, links, ENTRY)?;
    ensure_loaded(ebpf, links, RETURN)?;
    let exports = library.functions()?;
    let mut report = LibraryAttach::default();
    for op in CudaOp::ALL.iter().filter(|op| op.library() == library.kind) {
        for (symbol, flags, variant) in op.exports() {
            let Some(export) = exports.iter().find(|e| e.name == symbol) else {
                report.missing.push(symbol);
                continue;
            };
            let point = || UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(export.file_offset),
                cookie: Some(cookie(*op, flags, variant)),
            };
            let registration = flags.contains(OpFlags::REGISTER);
            let mut attached = None;
            if registration && registration_program_loaded(ebpf, links) {
                match uprobe(ebpf, REGISTER)?.attach(
                    point(),
                    &library.path,
                    UProbeScope::AllProcesses,
                ) {
                    Ok(link) => attached = Some(link),
                    Err(e) => refuse_registration_program(links, &e),
                }
            }
            let entry = match attached {
                Some(link) => link,
                None => uprobe(ebpf, ENTRY)?
                    .attach(point(), &library.path, UProbeScope::AllProcesses)
                    .with_context(|| {
                        format!("attaching to {symbol} in {}", library.path.display())
                    })?,
            };
            links.entries.push(entry);
            if !flags.contains(OpFlags::REGISTER) {
                let ret = uprobe(ebpf, RETURN)?
                    .attach(point(), &library.path, UProbeScope::AllProcesses)
                    .with_context(|| {
                        format!(
                            "attaching a return probe to {symbol} in {}",
                            library.path.display()
                        )
                    })?;
                links.returns.push(ret);
            }
            report.attached.push(symbol);
        }
    }
    Ok(report)
}

/// Whether registrations attach to [`REGISTER`]: loaded now if it is not yet; a kernel
/// that refuses it sends them to [`ENTRY`] from then on (said once).
fn registration_program_loaded(ebpf: &mut Ebpf, links: &mut Links) -> bool {
    if links.register_refused {
        return false;
    }
    match ensure_loaded(ebpf, links, REGISTER) {
        Ok(()) => true,
        Err(e) => {
            refuse_registration_program(links, &e);
            false
        }
    }
}

fn refuse_registration_program(links: &mut Links, error: &dyn std::fmt::Display) {
    if !links.register_refused {
        links.register_refused = true;
        eprintln!(
            "ingero: no sleepable uprobes here ({error}): a kernel name on a page its process \
             has not touched yet is read later, while the process lives"
        );
    }
}

/// Attaches the NVTX fallback's program to every copy of every probed NVTX function the
/// library defines (exported or local); returns the symbols attached, once each.
pub fn nvtx_library(
    ebpf: &mut Ebpf,
    links: &mut Links,
    library: &NvtxLibrary,
) -> Result<Vec<&'static str>> {
    let points = crate::discover::nvtx::nvtx_entry_points(&library.path)?;
    nvtx_points(ebpf, links, library, &points)
}

/// Attaches the NVTX fallback at `points` (read beforehand: see
/// `discover::nvtx::nvtx_entry_points`); returns the functions attached.
pub fn nvtx_points(
    ebpf: &mut Ebpf,
    links: &mut Links,
    library: &NvtxLibrary,
    points: &[(NvtxCall, u64)],
) -> Result<Vec<&'static str>> {
    ensure_loaded(ebpf, links, NVTX_ENTRY)?;
    let mut attached = Vec::new();
    for &(call, offset) in points {
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(offset),
            cookie: Some(call as u64),
        };
        let link = uprobe(ebpf, NVTX_ENTRY)?
            .attach(point, &library.path, UProbeScope::AllProcesses)
            .with_context(|| {
                format!(
                    "attaching to {} in {}",
                    call.symbol(),
                    library.path.display()
                )
            })?;
        links.entries.push(link);
        if !attached.contains(&call.symbol()) {
            attached.push(call.symbol());
        }
    }
    Ok(attached)
}

/// Attaches the scheduler and process tracepoints; returns how many.
pub fn tracepoints(ebpf: &mut Ebpf, links: &mut Links) -> Result<usize> {
    for &point in TRACEPOINTS {
        tracepoint(ebpf, links, point)?;
    }
    Ok(TRACEPOINTS.len())
}

/// Attaches the tracepoint that captures the NVIDIA drivers' kernel log messages (Xid
/// reports). Optional: the caller warns and traces on without it.
pub fn driver_log_tracepoint(ebpf: &mut Ebpf, links: &mut Links) -> Result<()> {
    tracepoint(ebpf, links, DRIVER_LOG_TRACEPOINT)
}

fn tracepoint(
    ebpf: &mut Ebpf,
    links: &mut Links,
    (program, category, name): (&'static str, &str, &str),
) -> Result<()> {
    ensure_loaded(ebpf, links, program)?;
    let tp: &mut TracePoint = ebpf
        .program_mut(program)
        .with_context(|| format!("the eBPF object has no program {program}"))?
        .try_into()
        .with_context(|| format!("{program} is not a tracepoint"))?;
    let id = tp
        .attach(category, name)
        .with_context(|| format!("attaching tracepoint {category}/{name}"))?;
    links.tracepoints.push((program, id));
    Ok(())
}
