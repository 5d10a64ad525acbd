//! The typed records the reader yields. CUDA calls, off-CPU intervals and spans come out when
//! their slice ends (so with their duration); instants and counters when they occur.

use std::sync::Arc;

use ingero_ebpf::{CudaOp, OffCpuReason};

use super::CallDetail;
use super::{FinalStats, SessionInfo};
use crate::model::{AnnotationRecord, DriverMessage, NvtxRecord};
use crate::model::{CudaArgs, CudaCall, OffCpu, ProcessOp};

/// The thread a record happened on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRef {
    /// Thread group id (the process).
    pub pid: u32,
    /// Kernel thread id.
    pub tid: u32,
    /// The thread's name as recorded in its descriptor, shared with the reader's track table
    /// (records of one thread do not each copy it).
    pub name: Arc<str>,
}

/// One CUDA runtime call.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaCallRecord {
    /// Entry time (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Nanoseconds the slice lasts in the file: the call's duration unless the writer clamped
    /// it (see `clamped_from_ns` and [`Self::real_duration_ns`]).
    pub duration_ns: u64,
    /// The calling thread.
    pub thread: ThreadRef,
    /// The CUDA runtime function.
    pub op: CudaOp,
    /// `cudaError_t` (0: success).
    pub ret: i32,
    /// The arguments, named per op.
    pub args: CudaArgs,
    /// The export that fired, the enclosing traced call, the kernel launched.
    pub detail: CallDetail,
    /// Set when the writer shortened the slice to keep its track nested: the real duration.
    pub clamped_from_ns: Option<u64>,
    /// The CPU the call returned on.
    pub cpu: u32,
    /// The thread's cgroup v2 id.
    pub cgroup_id: u64,
}

impl CudaCallRecord {
    /// What a reader yields for the call `c` of `thread` once written, its slice lasting
    /// `written_ns` (the call's duration unless the writer clamped it to nest): the one
    /// mapping from a live event to its recorded form (the round-trip test holds the reader
    /// to it; the live exporter folds these).
    pub fn written(c: &CudaCall, thread: ThreadRef, written_ns: u64) -> CudaCallRecord {
        CudaCallRecord {
            ts_ns: c.ts_ns,
            duration_ns: written_ns,
            thread,
            op: c.op,
            ret: c.ret,
            args: c.args.clone(),
            detail: c.detail.clone(),
            clamped_from_ns: (written_ns != c.duration_ns).then_some(c.duration_ns),
            cpu: c.task.cpu,
            cgroup_id: c.task.cgroup_id,
        }
    }

    /// The call's real duration (the slice in the file may be shortened to nest).
    pub fn real_duration_ns(&self) -> u64 {
        self.clamped_from_ns.unwrap_or(self.duration_ns)
    }
}

/// One interval a traced thread spent off the CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct OffCpuRecord {
    /// Switch-out time (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Nanoseconds the slice lasts in the file: the time off the CPU unless the writer clamped
    /// it (see `clamped_from_ns` and [`Self::real_duration_ns`]).
    pub duration_ns: u64,
    /// The traced thread that left the CPU.
    pub thread: ThreadRef,
    /// Preempted while runnable, or blocked (slept or waited).
    pub reason: OffCpuReason,
    /// The scheduler's `prev_state` at switch-out.
    pub prev_state: i64,
    /// Who ran instead.
    pub next_tid: u32,
    /// The name of the thread that ran instead.
    pub next_comm: String,
    /// The CPU the thread ran on again.
    pub cpu: u32,
    /// The thread's cgroup v2 id.
    pub cgroup_id: u64,
    /// Set when the writer shortened the slice to keep its track nested: the real duration.
    pub clamped_from_ns: Option<u64>,
}

impl OffCpuRecord {
    /// What a reader yields for the interval `o` of `thread` once written (see
    /// [`CudaCallRecord::written`]).
    pub fn written(o: &OffCpu, thread: ThreadRef, written_ns: u64) -> OffCpuRecord {
        OffCpuRecord {
            ts_ns: o.ts_ns,
            duration_ns: written_ns,
            thread,
            reason: o.reason,
            prev_state: o.prev_state,
            next_tid: o.next_tid,
            next_comm: o.next_comm.as_str().into_owned(),
            cpu: o.task.cpu,
            cgroup_id: o.task.cgroup_id,
            clamped_from_ns: (written_ns != o.duration_ns).then_some(o.duration_ns),
        }
    }

    /// The real time off the CPU (the slice in the file may be shortened to nest).
    pub fn real_duration_ns(&self) -> u64 {
        self.clamped_from_ns.unwrap_or(self.duration_ns)
    }
}

