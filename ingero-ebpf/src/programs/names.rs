//! Kernel names into [`NAME_EVENTS`]: a handle of one process and the name it stands for
//! (`__cudaRegisterFunction` at entry; `cuModuleGetFunction`, `cuLibraryGetKernel` at return),
//! or an alias between two handles (`cuKernelGetFunction`, `__cudaGetKernel`).
//!
//! The record carries the first [`NAME_LEN`] bytes; a longer name is marked truncated with its
//! address, and the agent reads the rest from the process (the string lives in the library's
//! read-only data for as long as the library is mapped).

use core::ptr::addr_of_mut;

use aya_ebpf::helpers::{bpf_copy_from_user, bpf_probe_read_user_str_bytes};
use ingero_ebpf::{NAME_LEN, NameRecord, RecordKind, counters, name_flags};

use super::context::{count, header, now_ns, submit_flags};
use super::maps::NAME_EVENTS;

/// Makes the pages of the string at `name_addr` that a record can hold present in the process
/// (a one-byte copy that may fault, per page), so that [`emit_name`]'s non-faulting read finds
/// them: a page of a program's `.rodata` that nothing has touched yet is not mapped until a
/// fault maps it. Sleepable programs only; done before the ring slot is reserved, so a fault
/// that waits on the disk holds up no other record. A page that cannot be made present is left
/// to `emit_name`, which counts the failure.
#[inline(always)]
pub fn fault_in_name(name_addr: u64) {
    let mut byte = 0u8;
    // SAFETY: the helper copies one byte from user memory into `byte`, a valid stack slot;
    // a bad address is an error return, not a fault of this program.
    unsafe {
        bpf_copy_from_user(
            addr_of_mut!(byte).cast(),
            1,
            name_addr as *const core::ffi::c_void,
        )
    };
    // The bytes a record holds end on the next page when the name starts late in its page.
    let next_page = (name_addr | (PAGE_SIZE - 1)) + 1;
    if next_page < name_addr + NAME_LEN as u64 {
        // SAFETY: as above.
        unsafe {
            bpf_copy_from_user(
                addr_of_mut!(byte).cast(),
                1,
                next_page as *const core::ffi::c_void,
            )
        };
    }
}

/// The smallest page size of the hosts CUDA runs on (x86_64, aarch64 with 4 KiB pages): a
/// larger page only makes the second touch land on a page already present.
const PAGE_SIZE: u64 = 4096;

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
