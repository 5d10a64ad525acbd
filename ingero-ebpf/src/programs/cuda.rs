//! CUDA runtime and driver uprobes: one entry and one return program shared by every attached
//! symbol.
//!
//! The attach cookie says which op and which export fired, and what extra work the call needs.
//! Entry pushes a frame on the thread's small stack (so nested traced calls pair correctly: a
//! `cudaMalloc` that enters `cuMemAlloc_v2` yields two records, the inner one naming its
//! parent); return pops it and emits a [`CudaRecord`], and for the calls that name kernels a
//! [`ingero_ebpf::NameRecord`] first (so the agent knows a name before any launch that uses it).

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_attach_cookie, bpf_get_current_pid_tgid, bpf_probe_read_user},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use ingero_ebpf::{
    ALLOC_PTR_SLOT, CudaRecord, FREE_SIZE_SLOT, OpFlags, RecordKind, counters,
    cuda_ops::{cookie_variant, split_cookie},
};

use super::{
    context::{admitted, config, count, header, now_ns, submit_flags},
    cuda_args,
    maps::{
        ALLOCS, AllocKey, CUDA_EVENTS, FRAMES_TEMPLATE, MAX_DEPTH, THREAD_FRAMES, ThreadFrames,
    },
    names::{emit_alias, emit_name, fault_in_name},
};

#[uprobe]
pub fn cuda_enter(ctx: ProbeContext) -> u32 {
    enter(&ctx);
    0
}

#[uretprobe]
pub fn cuda_return(ctx: RetProbeContext) -> u32 {
    leave(&ctx);
    0
}

/// `__cudaRegisterFunction`, where the kernel is at hand: sleepable, so that a name on a page
/// the process has not touched yet (a program's `.rodata` while its constructors register its
/// kernels) is faulted in and read here rather than lost with a short program. Where the kernel
/// refuses sleepable uprobes, [`cuda_enter`] takes the registrations and such a name is read by
/// the agent later, while the process lives.
#[uprobe(sleepable)]
pub fn cuda_register(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if admitted((pid_tgid >> 32) as u32) {
        register(&ctx, pid_tgid, true);
    }
    0
}

/// Emits the name a registration gives its host function; `may_fault` in a sleepable program.
#[inline(always)]
fn register(ctx: &ProbeContext, pid_tgid: u64, may_fault: bool) {
    // SAFETY: the context is a valid uprobe context.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let (op, _) = split_cookie(cookie);
    // __cudaRegisterFunction(handle, hostFun, deviceFun, deviceName, …): no return probe.
    // SAFETY: `regs` is the probe's saved register set.
    let regs = unsafe { &*ctx.regs };
    if may_fault {
        fault_in_name(regs.rcx);
    }
    emit_name(op, pid_tgid, regs.rsi, regs.rcx);
}

#[inline(always)]
fn frames_of(pid_tgid: u64) -> Option<*mut ThreadFrames> {
    if let Some(p) = THREAD_FRAMES.get_ptr_mut(&pid_tgid) {
        return Some(p);
    }
    let template = FRAMES_TEMPLATE.get_ptr_mut(0)?;
    // SAFETY: the per-CPU template is only touched by this program on this CPU; its frames are
    // never read before being written, so only `depth` and `current` need resetting.
    unsafe {
        (*template).depth = 0;
        (*template).current = 0;
    }
    if THREAD_FRAMES
        // SAFETY: `template` points at a live map value of the right type.
        .insert(&pid_tgid, unsafe { &*template }, 0)
        .is_err()
    {
        count(counters::FRAMES_UNAVAILABLE);
        return None;
    }
    THREAD_FRAMES.get_ptr_mut(&pid_tgid)
}

#[inline(always)]
fn enter(ctx: &ProbeContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !admitted(tgid) {
        return;
    }
    // SAFETY: the context is a valid uprobe context.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let (_, flags) = split_cookie(cookie);
    if flags.contains(OpFlags::REGISTER) {
        register(ctx, pid_tgid, false);
        return;
    }
    let Some(frames) = frames_of(pid_tgid) else {
        return;
    };
    // SAFETY: `frames` points at this thread's map value; only this thread touches it.
    let frames = unsafe { &mut *frames };
    let depth = frames.depth;
    if depth >= MAX_DEPTH {
        frames.depth = depth + 1;
        count(counters::NESTING_OVERFLOW);
        return;
    }
    let parent_cookie = if depth == 0 { 0 } else { frames.current };
    frames.current = cookie;
    let frame = &mut frames.frames[depth as usize];
    frame.cookie = cookie;
    frame.parent_cookie = parent_cookie;
    let mut args = cuda_args::read(ctx, flags);
    if flags.contains(OpFlags::FREE) {
        let key = AllocKey {
            tgid,
            _pad: 0,
            ptr: args[0],
        };
        // SAFETY: the value is copied out immediately.
        args[FREE_SIZE_SLOT] = unsafe { ALLOCS.get(&key) }.copied().unwrap_or(0);
    }
    frame.args = args;
    frames.depth = depth + 1;
    // Stamped last so the probe's own work is not counted in the call's duration.
    frame.ts_ns = now_ns();
}

