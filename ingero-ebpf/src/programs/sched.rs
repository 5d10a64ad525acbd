//! `sched/sched_switch`: off-CPU intervals of traced threads, with the reason and who ran instead.
//!
//! At switch-out of a traced thread the start is stored by tid; when that tid is switched in
//! again the whole interval is emitted as one [`OffCpuRecord`].

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid, bpf_get_smp_processor_id},
    macros::tracepoint,
    programs::TracePointContext,
};
use ingero_ebpf::{COMM_LEN, OffCpuReason, OffCpuRecord, RecordHeader, RecordKind, counters};

use super::{
    context::{config, count, current_comm, is_tracked, now_ns, read_field, submit_flags},
    maps::{OFF_CPU, OffCpuStart, SCHED_EVENTS},
};

/// `TASK_REPORT_MAX`: what the tracepoint reports as `prev_state` for a preempted task.
const TASK_REPORT_MAX: i64 = 0x100;

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    on_switch(&ctx);
    0
}

#[inline(always)]
fn on_switch(ctx: &TracePointContext) {
    let Some(cfg) = config() else { return };
    let layout = &cfg.layout;
    let now = now_ns();
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;

    // Switch-out: `current` is still the previous task here.
    if tid != 0 && is_tracked(tgid) {
        let prev_state: i64 = read_field(ctx, layout.switch_prev_state).unwrap_or(0);
        let runnable = prev_state == 0 || prev_state & TASK_REPORT_MAX != 0;
        let reason = if runnable {
            OffCpuReason::Preempted
        } else {
            OffCpuReason::Blocked
        };
        let start = OffCpuStart {
            ts_ns: now,
            // SAFETY: helpers without preconditions.
            cgroup_id: unsafe { bpf_get_current_cgroup_id() },
            prev_state,
            tgid,
            reason: reason as u32,
            next_tid: read_field::<i32>(ctx, layout.switch_next_pid).unwrap_or(0) as u32,
            // SAFETY: as above.
            cpu: unsafe { bpf_get_smp_processor_id() },
            comm: current_comm(),
            next_comm: read_field::<[u8; COMM_LEN]>(ctx, layout.switch_next_comm)
                .unwrap_or([0; COMM_LEN]),
        };
        if OFF_CPU.insert(&tid, &start, 0).is_err() {
            count(counters::OFF_CPU_INSERT_FAILED);
        }
    }

    // Switch-in of a thread we saw leave.
    let Some(next) = read_field::<i32>(ctx, layout.switch_next_pid) else {
        return;
    };
    let next = next as u32;
    if next == 0 {
        return;
    }
    // SAFETY: the value is copied out before the entry is removed.
    let Some(start) = (unsafe { OFF_CPU.get(&next) }).copied() else {
        return;
    };
    let _ = OFF_CPU.remove(&next);
    let Some(mut entry) = SCHED_EVENTS.reserve::<OffCpuRecord>(0) else {
        count(counters::ring_full(RecordKind::OffCpu));
        return;
    };
    entry.write(OffCpuRecord {
        header: RecordHeader {
            kind: RecordKind::OffCpu as u16,
            op: 0,
            cpu: start.cpu,
            ts_ns: start.ts_ns,
            tgid: start.tgid,
            tid: next,
            cgroup_id: start.cgroup_id,
            comm: start.comm,
        },
        duration_ns: now.saturating_sub(start.ts_ns),
        prev_state: start.prev_state,
        reason: start.reason,
        next_tid: start.next_tid,
        next_comm: start.next_comm,
    });
    entry.submit(submit_flags(&SCHED_EVENTS));
}
