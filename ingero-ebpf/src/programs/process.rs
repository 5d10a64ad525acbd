//! Process lifecycle of traced processes: exec, exit (thread versus whole group) and fork
//! (new process versus new thread, told apart by the clone flags seen at task_newtask).

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
};
use ingero_ebpf::{
    FILENAME_LEN, ProcessRecord, RecordKind, TracepointLayout, config::ABSENT, counters,
    process_flags,
};

use super::{
    context::{config, count, header, is_tracked, now_ns, read_field, track},
    maps::{CLONE_FLAGS, SCHED_EVENTS, TRACKED},
};

const CLONE_THREAD: u64 = 0x0001_0000;

/// Copies a string field, inline (`char[N]`) or `__data_loc`, into `dst`.
#[inline(always)]
fn read_str(ctx: &TracePointContext, offset: u32, data_loc: bool, dst: &mut [u8; FILENAME_LEN]) {
    if offset == ABSENT {
        return;
    }
    let field = if data_loc {
        let Some(loc) = read_field::<u32>(ctx, offset) else {
            return;
        };
        (loc & 0xffff) as usize
    } else {
        offset as usize
    };
    // SAFETY: the helper bounds the copy by `dst` and stops at NUL; the source is the
    // tracepoint's record.
    let _ = unsafe { bpf_probe_read_kernel_str_bytes((ctx.as_ptr() as *const u8).add(field), dst) };
}

#[inline(always)]
fn emit(record: ProcessRecord) {
    let kind = record.header.kind;
    let Some(mut entry) = SCHED_EVENTS.reserve::<ProcessRecord>(0) else {
        let slot = match kind {
            k if k == RecordKind::Exec as u16 => counters::ring_full(RecordKind::Exec),
            k if k == RecordKind::Exit as u16 => counters::ring_full(RecordKind::Exit),
            _ => counters::ring_full(RecordKind::Fork),
        };
        count(slot);
        return;
    };
    entry.write(record);
    // Lifecycle events are rare: the default (adaptive) wakeup keeps them prompt.
    entry.submit(0);
}

fn layout() -> Option<&'static TracepointLayout> {
    config().map(|c| &c.layout)
}

#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_tracked((pid_tgid >> 32) as u32) {
        return 0;
    }
    let Some(layout) = layout() else { return 0 };
    let mut record = ProcessRecord {
        header: header(RecordKind::Exec as u16, 0, now_ns(), pid_tgid),
        other_pid: read_field::<i32>(&ctx, layout.exec_old_pid).unwrap_or(0) as u32,
        flags: 0,
        clone_flags: 0,
        filename: [0; FILENAME_LEN],
    };
    read_str(
        &ctx,
        layout.exec_filename,
        layout.exec_filename_is_data_loc != 0,
        &mut record.filename,
    );
    emit(record);
    0
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_tracked(tgid) {
        return 0;
    }
    let Some(layout) = layout() else { return 0 };
    let group_dead = match read_field::<u8>(&ctx, layout.exit_group_dead) {
        Some(v) => v != 0,
        // Kernels before `group_dead` existed: the leader's exit stands for the process.
        None => pid_tgid as u32 == tgid,
    };
    let record = ProcessRecord {
        header: header(RecordKind::Exit as u16, 0, now_ns(), pid_tgid),
        other_pid: 0,
        flags: if group_dead {
            process_flags::GROUP_DEAD
        } else {
            0
        },
        clone_flags: 0,
        filename: [0; FILENAME_LEN],
    };
    emit(record);
    if group_dead {
        let _ = TRACKED.remove(&tgid);
    }
    0
}

#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_tracked((pid_tgid >> 32) as u32) {
        return 0;
    }
    let Some(layout) = layout() else { return 0 };
    let (Some(child), Some(flags)) = (
        read_field::<i32>(&ctx, layout.newtask_pid),
        read_field::<u64>(&ctx, layout.newtask_clone_flags),
    ) else {
        return 0;
    };
    let _ = CLONE_FLAGS.insert(&(child as u32), &flags, 0);
    0
}

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_tracked((pid_tgid >> 32) as u32) {
        return 0;
    }
    let Some(layout) = layout() else { return 0 };
    let Some(child) = read_field::<i32>(&ctx, layout.fork_child_pid) else {
        return 0;
    };
    let child = child as u32;
    // SAFETY: the value is copied out before the entry is removed.
    let clone_flags = unsafe { CLONE_FLAGS.get(&child) }.copied();
    let _ = CLONE_FLAGS.remove(&child);
    let mut flags = 0;
    let is_thread = match clone_flags {
        Some(f) => f & CLONE_THREAD != 0,
        None => {
            flags |= process_flags::CLONE_FLAGS_UNKNOWN;
            false
        }
    };
    if is_thread {
        flags |= process_flags::THREAD;
    } else {
        // A forked child of a traced process is traced too (data loader workers, spawned ranks).
        track(child);
    }
    let mut record = ProcessRecord {
        header: header(RecordKind::Fork as u16, 0, now_ns(), pid_tgid),
        other_pid: child,
        flags,
        clone_flags: clone_flags.unwrap_or(0),
        filename: [0; FILENAME_LEN],
    };
    read_str(
        &ctx,
        layout.fork_child_comm,
        layout.fork_child_comm_is_data_loc != 0,
        &mut record.filename,
    );
    emit(record);
    0
}
