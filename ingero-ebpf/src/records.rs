//! The `#[repr(C)]` records the eBPF programs emit through ring buffers.
//!
//! Every record starts with a [`RecordHeader`] whose `kind` tells the decoder which record
//! follows. Timestamps are CLOCK_MONOTONIC nanoseconds (`bpf_ktime_get_ns`).

/// Length of a kernel task name (`TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;
/// Argument slots captured per CUDA call: six registers plus two stack words.
pub const MAX_ARGS: usize = 8;
/// Bytes of an exec'd file name kept in a [`ProcessRecord`].
pub const FILENAME_LEN: usize = 128;
/// Bytes of a kernel name a [`NameRecord`] carries (with its NUL). Longer names (41 % of
/// libtorch's) are completed by the agent from the process's memory.
pub const NAME_LEN: usize = 256;
/// Bytes of an NVTX message an [`NvtxProbeRecord`] carries (with its NUL; 64 UTF-32 characters
/// of a wide message).
pub const NVTX_MESSAGE_LEN: usize = 256;
/// Bytes of a kernel log message a [`DriverLogRecord`] carries (with its NUL). The NVIDIA
/// driver's longest Xid lines (MMU faults) run to about 230 bytes.
pub const DRIVER_LOG_LEN: usize = 320;
/// How a kernel log message must begin to be an NVIDIA driver message: the GPU driver's
/// (`NVRM: Xid (PCI:…): 79, …`) and the NVSwitch driver's (`nvidia-nvswitch3: SXid …`).
pub const DRIVER_LOG_PREFIXES: [&[u8]; 2] = [b"NVRM:", b"nvidia-nvswitch"];

/// What follows the header. The value also indexes the per-CPU ring buffer drop counters
/// ([`crate::counters`]).
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Cuda = 1,
    OffCpu = 2,
    Exec = 3,
    Exit = 4,
    Fork = 5,
    /// A kernel name for a handle, or an alias between two handles ([`NameRecord`]).
    KernelName = 6,
    /// An NVTX call seen by the fallback uprobes ([`NvtxProbeRecord`]).
    NvtxProbe = 7,
    /// A message of the NVIDIA kernel driver in the kernel log ([`DriverLogRecord`]).
    DriverLog = 8,
}

impl RecordKind {
    pub const ALL: [RecordKind; 8] = [
        RecordKind::Cuda,
        RecordKind::OffCpu,
        RecordKind::Exec,
        RecordKind::Exit,
        RecordKind::Fork,
        RecordKind::KernelName,
        RecordKind::NvtxProbe,
        RecordKind::DriverLog,
    ];

    pub fn from_u16(v: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|k| *k as u16 == v)
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Cuda => "cuda",
            RecordKind::OffCpu => "off_cpu",
            RecordKind::Exec => "exec",
            RecordKind::Exit => "exit",
            RecordKind::Fork => "fork",
            RecordKind::KernelName => "kernel_name",
            RecordKind::NvtxProbe => "nvtx_probe",
            RecordKind::DriverLog => "driver_log",
        }
    }
}

/// Common prefix of every record.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecordHeader {
    /// A [`RecordKind`] value.
    pub kind: u16,
    /// For CUDA records the [`crate::CudaOp`]; zero otherwise.
    pub op: u16,
    /// CPU the record was produced on.
    pub cpu: u32,
    /// CLOCK_MONOTONIC nanoseconds: call entry, switch-out, or the lifecycle moment.
    pub ts_ns: u64,
    /// Thread group id (what user space calls the pid).
    pub tgid: u32,
    /// Kernel thread id.
    pub tid: u32,
    /// cgroup v2 id of the task.
    pub cgroup_id: u64,
    /// Task name, NUL padded.
    pub comm: [u8; COMM_LEN],
}

