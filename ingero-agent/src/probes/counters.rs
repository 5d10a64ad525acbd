//! The kernel side's per-CPU loss counters, summed over CPUs.

use anyhow::{Context, Result};
use aya::{
    Ebpf,
    maps::{MapData, PerCpuArray},
};
use ingero_ebpf::counters::NAMED;

/// Handle on the `COUNTERS` map.
pub struct KernelCounters {
    map: PerCpuArray<MapData, u64>,
}

impl KernelCounters {
    pub fn take_from(ebpf: &mut Ebpf) -> Result<Self> {
        let map = ebpf
            .take_map("COUNTERS")
            .context("the eBPF object has no COUNTERS map")?;
        Ok(KernelCounters {
            map: PerCpuArray::try_from(map).context("COUNTERS is not a per-CPU array")?,
        })
    }

    /// Every named counter with its total over all CPUs.
    pub fn read(&self) -> Vec<(&'static str, u64)> {
        NAMED
            .iter()
            .map(|(slot, name)| {
                let total = self
                    .map
                    .get(slot, 0)
                    .map(|per_cpu| per_cpu.iter().copied().sum())
                    .unwrap_or(0);
                (*name, total)
            })
            .collect()
    }
}
