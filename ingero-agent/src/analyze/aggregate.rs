//! What the second pass ([`super::scan`]) folds the selected records into: [`Aggregate`], all
//! bounded state — per-operation sketches, label groups, per-process accounting, time bins, the
//! slowest calls with their causes, and error groups. Nothing here grows with the number of
//! events. Also what a report asks the pass for ([`Needs`]).

use std::collections::BTreeMap;

use ingero_ebpf::{CudaLibrary, CudaOp};

use super::activity::Activity;
use super::collectives::CollectiveLog;
use super::groups::{GroupStats, Grouping};
use super::kernels::KernelTable;
use super::ops::OpStats;
use super::processes::ProcStats;
use super::slow_calls::SlowCalls;
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::CudaCallRecord;

/// Calls of one process that returned one error code, whatever the operation: a broken
/// context makes every later call fail with the same code, which is one problem, not one per
/// operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorGroup {
    pub count: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// How long the first and the last such call took, and their operations.
    pub first_duration_ns: u64,
    pub last_duration_ns: u64,
    pub first_op: u16,
    pub last_op: u16,
    /// Time spent in the failing calls.
    pub total_ns: u64,
    /// The operations that returned it and how many times each (at most one entry per
    /// operation, so bounded by the op vocabulary).
    pub ops: Vec<(u16, u64)>,
}

/// What an error group is of: NCCL's codes apart from CUDA's (they overlap: 4 is both
/// `ncclInvalidArgument` and `cudaErrorCudartUnloading`), then the code and the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ErrorKey {
    pub nccl: bool,
    pub code: i32,
    pub pid: u32,
}

/// Who ran instead of a preempted thread: task name and thread id, interned (the same task
/// often preempts many times in a row, and a culprit is named by both).
#[derive(Default)]
pub struct Names {
    ids: FastMap<(String, u32), u32>,
    tasks: Vec<(String, u32)>,
    /// The id returned last.
    last: Option<u32>,
}

impl Names {
    pub fn intern(&mut self, comm: &str, tid: u32) -> u32 {
        if let Some(id) = self.last {
            if self.get(id) == comm && self.tid(id) == tid {
                return id;
            }
        }
        let key = (comm.to_owned(), tid);
        let id = match self.ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.tasks.len() as u32;
                self.tasks.push(key.clone());
                self.ids.insert(key, id);
                id
            }
        };
        self.last = Some(id);
        id
    }

    /// The task's name.
    pub fn get(&self, id: u32) -> &str {
        self.tasks.get(id as usize).map_or("?", |(n, _)| n.as_str())
    }

    /// The task's thread id.
    pub fn tid(&self, id: u32) -> u32 {
        self.tasks.get(id as usize).map_or(0, |(_, t)| *t)
    }
}

/// Everything the second pass produced.
pub struct Aggregate {
    /// By op value order.
    pub ops: BTreeMap<u16, OpStats>,
    pub groupings: Vec<Grouping>,
    pub procs: BTreeMap<u32, ProcStats>,
    pub activity: Activity,
    pub slow: SlowCalls,
    /// By library, error code and process.
    pub errors: BTreeMap<ErrorKey, ErrorGroup>,
    pub names: Names,
    /// The whole selection as one group.
    pub total: GroupStats,
    /// Events that matched the selection.
    pub matched: u64,
    /// Launches by kernel, replays by graph.
    pub kernels: KernelTable,
    /// NCCL's collectives by communicator, for comparing ranks (with [`Needs::processes`]).
    pub collectives: CollectiveLog,
}

/// What a report reads from the [`Aggregate`]; the scan skips the rest (left empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// Per-operation sketches ([`Aggregate::ops`]).
    pub ops: bool,
    /// The whole selection as one group ([`Aggregate::total`]).
    pub total: bool,
    /// Processes, activity bins, slow calls and error groups.
    pub processes: bool,
    /// A row per launched kernel ([`Aggregate::kernels`]). Without it only graph launches get
    /// rows (for the `cuda_graphs` finding) and eager launches are counted: a hash lookup per
    /// launch is the cost `explain` does not need.
    pub kernels: bool,
}

impl Needs {
    /// Everything (`explain`).
    pub const ALL: Needs = Needs {
        ops: true,
        total: true,
        processes: true,
        kernels: false,
    };
}

impl Aggregate {
    pub fn op(&self, op: CudaOp) -> Option<&OpStats> {
        self.ops.get(&(op as u16))
    }
}

/// Counts a failed call into its error group.
pub(super) fn add_error(errors: &mut BTreeMap<ErrorKey, ErrorGroup>, c: &CudaCallRecord) {
    let key = ErrorKey {
        nccl: c.op.library() == CudaLibrary::Nccl,
        code: c.ret,
        pid: c.thread.pid,
    };
    let e = errors.entry(key).or_default();
    let op = c.op as u16;
    if e.count == 0 || c.ts_ns < e.first_ns {
        e.first_ns = c.ts_ns;
        e.first_duration_ns = c.duration_ns;
        e.first_op = op;
    }
    if e.count == 0 || c.ts_ns >= e.last_ns {
        e.last_ns = c.ts_ns;
        e.last_duration_ns = c.duration_ns;
        e.last_op = op;
    }
    e.count += 1;
    e.total_ns += c.duration_ns;
    match e.ops.iter_mut().find(|(o, _)| *o == op) {
        Some((_, n)) => *n += 1,
        None => e.ops.push((op, 1)),
    }
}
