//! Ring buffer bytes to [`Event`]: the one event type everything downstream consumes.
//!
//! Decoding never trusts the bytes: a short or unknown record is an error the caller counts,
//! never a panic.

mod cuda_args;
mod nccl_args;

pub use cuda_args::cuda_args;
use ingero_trace::model::{
    CallDetail, Comm, CudaCall, DriverMessage, Event, OffCpu, ProcessEvent, ProcessOp, Task,
};

use ingero_ebpf::{
    CudaOp, CudaRecord, DRIVER_LOG_LEN, DriverLogRecord, NVTX_MESSAGE_LEN, NameRecord, NvtxCall,
    NvtxProbeRecord, OffCpuReason, OffCpuRecord, ProcessRecord, RecordHeader, RecordKind,
    name_flags, nvtx_flags, process_flags,
};

use crate::nvtx::fallback::ProbedCall;

/// Why a record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than its header")]
    Short(usize),
    #[error("unknown record kind {0}")]
    UnknownKind(u16),
    #[error("record of kind {kind} has {len} bytes, expected {expected}")]
    WrongSize {
        kind: u16,
        len: usize,
        expected: usize,
    },
    #[error("unknown CUDA op {0}")]
    UnknownOp(u16),
    #[error("unknown off-CPU reason {0}")]
    UnknownReason(u32),
}

mod sealed {
    /// Keeps [`super::RingRecord`] to the types this module vouches for.
    pub trait Sealed {}
}

/// A record as the eBPF programs write it: `repr(C)` plain data of integers and byte arrays,
/// with no padding (each size is pinned to the sum of its fields by the assertions in
/// `ingero_ebpf::records`), so every bit pattern is a valid value and every byte is
/// initialised.
///
/// # Safety
/// Implemented (sealed) only for the records below, which are such types.
pub unsafe trait RingRecord: Copy + sealed::Sealed {}

macro_rules! ring_records {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a `repr(C)` record of integers and byte arrays whose size the eBPF crate
        // asserts equals the sum of its fields' sizes (no padding).
        unsafe impl RingRecord for $t {}
    )*};
}
ring_records!(
    RecordHeader,
    CudaRecord,
    OffCpuRecord,
    ProcessRecord,
    NameRecord,
    NvtxProbeRecord,
    DriverLogRecord
);

/// What a [`NameRecord`] says about one handle of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameFact {
    /// The process (thread group id).
    pub pid: u32,
    /// The call that said it.
    pub op: CudaOp,
    /// The handle named.
    pub handle: u64,
    /// What it is named by.
    pub what: NameWhat,
}

/// A handle's name, or the handle it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameWhat {
    /// The name's bytes as read in the kernel; `truncated` when they may go on at `addr`.
    Text {
        bytes: Vec<u8>,
        addr: u64,
        truncated: bool,
    },
    /// The name could not be read in the kernel (its page was not resident, and a uprobe
    /// cannot fault it in); `addr` is where it is, for reading it from the process.
    Unreadable { addr: u64 },
    /// The handle names whatever this other handle names.
    Alias(u64),
}

/// Decodes a kernel-name record from the names ring.
pub fn decode_name(bytes: &[u8]) -> Result<NameFact, DecodeError> {
    let r: NameRecord = read_kind(bytes, RecordKind::KernelName)?;
    let op = CudaOp::from_u16(r.header.op).ok_or(DecodeError::UnknownOp(r.header.op))?;
    let what = if r.flags & name_flags::ALIAS != 0 {
        NameWhat::Alias(r.other)
    } else if r.flags & name_flags::UNREADABLE != 0 {
        NameWhat::Unreadable { addr: r.other }
    } else {
        let len = (r.len as usize).min(r.name.len());
        let text = &r.name[..len];
        let end = text.iter().position(|b| *b == 0).unwrap_or(len);
        NameWhat::Text {
            bytes: text[..end].to_vec(),
            addr: r.other,
            truncated: r.flags & name_flags::TRUNCATED != 0,
        }
    };
    Ok(NameFact {
        pid: r.header.tgid,
        op,
        handle: r.handle,
        what,
    })
}

/// The kind of a ring record, without decoding it (the pipeline routes NVTX fallback records
/// and driver messages away from [`decode`]).
pub fn kind_of(bytes: &[u8]) -> Option<RecordKind> {
    let kind = u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]);
    RecordKind::from_u16(kind)
}

/// Decodes an NVTX fallback record: the call, its thread and its message (bytes read as UTF-8
/// with replacement, UTF-32 units up to the first NUL unit).
pub fn decode_nvtx_probe(bytes: &[u8]) -> Result<ProbedCall, DecodeError> {
    let r: NvtxProbeRecord = read_kind(bytes, RecordKind::NvtxProbe)?;
    let call = NvtxCall::from_u16(r.header.op).ok_or(DecodeError::UnknownOp(r.header.op))?;
    let len = (r.len as usize).min(NVTX_MESSAGE_LEN);
    let text = &r.message[..len];
    let mut truncated = r.flags & nvtx_flags::TRUNCATED != 0;
    let message = if r.flags & nvtx_flags::WIDE != 0 {
        let mut s = String::new();
        let mut ended = false;
        for unit in text.chunks_exact(4) {
            let v = u32::from_le_bytes([unit[0], unit[1], unit[2], unit[3]]);
            if v == 0 {
                ended = true;
                break;
            }
            s.push(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER));
        }
        // The whole buffer was read and held no NUL: the string goes on.
        truncated |= !ended && len == NVTX_MESSAGE_LEN;
        s
    } else {
        let end = text.iter().position(|b| *b == 0).unwrap_or(len);
        String::from_utf8_lossy(&text[..end]).into_owned()
    };
    let comm_end = r
        .header
        .comm
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(r.header.comm.len());
    Ok(ProbedCall {
        call,
        ts_ns: r.header.ts_ns,
        sp: r.sp,
        pid: r.header.tgid,
        tid: r.header.tid,
        comm: String::from_utf8_lossy(&r.header.comm[..comm_end]).into_owned(),
        message,
        truncated,
    })
}