/// One completed CUDA runtime call (entry paired with return).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CudaRecord {
    pub header: RecordHeader,
    pub duration_ns: u64,
    /// The call's return value (`cudaError_t`), sign-extended.
    pub ret: i64,
    /// Raw argument words; their meaning depends on the op (see `CudaOp`).
    /// For allocations `args[ALLOC_PTR_SLOT]` holds the resolved device pointer at return; for
    /// frees `args[FREE_SIZE_SLOT]` holds the bytes of the live allocation it released.
    pub args: [u64; MAX_ARGS],
    /// What the call wrote through its out-pointer on success (a module, function, graph or
    /// graph exec handle; see [`crate::OpFlags::OUT0`]); zero otherwise.
    pub out: u64,
    /// The traced op this call ran inside of on the same thread (a driver call made by a
    /// runtime call); zero when it is outermost.
    pub parent_op: u16,
    /// Which export fired: an index into the op's symbols ([`crate::CudaOp::symbol`]).
    pub variant: u16,
    /// Traced calls this one is nested in (0: outermost).
    pub depth: u32,
}

/// Slot that receives `*devPtr` after a successful allocation (the unused 7th argument word).
pub const ALLOC_PTR_SLOT: usize = 6;
/// Slot that receives the freed size for `cudaFree`-like calls.
pub const FREE_SIZE_SLOT: usize = 6;

/// Bits of [`NameRecord::flags`].
pub mod name_flags {
    /// `handle` names the same kernel as the handle in `other` (no text).
    pub const ALIAS: u32 = 1;
    /// The text filled the record: the name may go on at `other` in the process's memory.
    pub const TRUNCATED: u32 = 2;
    /// The text could not be read at all.
    pub const UNREADABLE: u32 = 4;
}

/// A kernel's name for a handle of one process: from `__cudaRegisterFunction` (the host
/// function), `cuModuleGetFunction` / `cuLibraryGetKernel` (the returned handle), or an alias
/// (`cuKernelGetFunction`, `__cudaGetKernel`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NameRecord {
    /// `op` is the call that named it.
    pub header: RecordHeader,
    /// The handle named: host function, `CUfunction`, `CUkernel`, `cudaKernel_t`.
    pub handle: u64,
    /// Alias: the handle `handle` stands for. Otherwise the user address of the name.
    pub other: u64,
    /// Bytes of `name` before its NUL.
    pub len: u32,
    /// Bits from [`name_flags`].
    pub flags: u32,
    /// The (mangled) name, NUL terminated.
    pub name: [u8; NAME_LEN],
}

/// Why a thread left the CPU.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffCpuReason {
    /// Still runnable when switched out: involuntary preemption.
    Preempted = 1,
    /// Switched out in a sleeping state: it blocked or slept voluntarily.
    Blocked = 2,
}

impl OffCpuReason {
    /// Every reason, in value order.
    pub const ALL: [OffCpuReason; 2] = [Self::Preempted, Self::Blocked];

    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Preempted),
            2 => Some(Self::Blocked),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Preempted => "preempted",
            Self::Blocked => "blocked",
        }
    }
}

/// One off-CPU interval of a traced thread, emitted when the thread runs again.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OffCpuRecord {
    /// `ts_ns` is the switch-out time; tgid/tid/comm/cgroup are the traced thread's.
    pub header: RecordHeader,
    pub duration_ns: u64,
    /// `prev_state` as the sched_switch tracepoint reported it.
    pub prev_state: i64,
    /// An [`OffCpuReason`] value.
    pub reason: u32,
    /// Thread id that ran instead (the `next` of the switch-out).
    pub next_tid: u32,
    pub next_comm: [u8; COMM_LEN],
}

/// Process flags in [`ProcessRecord::flags`].
pub mod process_flags {
    /// Fork: the new task is a thread of the parent's group (CLONE_THREAD), not a new process.
    pub const THREAD: u32 = 1;
    /// Exit: the whole thread group is gone (the last thread exited).
    pub const GROUP_DEAD: u32 = 2;
    /// Fork: the clone flags were not seen (task_newtask missed), so THREAD is a guess.
    pub const CLONE_FLAGS_UNKNOWN: u32 = 4;
}

