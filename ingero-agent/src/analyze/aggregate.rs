//! What the second pass ([`super::scan`]) folds the selected records into: [`Aggregate`], all
//! bounded state — per-operation sketches, label groups, per-process accounting, time bins, the
//! slowest calls with their causes, and error groups. Nothing here grows with the number of
//! events. Also what a report asks the pass for ([`Needs`]).

use std::collections::BTreeMap;

use ingero_ebpf::CudaOp;

use super::activity::Activity;
use super::groups::{GroupStats, Grouping};
use super::kernels::KernelTable;
use super::ops::OpStats;
use super::processes::ProcStats;
use super::slow_calls::SlowCalls;
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::CudaCallRecord;

/// Calls that returned one error code from one operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorGroup {
    pub count: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// How long the first and the last such call took.
    pub first_duration_ns: u64,
    pub last_duration_ns: u64,
    /// Processes that saw it (first few).
    pub pids: Vec<u32>,
}

/// Task names (who ran instead), interned.
#[derive(Default)]
pub struct Names {
    ids: FastMap<String, u32>,
    names: Vec<String>,
    /// The id returned last: the same task often preempts many times in a row.
    last: Option<u32>,
}

impl Names {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(id) = self.last {
            if self.get(id) == s {
                return id;
            }
        }
        let id = match self.ids.get(s) {
            Some(id) => *id,
            None => {
                let id = self.names.len() as u32;
                self.names.push(s.to_owned());
                self.ids.insert(s.to_owned(), id);
                id
            }
        };
        self.last = Some(id);
        id
    }

    pub fn get(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
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
    pub errors: BTreeMap<(u16, i32), ErrorGroup>,
    pub names: Names,
    /// The whole selection as one group.
    pub total: GroupStats,
    /// Events that matched the selection.
    pub matched: u64,
    /// Launches by kernel, replays by graph.
    pub kernels: KernelTable,
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

/// Error groups keep this many pids.
const ERROR_PIDS_KEPT: usize = 8;

impl Aggregate {
    pub fn op(&self, op: CudaOp) -> Option<&OpStats> {
        self.ops.get(&(op as u16))
    }
}

/// Counts a failed call into its error group.
pub(super) fn add_error(errors: &mut BTreeMap<(u16, i32), ErrorGroup>, c: &CudaCallRecord) {
    let e = errors.entry((c.op as u16, c.ret)).or_default();
    if e.count == 0 || c.ts_ns < e.first_ns {
        e.first_ns = c.ts_ns;
        e.first_duration_ns = c.duration_ns;
    }
    if e.count == 0 || c.ts_ns >= e.last_ns {
        e.last_ns = c.ts_ns;
        e.last_duration_ns = c.duration_ns;
    }
    e.count += 1;
    if e.pids.len() < ERROR_PIDS_KEPT && !e.pids.contains(&c.thread.pid) {
        e.pids.push(c.thread.pid);
    }
}
