//! The NVTX fallback: one uprobe program for every probed NVTX entry point (the exports of
//! `libnvToolsExt.so.1` and `libnvtx3interop.so.1`, torch's local copies in
//! `libtorch_python.so`), for processes that run without ingero's injection library. The
//! attach cookie is the [`NvtxCall`]; the program reads the call's message and submits an
//! [`NvtxProbeRecord`]. No return probe: without a tool push and pop return -2 and start
//! returns 0, so a return value would say nothing.
//!
//! The records go on `SCHED_EVENTS`, the ring of the process lifecycle records, so a process's
//! exit is always read after its last NVTX call and user space can close the ranges it left
//! open at the right moment. NVTX calls are annotations (per step, per layer), far rarer than
//! CUDA calls; a record is 320 bytes.

use core::ptr::addr_of_mut;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_attach_cookie, bpf_get_current_pid_tgid, bpf_probe_read_user},
    helpers::{bpf_probe_read_user_str_bytes, generated},
    macros::uprobe,
    programs::ProbeContext,
};
use ingero_ebpf::{
    NVTX_MESSAGE_LEN, NvtxCall, NvtxProbeRecord, RecordKind, counters,
    nvtx_calls::{MessageAt, attributes, message_type},
    nvtx_flags,
};

use super::{
    context::{admitted, count, header, now_ns, submit_flags},
    maps::SCHED_EVENTS,
};

const PAGE: u64 = 4096;

#[uprobe]
pub fn nvtx_enter(ctx: ProbeContext) -> u32 {
    enter(&ctx);
    0
}

#[inline(always)]
fn enter(ctx: &ProbeContext) {
    let ts = now_ns();
    let pid_tgid = bpf_get_current_pid_tgid();
    if !admitted((pid_tgid >> 32) as u32) {
        return;
    }
    // SAFETY: the context is a valid uprobe context.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let Some(call) = NvtxCall::from_u16(cookie as u16) else {
        return;
    };
    // SAFETY: `regs` is the probe's saved register set.
    let (arg, sp) = unsafe { ((*ctx.regs).rdi, (*ctx.regs).rsp) };
    let Some(mut entry) = SCHED_EVENTS.reserve::<NvtxProbeRecord>(0) else {
        count(counters::ring_full(RecordKind::NvtxProbe));
        return;
    };
    let record = entry.as_mut_ptr();
    // SAFETY: `record` points at the reserved, exclusively owned ring slot of the right size;
    // every field is written before submit, through raw pointers.
    unsafe {
        let message = &mut *addr_of_mut!((*record).message);
        message[0] = 0;
        let (len, flags) = match call.message_at() {
            MessageAt::None => (0, 0),
            MessageAt::Ascii => read_ascii(arg, message),
            MessageAt::Wide => read_wide(arg, message),
            MessageAt::Attributes => read_attributes(arg, message),
        };
        if flags & nvtx_flags::UNREADABLE != 0 {
            count(counters::NVTX_READ_FAILED);
        }
        addr_of_mut!((*record).header).write(header(
            RecordKind::NvtxProbe as u16,
            call as u16,
            ts,
            pid_tgid,
        ));
        addr_of_mut!((*record).sp).write(sp);
        addr_of_mut!((*record).len).write(len);
        addr_of_mut!((*record).flags).write(flags);
    }
    entry.submit(submit_flags(&SCHED_EVENTS));
}

/// A NUL-terminated byte string: its length and flags.
#[inline(always)]
fn read_ascii(addr: u64, dst: &mut [u8; NVTX_MESSAGE_LEN]) -> (u32, u32) {
    if addr == 0 {
        return (0, 0);
    }
    // SAFETY: the helper bounds the copy by `dst`, stops at NUL and checks the user address.
    match unsafe { bpf_probe_read_user_str_bytes(addr as *const u8, dst) } {
        Ok(text) => {
            let len = text.len() as u32;
            // The helper stops at NVTX_MESSAGE_LEN - 1 bytes and a NUL: a full one may be cut.
            let cut = len as usize >= NVTX_MESSAGE_LEN - 1;
            (len, if cut { nvtx_flags::TRUNCATED } else { 0 })
        }
        Err(_) => {
            dst[0] = 0;
            (0, nvtx_flags::UNREADABLE)
        }
    }
}

/// A `wchar_t` string (UTF-32): there is no wide-string helper, so the whole buffer is read;
/// when that crosses into an unmapped page, only up to the end of the string's page (a short
/// message near a page end). User space looks for the NUL unit.
#[inline(always)]
fn read_wide(addr: u64, dst: &mut [u8; NVTX_MESSAGE_LEN]) -> (u32, u32) {
    if addr == 0 {
        return (0, nvtx_flags::WIDE);
    }
    let src = addr as *const core::ffi::c_void;
    let dst_ptr = dst.as_mut_ptr() as *mut core::ffi::c_void;
    // SAFETY: the helper checks the user address and writes at most the size given, which is
    // never more than `dst` holds.
    if unsafe { generated::bpf_probe_read_user(dst_ptr, NVTX_MESSAGE_LEN as u32, src) } == 0 {
        return (NVTX_MESSAGE_LEN as u32, nvtx_flags::WIDE);
    }
    let to_page_end = PAGE - (addr & (PAGE - 1));
    let n = if to_page_end > NVTX_MESSAGE_LEN as u64 {
        NVTX_MESSAGE_LEN as u32
    } else {
        to_page_end as u32
    };
    // SAFETY: as above; `n` is at most NVTX_MESSAGE_LEN.
    if unsafe { generated::bpf_probe_read_user(dst_ptr, n, src) } == 0 {
        return (n, nvtx_flags::WIDE);
    }
    dst[0] = 0;
    (0, nvtx_flags::WIDE | nvtx_flags::UNREADABLE)
}

/// An `nvtxEventAttributes_t*`: the message by its type (ASCII or UNICODE; a registered
/// handle gives no text).
#[inline(always)]
fn read_attributes(addr: u64, dst: &mut [u8; NVTX_MESSAGE_LEN]) -> (u32, u32) {
    if addr == 0 {
        return (0, nvtx_flags::NOT_TEXT);
    }
    let at = |offset: usize| addr + offset as u64;
    // SAFETY (the three reads): the checked helper copies user memory into a local value.
    let size = unsafe { bpf_probe_read_user(at(attributes::SIZE) as *const u16) };
    // SAFETY: as above.
    let kind = unsafe { bpf_probe_read_user(at(attributes::MESSAGE_TYPE) as *const i32) };
    // SAFETY: as above.
    let text = unsafe { bpf_probe_read_user(at(attributes::MESSAGE) as *const u64) };
    let (Ok(size), Ok(kind), Ok(text)) = (size, kind, text) else {
        return (0, nvtx_flags::UNREADABLE);
    };
    if size < attributes::V2_SIZE {
        return (0, nvtx_flags::NOT_TEXT);
    }
    match kind {
        message_type::ASCII => read_ascii(text, dst),
        message_type::UNICODE => read_wide(text, dst),
        _ => (0, nvtx_flags::NOT_TEXT),
    }
}