/// Exec, exit or fork of a task that belongs to a traced process (or is forked from one).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ProcessRecord {
    /// For fork, the parent; for exit and exec, the task itself.
    pub header: RecordHeader,
    /// Fork: child tid. Exec: the pid before exec (`old_pid`). Exit: zero.
    pub other_pid: u32,
    /// Bits from [`process_flags`].
    pub flags: u32,
    /// Fork: the clone flags from task_newtask.
    pub clone_flags: u64,
    /// Exec: the executed file (truncated, NUL terminated). Fork: the child's comm.
    pub filename: [u8; FILENAME_LEN],
}

/// Bits of [`NvtxProbeRecord::flags`].
pub mod nvtx_flags {
    /// `message` holds UTF-32 code units (a `W` call, or an `Ex` call with a UNICODE message).
    pub const WIDE: u32 = 1;
    /// The message filled the record and may have been cut.
    pub const TRUNCATED: u32 = 2;
    /// The message (or the attributes holding it) could not be read.
    pub const UNREADABLE: u32 = 4;
    /// An `Ex` call whose message is neither ASCII nor UNICODE (a registered string handle,
    /// which needs the tool's own table): no text.
    pub const NOT_TEXT: u32 = 8;
}

/// One NVTX call caught by the fallback uprobes (a process with no ingero injection library):
/// which function (`header.op`, an [`crate::NvtxCall`]), when, on which thread, and its message.
/// No domain, category, color or payload: the fallback reads the message only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NvtxProbeRecord {
    pub header: RecordHeader,
    /// The stack pointer at entry: tells NVTX's lazy-init re-entry (the first call of a
    /// library calls the function again from inside itself, just below on the same stack)
    /// from a call of the program's own.
    pub sp: u64,
    /// Bytes of `message` before its NUL (for a wide message, a multiple of 4 read as is).
    pub len: u32,
    /// Bits from [`nvtx_flags`].
    pub flags: u32,
    /// The message: bytes for `A` and ASCII `Ex`, UTF-32LE units for `W` and UNICODE `Ex`.
    pub message: [u8; NVTX_MESSAGE_LEN],
}

/// A kernel log message of the NVIDIA drivers (one that starts with one of
/// [`DRIVER_LOG_PREFIXES`]), from the `printk:console` tracepoint: Xid and SXid reports of GPU
/// and NVSwitch faults. The header's task is whoever printed it (often an interrupt's or a
/// driver thread's, rarely the faulting process, which the text names).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DriverLogRecord {
    pub header: RecordHeader,
    /// Bytes of `text` before its NUL.
    pub len: u32,
    /// Non-zero when the message filled `text` and may have been cut.
    pub truncated: u32,
    /// The message, NUL terminated.
    pub text: [u8; DRIVER_LOG_LEN],
}

const _: () = assert!(size_of::<RecordHeader>() == 48);
const _: () = assert!(size_of::<DriverLogRecord>() == 48 + 8 + DRIVER_LOG_LEN);
const _: () = assert!(size_of::<NvtxProbeRecord>() == 48 + 16 + NVTX_MESSAGE_LEN);
const _: () = assert!(size_of::<CudaRecord>() == 48 + 16 + 8 * MAX_ARGS + 16);
const _: () = assert!(size_of::<NameRecord>() == 48 + 24 + NAME_LEN);
const _: () = assert!(size_of::<OffCpuRecord>() == 48 + 24 + COMM_LEN);
const _: () = assert!(size_of::<ProcessRecord>() == 48 + 16 + FILENAME_LEN);
const _: () = assert!(ALLOC_PTR_SLOT < MAX_ARGS && FREE_SIZE_SLOT < MAX_ARGS);
