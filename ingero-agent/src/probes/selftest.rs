//! `ingero check`'s proof that uprobes work on this host: the object's no-op entry program
//! (`bench_noop_enter`, which only returns) attached to one function of a real library and
//! detached again. Loading the object before that ([`Probes::load`]) already created the ring
//! buffers, so a success means the kernel accepts everything `ingero trace` needs.

use std::path::Path;

use anyhow::{Context, Result};
use aya::programs::{
    UProbe,
    uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
};

use super::Probes;

/// The program attached: it records nothing, so the test leaves no trace in the rings.
const NOOP_ENTRY: &str = "bench_noop_enter";

impl Probes {
    /// Attaches the no-op program at `file_offset` of `library` and detaches it at once.
    pub fn attach_test_probe(&mut self, library: &Path, file_offset: u64) -> Result<()> {
        let program: &mut UProbe = self
            .ebpf
            .program_mut(NOOP_ENTRY)
            .with_context(|| format!("the eBPF object has no program {NOOP_ENTRY}"))?
            .try_into()
            .with_context(|| format!("{NOOP_ENTRY} is not a uprobe"))?;
        program
            .load()
            .with_context(|| format!("the kernel rejected the eBPF program {NOOP_ENTRY}"))?;
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(file_offset),
            cookie: None,
        };
        let link = program
            .attach(point, library, UProbeScope::AllProcesses)
            .with_context(|| format!("attaching a uprobe in {}", library.display()))?;
        program.detach(link).context("detaching the test uprobe")?;
        Ok(())
    }
}
