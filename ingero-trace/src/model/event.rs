//! The decoded event types.

use ingero_ebpf::{COMM_LEN, CudaOp, OffCpuReason};

use super::{CallDetail, CudaArgs};

/// A kernel task name kept inline (no allocation per event).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Comm([u8; COMM_LEN]);

impl Comm {
    /// No name.
    pub const EMPTY: Comm = Comm([0; COMM_LEN]);

    /// The name as the kernel reports it: NUL-padded bytes.
    pub fn new(raw: [u8; COMM_LEN]) -> Self {
        Comm(raw)
    }

    /// A name from text, cut to the kernel's 15 bytes (a cut character reads back replaced).
    pub fn from_str_lossy(s: &str) -> Self {
        let mut raw = [0u8; COMM_LEN];
        let n = s.len().min(COMM_LEN - 1);
        raw[..n].copy_from_slice(&s.as_bytes()[..n]);
        Comm(raw)
    }

    /// The name up to its NUL; invalid UTF-8 is replaced.
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        let end = self.0.iter().position(|b| *b == 0).unwrap_or(COMM_LEN);
        String::from_utf8_lossy(&self.0[..end])
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// The task an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task {
    /// Thread group id.
    pub pid: u32,
    /// Kernel thread id (equal to `pid` on the process's main thread).
    pub tid: u32,
    /// The thread's name when the event happened.
    pub comm: Comm,
    /// The task's cgroup v2 id (tells containers and systemd units apart).
    pub cgroup_id: u64,
    /// The CPU the event was recorded on: where a CUDA call returned, where an off-CPU thread
    /// ran again.
    pub cpu: u32,
}

/// One CUDA runtime call.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaCall {
    /// CLOCK_MONOTONIC entry time.
    pub ts_ns: u64,
    /// Nanoseconds from entry to return.
    pub duration_ns: u64,
    /// The calling thread.
    pub task: Task,
    /// The CUDA runtime function (per-thread-stream variants under their base name).
    pub op: CudaOp,
    /// `cudaError_t`.
    pub ret: i32,
    /// The arguments, named per op.
    pub args: CudaArgs,
    /// The export that fired, the enclosing traced call, the kernel launched.
    pub detail: CallDetail,
}

/// A traced thread's time off the CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct OffCpu {
    /// Switch-out time (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Nanoseconds until the thread ran again.
    pub duration_ns: u64,
    /// The traced thread that left the CPU.
    pub task: Task,
    /// Preempted while runnable, or blocked (slept or waited).
    pub reason: OffCpuReason,
    /// The scheduler's `prev_state` at switch-out, as the `sched_switch` tracepoint reported it.
    pub prev_state: i64,
    /// The thread that ran instead.
    pub next_tid: u32,
    /// The name of the thread that ran instead.
    pub next_comm: Comm,
}

crate::vocab::words! {
    /// A process or thread lifecycle event; its text is the instant's name in recordings and
    /// the `op` of `--json`.
    pub enum ProcessOp {
        /// The process executed a new program.
        Exec = "exec",
        /// The whole process ended (its last thread exited).
        Exit = "exit",
        /// One thread ended; the process goes on.
        ThreadExit = "thread_exit",
        /// A new process.
        Fork = "fork",
        /// A new thread in the same process.
        ThreadStart = "thread_start",
    }
}

/// Process or thread lifecycle.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessEvent {
    /// When it happened (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Exec/exit: the task itself. Fork/thread start: the parent.
    pub task: Task,
    /// What happened.
    pub op: ProcessOp,
    /// Fork/thread start: the child's tid. Exec: the pid before exec. Exits: 0.
    pub other_pid: u32,
    /// False when the fork's clone flags were missed, so fork versus thread is a guess.
    pub clone_flags_known: bool,
    /// Exec: the file. Fork: the child's name. Exits: empty.
    pub text: String,
}

/// Everything the probes report.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A CUDA runtime call, reported at its return.
    Cuda(CudaCall),
    /// An interval a traced thread spent off the CPU, reported when it runs again.
    OffCpu(OffCpu),
    /// A process or thread lifecycle event.
    Process(ProcessEvent),
}

impl Event {
    /// When the event began (CLOCK_MONOTONIC ns): call entry, switch-out, or the lifecycle
    /// moment.
    pub fn ts_ns(&self) -> u64 {
        match self {
            Event::Cuda(e) => e.ts_ns,
            Event::OffCpu(e) => e.ts_ns,
            Event::Process(e) => e.ts_ns,
        }
    }

    /// The task the event belongs to (a fork's parent).
    pub fn task(&self) -> &Task {
        match self {
            Event::Cuda(e) => &e.task,
            Event::OffCpu(e) => &e.task,
            Event::Process(e) => &e.task,
        }
    }
}
