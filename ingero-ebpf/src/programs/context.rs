//! Small helpers shared by the probe families: configuration, tracking, counters, headers.

use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_smp_processor_id, bpf_ktime_get_ns,
};
use aya_ebpf::programs::TracePointContext;
use ingero_ebpf::{COMM_LEN, Config, RecordHeader, config::ABSENT};

use super::maps::{CONFIG, COUNTERS, TRACKED};

/// Reads a tracepoint field at an offset taken from tracefs; `ABSENT` fields read as `None`.
#[inline(always)]
pub fn read_field<T>(ctx: &TracePointContext, offset: u32) -> Option<T> {
    if offset == ABSENT {
        return None;
    }
    // SAFETY: `read_at` copies through bpf_probe_read; the offset comes from tracefs.
    unsafe { ctx.read_at::<T>(offset as usize) }.ok()
}

/// The configuration, unless the agent is shutting down (then nothing is recorded).
#[inline(always)]
pub fn config() -> Option<&'static Config> {
    CONFIG
        .get(0)
        .filter(|c| c.filter_mode != ingero_ebpf::FilterMode::Stopped as u32)
}

#[inline(always)]
pub fn now_ns() -> u64 {
    // SAFETY: a helper without arguments or preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
pub fn count(slot: u32) {
    if let Some(p) = COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub fn is_tracked(tgid: u32) -> bool {
    // SAFETY: the value is only read for presence.
    unsafe { TRACKED.get(&tgid) }.is_some()
}

/// Whether a uprobe hit of `tgid` is recorded: never the agent's own, never while stopping;
/// with `--pid` (or a command) only tracked processes; otherwise every process, which becomes
/// tracked (its scheduling and lifecycle are followed from then on).
#[inline(always)]
pub fn admitted(tgid: u32) -> bool {
    let Some(cfg) = config() else { return false };
    if tgid == cfg.agent_tgid {
        return false;
    }
    if !is_tracked(tgid) {
        if cfg.filter_mode == ingero_ebpf::FilterMode::Listed as u32 {
            return false;
        }
        track(tgid);
    }
    true
}

/// Adds a thread group to the tracked set, counting a failure (map full).
#[inline(always)]
pub fn track(tgid: u32) {
    if TRACKED.insert(&tgid, &1, 0).is_err() {
        count(ingero_ebpf::counters::TRACKED_FULL);
    }
}

/// Submit flags for a ring buffer: wake the agent only once enough data waits.
#[inline(always)]
pub fn submit_flags(ring: &aya_ebpf::maps::RingBuf) -> u64 {
    const BPF_RB_NO_WAKEUP: u64 = 1;
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    const BPF_RB_AVAIL_DATA: u64 = 0;
    let threshold = config().map_or(0, |c| c.wakeup_bytes as u64);
    if ring.query(BPF_RB_AVAIL_DATA) >= threshold {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    }
}

#[inline(always)]
pub fn current_comm() -> [u8; COMM_LEN] {
    bpf_get_current_comm().unwrap_or([0; COMM_LEN])
}

/// A header for the current task.
#[inline(always)]
pub fn header(kind: u16, op: u16, ts_ns: u64, pid_tgid: u64) -> RecordHeader {
    RecordHeader {
        kind,
        op,
        // SAFETY: helpers without arguments or preconditions.
        cpu: unsafe { bpf_get_smp_processor_id() },
        ts_ns,
        tgid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        // SAFETY: as above.
        cgroup_id: unsafe { bpf_get_current_cgroup_id() },
        comm: current_comm(),
    }
}
