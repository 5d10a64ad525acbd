//! Small helpers shared by the probe families: configuration, tracking, counters, headers.

use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_smp_processor_id, bpf_ktime_get_ns,
};
use ingero_ebpf::{COMM_LEN, Config, RecordHeader};

use super::maps::{CONFIG, COUNTERS, TRACKED};

#[inline(always)]
pub fn config() -> Option<&'static Config> {
    CONFIG.get(0)
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

/// Adds a thread group to the tracked set, counting a failure (map full).
#[inline(always)]
pub fn track(tgid: u32) {
    if TRACKED.insert(&tgid, &1, 0).is_err() {
        count(ingero_ebpf::counters::TRACKED_FULL);
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
