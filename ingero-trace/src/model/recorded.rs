//! The typed records the reader yields. CUDA calls, off-CPU intervals and spans come out when
//! their slice ends (so with their duration); instants and counters when they occur.

use std::sync::Arc;

use ingero_ebpf::{CudaOp, OffCpuReason};

use super::{FinalStats, SessionInfo};
use crate::model::AnnotationRecord;
use crate::model::{CudaArgs, ProcessOp};

/// The thread a record happened on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRef {
    pub pid: u32,
    pub tid: u32,
    /// The thread's name as recorded in its descriptor, shared with the reader's track table
    /// (records of one thread do not each copy it).
    pub name: Arc<str>,
}

/// One CUDA runtime call.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaCallRecord {
    pub ts_ns: u64,
    pub duration_ns: u64,
    pub thread: ThreadRef,
    pub op: CudaOp,
    /// `cudaError_t` (0: success).
    pub ret: i32,
    pub args: CudaArgs,
    /// Set when the writer shortened the slice to keep its track nested: the real duration.
    pub clamped_from_ns: Option<u64>,
    /// The CPU the call returned on.
    pub cpu: u32,
    /// The thread's cgroup v2 id.
    pub cgroup_id: u64,
}

impl CudaCallRecord {
    /// The call's real duration (the slice in the file may be shortened to nest).
    pub fn real_duration_ns(&self) -> u64 {
        self.clamped_from_ns.unwrap_or(self.duration_ns)
    }
}

/// One interval a traced thread spent off the CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct OffCpuRecord {
    pub ts_ns: u64,
    pub duration_ns: u64,
    pub thread: ThreadRef,
    pub reason: OffCpuReason,
    pub prev_state: i64,
    /// Who ran instead.
    pub next_tid: u32,
    pub next_comm: String,
    /// The CPU the thread ran on again.
    pub cpu: u32,
    /// The thread's cgroup v2 id.
    pub cgroup_id: u64,
    /// Set when the writer shortened the slice to keep its track nested: the real duration.
    pub clamped_from_ns: Option<u64>,
}

/// Process or thread lifecycle (see `decode::ProcessEvent` for what `other_pid` means).
#[derive(Clone, Debug, PartialEq)]
pub struct LifecycleRecord {
    pub ts_ns: u64,
    pub thread: ThreadRef,
    pub op: ProcessOp,
    pub other_pid: u32,
    pub clone_flags_known: bool,
    pub text: String,
    /// The CPU the event was recorded on.
    pub cpu: u32,
    /// The task's cgroup v2 id.
    pub cgroup_id: u64,
}

/// An interval during which a label had one value in a scope (a state slice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelInterval {
    /// `None`: trace-wide.
    pub scope_pid: Option<u32>,
    pub key: String,
    pub value: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub provenance_uid: u32,
    pub provenance_pid: Option<u32>,
    /// Re-opened at the start of a rotated file (the value was set in an earlier file).
    pub continued: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// Bytes of device memory held by a process (from malloc/free sizes).
    DeviceMemory { pid: u32 },
    /// Records written per second of trace time.
    EventsPerSecond,
    /// Total drops reported.
    Drops,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSample {
    pub kind: CounterKind,
    pub ts_ns: u64,
    pub value: i64,
}

/// The session packet at the start of each file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub ts_ns: u64,
    pub info: SessionInfo,
    pub machine_id: u32,
    /// 0 for the first file of a session, then 1, 2, … after rotations.
    pub file_index: u64,
    pub started_realtime_ns: u64,
}

/// One item read back from a recording.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadRecord {
    Session(SessionRecord),
    Cuda(CudaCallRecord),
    OffCpu(OffCpuRecord),
    Lifecycle(LifecycleRecord),
    /// An annotation exactly as written: an instant (`end_ns: None`) or a span.
    Annotation(AnnotationRecord),
    /// A label's value over an interval, derived by the writer from instants.
    LabelState(LabelInterval),
    Counter(CounterSample),
    /// The final statistics (last packet of the last file, if the agent exited cleanly).
    Statistics(FinalStats),
}

impl ReadRecord {
    /// Start and end of the record on the trace clock (equal for instants).
    pub fn interval(&self) -> (u64, u64) {
        match self {
            ReadRecord::Session(s) => (s.ts_ns, s.ts_ns),
            ReadRecord::Cuda(c) => (c.ts_ns, c.ts_ns + c.duration_ns),
            ReadRecord::OffCpu(o) => (o.ts_ns, o.ts_ns + o.duration_ns),
            ReadRecord::Lifecycle(l) => (l.ts_ns, l.ts_ns),
            ReadRecord::Annotation(a) => (a.ts_ns, a.end_ns.unwrap_or(a.ts_ns)),
            ReadRecord::LabelState(l) => (l.start_ns, l.end_ns),
            ReadRecord::Counter(c) => (c.ts_ns, c.ts_ns),
            ReadRecord::Statistics(_) => (0, u64::MAX),
        }
    }
}