/// Process or thread lifecycle, as recorded from a [`ProcessEvent`](super::ProcessEvent).
#[derive(Clone, Debug, PartialEq)]
pub struct LifecycleRecord {
    /// When it happened (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Exec/exit: the thread itself. Fork/thread start: the parent.
    pub thread: ThreadRef,
    /// What happened.
    pub op: ProcessOp,
    /// Fork/thread start: the child's tid. Exec: the pid before exec. Exits: 0.
    pub other_pid: u32,
    /// False when the fork's clone flags were missed, so fork versus thread is a guess.
    pub clone_flags_known: bool,
    /// Exec: the file. Fork: the child's name. Exits: empty.
    pub text: String,
    /// The CPU the event was recorded on.
    pub cpu: u32,
    /// The task's cgroup v2 id.
    pub cgroup_id: u64,
}

/// An interval during which a label had one value in a scope (a state slice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelInterval {
    /// The process the label belongs to; `None`: trace-wide.
    pub scope_pid: Option<u32>,
    /// The label's key (`step`).
    pub key: String,
    /// The value it had over the interval (`42`).
    pub value: String,
    /// When the value was set (CLOCK_MONOTONIC ns).
    pub start_ns: u64,
    /// When the value changed, was cleared or its process exited, or the file ended (the
    /// next file continues it, see `continued`).
    pub end_ns: u64,
    /// Effective uid of the client that set the value.
    pub provenance_uid: u32,
    /// Pid of the client that set the value, when the kernel could say.
    pub provenance_pid: Option<u32>,
    /// Re-opened at the start of a rotated file (the value was set in an earlier file).
    pub continued: bool,
}

/// What a [`CounterSample`] counts: the counter track it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// Bytes of device memory held by a process (from malloc/free sizes).
    DeviceMemory {
        /// The process holding the memory.
        pid: u32,
    },
    /// Records written per second of trace time.
    EventsPerSecond,
    /// Total drops reported.
    Drops,
}

/// One value of a counter track, in force from `ts_ns` until the next sample of its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSample {
    /// Which counter.
    pub kind: CounterKind,
    /// When the counter took this value (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// The value, in the counter's unit: bytes, records in the second that ends at `ts_ns`,
    /// or drops so far.
    pub value: i64,
}

/// The session packet at the start of each file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// Where the file's timeline starts (CLOCK_MONOTONIC ns): the first record's time in the
    /// first file, the time of the rotation in the others.
    pub ts_ns: u64,
    /// The session's description: host, kernel, agent, command line, targets, probes.
    pub info: SessionInfo,
    /// The recording host's id (what Perfetto tells hosts apart by in merged traces).
    pub machine_id: u32,
    /// 0 for the first file of a session, then 1, 2, … after rotations.
    pub file_index: u64,
    /// When the session started, as a CLOCK_REALTIME stamp (unix ns).
    pub started_realtime_ns: u64,
}

/// One item read back from a recording.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadRecord {
    /// The session packet at the start of a file.
    Session(SessionRecord),
    /// A CUDA call, yielded when its slice ends.
    Cuda(CudaCallRecord),
    /// An off-CPU interval, yielded when its slice ends.
    OffCpu(OffCpuRecord),
    /// A process or thread lifecycle instant.
    Lifecycle(LifecycleRecord),
    /// An annotation exactly as written: an instant (`end_ns: None`) or a span.
    Annotation(AnnotationRecord),
    /// An NVTX range or mark.
    Nvtx(NvtxRecord),
    /// A message of the NVIDIA kernel drivers (an Xid report of a GPU fault).
    Driver(DriverMessage),
    /// A label's value over an interval, derived by the writer from instants.
    LabelState(LabelInterval),
    /// A counter's new value (device memory, events/s, drops).
    Counter(CounterSample),
    /// The final statistics (last packet of the last file, if the agent exited cleanly).
    Statistics(FinalStats),
}

impl ReadRecord {
    /// Whether it is a label record (an annotation, a label state, an NVTX range or mark):
    /// what a first pass skipping labels leaves for later (`read::SkippedLabels`).
    pub fn is_label(&self) -> bool {
        matches!(
            self,
            ReadRecord::Annotation(_) | ReadRecord::LabelState(_) | ReadRecord::Nvtx(_)
        )
    }

    /// Start and end of the record on the trace clock (equal for instants).
    pub fn interval(&self) -> (u64, u64) {
        match self {
            ReadRecord::Session(s) => (s.ts_ns, s.ts_ns),
            ReadRecord::Cuda(c) => (c.ts_ns, c.ts_ns + c.duration_ns),
            ReadRecord::OffCpu(o) => (o.ts_ns, o.ts_ns + o.duration_ns),
            ReadRecord::Lifecycle(l) => (l.ts_ns, l.ts_ns),
            ReadRecord::Annotation(a) => (a.ts_ns, a.end_ns.unwrap_or(a.ts_ns)),
            ReadRecord::Nvtx(n) => (n.ts_ns, n.end_ns),
            ReadRecord::Driver(d) => (d.ts_ns, d.ts_ns),
            ReadRecord::LabelState(l) => (l.start_ns, l.end_ns),
            ReadRecord::Counter(c) => (c.ts_ns, c.ts_ns),
            ReadRecord::Statistics(_) => (0, u64::MAX),
        }
    }
}
