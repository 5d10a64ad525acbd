//! `printk/console`: the NVIDIA drivers' kernel log messages, system-wide (a GPU fault is
//! reported by the driver, from whatever context noticed it, not by the process it hit).
//!
//! The kernel calls the tracepoint for every message it stores, so the program looks at a
//! message's first bytes and copies only the NVIDIA drivers' ([`DRIVER_LOG_PREFIXES`]): Xid
//! and SXid reports of GPU and NVSwitch faults, stamped on the same clock as the CUDA calls.

use core::ptr::addr_of_mut;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_kernel_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
};
use ingero_ebpf::{
    DRIVER_LOG_LEN, DRIVER_LOG_PREFIXES, DriverLogRecord, RecordKind, config::ABSENT, counters,
};

use super::{
    context::{config, count, header, now_ns, read_field},
    maps::SCHED_EVENTS,
};

/// Bytes compared against the prefixes: the longest prefix, rounded up.
const HEAD: usize = 16;

#[tracepoint]
pub fn printk_console(ctx: TracePointContext) -> u32 {
    on_message(&ctx);
    0
}

#[inline(always)]
fn on_message(ctx: &TracePointContext) {
    let Some(cfg) = config() else { return };
    let offset = cfg.layout.console_msg;
    if offset == ABSENT {
        return;
    }
    let Some(loc) = read_field::<u32>(ctx, offset) else {
        return;
    };
    // `__data_loc`: the text's offset in the record in the low 16 bits, its length above.
    let at = (loc & 0xffff) as usize;
    // SAFETY: the source is inside the tracepoint's record (offset from its own data_loc
    // word); the helper checks the kernel address and copies into a local value.
    let src = unsafe { (ctx.as_ptr() as *const u8).add(at) };
    // SAFETY: as above.
    let Ok(head) = (unsafe { bpf_probe_read_kernel(src as *const [u8; HEAD]) }) else {
        return;
    };
    if !DRIVER_LOG_PREFIXES.iter().any(|p| starts_with(&head, p)) {
        return;
    }
    let Some(mut entry) = SCHED_EVENTS.reserve::<DriverLogRecord>(0) else {
        count(counters::ring_full(RecordKind::DriverLog));
        return;
    };
    let record = entry.as_mut_ptr();
    // SAFETY: `record` points at the reserved, exclusively owned ring slot of the right size;
    // every field is written before submit, through raw pointers. The string helper bounds
    // the copy by `text` and stops at NUL.
    unsafe {
        let text = &mut *addr_of_mut!((*record).text);
        let len = match bpf_probe_read_kernel_str_bytes(src, text) {
            Ok(t) => t.len() as u32,
            Err(_) => {
                text[0] = 0;
                0
            }
        };
        addr_of_mut!((*record).header).write(header(
            RecordKind::DriverLog as u16,
            0,
            now_ns(),
            bpf_get_current_pid_tgid(),
        ));
        addr_of_mut!((*record).len).write(len);
        // The helper stops at DRIVER_LOG_LEN - 1 bytes and a NUL: a full one may be cut.
        addr_of_mut!((*record).truncated).write(u32::from(len as usize >= DRIVER_LOG_LEN - 1));
    }
    // Rare and wanted at once (a live view shows GPU faults as they happen): wake the agent.
    entry.submit(0);
}

/// Whether `head` begins with `prefix` (a loop the verifier bounds: prefixes are shorter than
/// `HEAD`).
#[inline(always)]
fn starts_with(head: &[u8; HEAD], prefix: &[u8]) -> bool {
    if prefix.len() > HEAD {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if head[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}