/// Decodes an NVIDIA driver message (read as UTF-8 with replacement: the kernel log is bytes).
pub fn decode_driver_log(bytes: &[u8]) -> Result<DriverMessage, DecodeError> {
    let r: DriverLogRecord = read_kind(bytes, RecordKind::DriverLog)?;
    let len = (r.len as usize).min(DRIVER_LOG_LEN);
    let text = &r.text[..len];
    let end = text.iter().position(|b| *b == 0).unwrap_or(len);
    Ok(DriverMessage {
        ts_ns: r.header.ts_ns,
        // The kernel ends a message with a newline only when the printer did.
        text: String::from_utf8_lossy(&text[..end]).trim_end().to_owned(),
        truncated: r.truncated != 0,
    })
}

/// The header of a record at least a header long.
fn read_header(bytes: &[u8]) -> Result<RecordHeader, DecodeError> {
    if bytes.len() < size_of::<RecordHeader>() {
        return Err(DecodeError::Short(bytes.len()));
    }
    read(bytes, 0)
}

/// A record that must be of `kind` (the decoders of the records routed away from [`decode`]).
fn read_kind<T: RingRecord>(bytes: &[u8], kind: RecordKind) -> Result<T, DecodeError> {
    let header = read_header(bytes)?;
    if header.kind != kind as u16 {
        return Err(DecodeError::UnknownKind(header.kind));
    }
    read(bytes, header.kind)
}

fn read<T: RingRecord>(bytes: &[u8], kind: u16) -> Result<T, DecodeError> {
    let expected = size_of::<T>();
    if bytes.len() < expected {
        return Err(DecodeError::WrongSize {
            kind,
            len: bytes.len(),
            expected,
        });
    }
    // SAFETY: the length is checked above and `T: RingRecord` is plain data for which any bit
    // pattern is valid; the read is unaligned-safe.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn task(h: &RecordHeader) -> Task {
    Task {
        pid: h.tgid,
        tid: h.tid,
        comm: Comm::new(h.comm),
        cgroup_id: h.cgroup_id,
        cpu: h.cpu,
    }
}

/// Decodes one ring buffer record.
pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
    let header = read_header(bytes)?;
    let kind = RecordKind::from_u16(header.kind).ok_or(DecodeError::UnknownKind(header.kind))?;
    match kind {
        RecordKind::Cuda => {
            let r: CudaRecord = read(bytes, header.kind)?;
            let op = CudaOp::from_u16(r.header.op).ok_or(DecodeError::UnknownOp(r.header.op))?;
            let ret = r.ret as i32;
            let legacy = op.is_legacy(r.variant);
            let symbol = op.symbol(r.variant).filter(|s| *s != op.name() || legacy);
            Ok(Event::Cuda(CudaCall {
                detail: CallDetail {
                    symbol,
                    parent: CudaOp::from_u16(r.parent_op),
                    kernel: None,
                },
                ts_ns: r.header.ts_ns,
                duration_ns: r.duration_ns,
                task: task(&r.header),
                op,
                ret,
                args: cuda_args(op, &r.args, ret, r.out, legacy),
            }))
        }
        RecordKind::OffCpu => {
            let r: OffCpuRecord = read(bytes, header.kind)?;
            let reason =
                OffCpuReason::from_u32(r.reason).ok_or(DecodeError::UnknownReason(r.reason))?;
            Ok(Event::OffCpu(OffCpu {
                ts_ns: r.header.ts_ns,
                duration_ns: r.duration_ns,
                task: task(&r.header),
                reason,
                prev_state: r.prev_state,
                next_tid: r.next_tid,
                next_comm: Comm::new(r.next_comm),
            }))
        }
        RecordKind::KernelName | RecordKind::NvtxProbe | RecordKind::DriverLog => {
            Err(DecodeError::UnknownKind(header.kind))
        }
        RecordKind::Exec | RecordKind::Exit | RecordKind::Fork => {
            let r: ProcessRecord = read(bytes, header.kind)?;
            let thread = r.flags & process_flags::THREAD != 0;
            let op = match kind {
                RecordKind::Exec => ProcessOp::Exec,
                RecordKind::Exit if r.flags & process_flags::GROUP_DEAD != 0 => ProcessOp::Exit,
                RecordKind::Exit => ProcessOp::ThreadExit,
                _ if thread => ProcessOp::ThreadStart,
                _ => ProcessOp::Fork,
            };
            let text_end = r
                .filename
                .iter()
                .position(|b| *b == 0)
                .unwrap_or(r.filename.len());
            Ok(Event::Process(ProcessEvent {
                ts_ns: r.header.ts_ns,
                task: task(&r.header),
                op,
                other_pid: r.other_pid,
                clone_flags_known: r.flags & process_flags::CLONE_FLAGS_UNKNOWN == 0,
                text: String::from_utf8_lossy(&r.filename[..text_end]).into_owned(),
            }))
        }
    }
}

/// Views a record as bytes (tests and the capture-replay benchmark build records this way).
pub fn record_bytes<T: RingRecord>(record: &T) -> &[u8] {
    // SAFETY: `T: RingRecord` has no padding, so all `size_of::<T>()` bytes behind the
    // reference are initialised and may be read as `u8` for the reference's lifetime.
    unsafe { std::slice::from_raw_parts((record as *const T).cast::<u8>(), size_of::<T>()) }
}

#[cfg(test)]
mod tests;
