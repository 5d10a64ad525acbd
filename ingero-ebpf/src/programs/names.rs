//! Kernel names into [`NAME_EVENTS`]: a handle of one process and the name it stands for
//! (`__cudaRegisterFunction` at entry; `cuModuleGetFunction`, `cuLibraryGetKernel` at return),
//! or an alias between two handles (`cuKernelGetFunction`, `__cudaGetKernel`).
//!
//! The record carries the first [`NAME_LEN`] bytes; a longer name is marked truncated with its
//! address, and the agent reads the rest from the process (the string lives in the library's
//! read-only data for as long as the library is mapped).

use core::ptr::addr_of_mut;

use aya_ebpf::helpers::bpf_probe_read_user_str_bytes;
use ingero_ebpf::{NAME_LEN, NameRecord, RecordKind, counters, name_flags};

use super::context::{count, header, now_ns, submit_flags};
use super::maps::NAME_EVENTS;

/// Emits `handle` → the NUL-terminated string at `name_addr`.
#[inline(always)]
pub fn emit_name(op: u16, pid_tgid: u64, handle: u64, name_addr: u64) {
    let Some(mut entry) = NAME_EVENTS.reserve::<NameRecord>(0) else {
        count(counters::ring_full(RecordKind::KernelName));
        return;
    };
    let record = entry.as_mut_ptr();
    // SAFETY: `record` points at the reserved, exclusively owned ring slot of the right size;
    // every field is written before submit, through raw pointers (nothing reads the slot
    // before it is initialised).
    let (len, flags) = unsafe {
        let name = &mut *addr_of_mut!((*record).name);
        match bpf_probe_read_user_str_bytes(name_addr as *const u8, name) {
            Ok(text) => {
                let len = text.len() as u32;
                // The helper stops at NAME_LEN - 1 bytes and a NUL: a full record may be cut.
                let cut = len as usize >= NAME_LEN - 1;
                (len, if cut { name_flags::TRUNCATED } else { 0 })
            }
            Err(_) => {
                count(counters::NAME_READ_FAILED);
                name[0] = 0;
                (0, name_flags::UNREADABLE)
            }
        }
    };
    // SAFETY: `record` is the slot reserved above, owned until submit.
    unsafe { head(record, op, pid_tgid, handle, name_addr, len, flags) };
    entry.submit(submit_flags(&NAME_EVENTS));
}

/// Emits `handle` → whatever `target` names.
#[inline(always)]
pub fn emit_alias(op: u16, pid_tgid: u64, handle: u64, target: u64) {
    let Some(mut entry) = NAME_EVENTS.reserve::<NameRecord>(0) else {
        count(counters::ring_full(RecordKind::KernelName));
        return;
    };
    let record = entry.as_mut_ptr();
    // SAFETY: `record` is the slot reserved above, owned until submit. The name is never read
    // for an alias (len 0), but its first byte is zeroed so the record holds no stale ring
    // data the agent could show.
    unsafe {
        head(record, op, pid_tgid, handle, target, 0, name_flags::ALIAS);
        (*record).name[0] = 0;
    }
    entry.submit(submit_flags(&NAME_EVENTS));
}

/// Writes every field of a reserved record but its name.
///
/// # Safety
/// `record` must point at a reserved ring slot of a [`NameRecord`] that nothing else reads or
/// writes until it is submitted.
#[inline(always)]
unsafe fn head(
    record: *mut NameRecord,
    op: u16,
    pid_tgid: u64,
    handle: u64,
    other: u64,
    len: u32,
    flags: u32,
) {
    // SAFETY: the caller guarantees an exclusively owned slot of the right size; the fields
    // are written through raw pointers, before submit.
    unsafe {
        addr_of_mut!((*record).header).write(header(
            RecordKind::KernelName as u16,
            op,
            now_ns(),
            pid_tgid,
        ));
        addr_of_mut!((*record).handle).write(handle);
        addr_of_mut!((*record).other).write(other);
        addr_of_mut!((*record).len).write(len);
        addr_of_mut!((*record).flags).write(flags);
    }
}