#[inline(always)]
fn leave(ctx: &RetProbeContext) {
    if config().is_none() {
        return;
    }
    let now = now_ns();
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(frames) = THREAD_FRAMES.get_ptr_mut(&pid_tgid) else {
        return;
    };
    // SAFETY: this thread's map value; only this thread touches it.
    let frames = unsafe { &mut *frames };
    if frames.depth == 0 {
        return;
    }
    let depth = frames.depth - 1;
    frames.depth = depth;
    if depth >= MAX_DEPTH {
        return;
    }
    let frame = frames.frames[depth as usize];
    frames.current = frame.parent_cookie;
    let parent_op = split_cookie(frame.parent_cookie).0;
    let tgid = (pid_tgid >> 32) as u32;
    let (op, flags) = split_cookie(frame.cookie);
    // cudaError_t and CUresult are 32-bit enums: only eax is meaningful.
    let ret = ctx.ret::<u64>() as u32 as i32 as i64;
    let mut args = frame.args;
    if ret == 0 && flags.contains(OpFlags::ALLOC) {
        // SAFETY: reads user memory through the checked helper.
        match unsafe { bpf_probe_read_user(args[0] as *const u64) } {
            Ok(ptr) => {
                args[ALLOC_PTR_SLOT] = ptr;
                let key = AllocKey { tgid, _pad: 0, ptr };
                let _ = ALLOCS.insert(&key, &args[1], 0);
            }
            Err(_) => count(counters::ALLOC_READ_FAILED),
        }
    }
    if ret == 0 && flags.contains(OpFlags::FREE) && args[0] != 0 {
        let key = AllocKey {
            tgid,
            _pad: 0,
            ptr: args[0],
        };
        if args[FREE_SIZE_SLOT] == 0 {
            count(counters::FREE_UNKNOWN);
        }
        let _ = ALLOCS.remove(&key);
    }
    let mut out = 0;
    let out_slot = if flags.contains(OpFlags::OUT0) {
        Some(args[0])
    } else if flags.contains(OpFlags::OUT1) {
        Some(args[1])
    } else if flags.contains(OpFlags::OUT3) {
        Some(args[3])
    } else {
        None
    };
    if let (0, Some(addr)) = (ret, out_slot) {
        // SAFETY: reads user memory through the checked helper.
        match unsafe { bpf_probe_read_user(addr as *const u64) } {
            Ok(handle) => out = handle,
            Err(_) => count(counters::OUT_READ_FAILED),
        }
    }
    if out != 0 {
        // Before the call record, so the agent holds the name when the record arrives.
        if flags.contains(OpFlags::NAME_ARG2) {
            emit_name(op, pid_tgid, out, args[2]);
        } else if flags.contains(OpFlags::ALIAS_ARG1) {
            emit_alias(op, pid_tgid, out, args[1]);
        }
    }
    if flags.contains(OpFlags::NO_EVENT) {
        return;
    }
    let Some(mut entry) = CUDA_EVENTS.reserve::<CudaRecord>(0) else {
        count(counters::ring_full(RecordKind::Cuda));
        return;
    };
    entry.write(CudaRecord {
        header: header(RecordKind::Cuda as u16, op, frame.ts_ns, pid_tgid),
        duration_ns: now.saturating_sub(frame.ts_ns),
        ret,
        args,
        out,
        parent_op,
        variant: cookie_variant(frame.cookie),
        depth,
    });
    entry.submit(submit_flags(&CUDA_EVENTS));
}

/// Programs that do nothing: the floor a uprobe/uretprobe pair costs on this kernel, measured
/// by `cargo xtask bench probes` to put ingero's own cost in proportion.
#[uprobe]
pub fn bench_noop_enter(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn bench_noop_return(_ctx: RetProbeContext) -> u32 {
    0
}
