//! The second pass: streams the selected records once and folds them into bounded state —
//! per-operation sketches, label groups, per-process accounting, time bins, the slowest calls
//! with their causes, and error groups. Nothing here grows with the number of events.

use std::collections::BTreeMap;

use anyhow::Result;
use ingero_ebpf::CudaOp;

use super::activity::Activity;
use super::groups::{GroupStats, Grouping};
use super::index::TraceIndex;
use super::ops::OpStats;
use super::processes::ProcStats;
use super::scan::Scan;
use super::selection::Selection;
use super::slow_calls::SlowCalls;
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::{CudaCallRecord, ReadRecord};
use ingero_trace::read::{TimeRange, TraceReader};

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
        if let Some(id) = self.last
            && self.get(id) == s
        {
            return id;
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
}

impl Needs {
    /// Everything (`explain`).
    pub const ALL: Needs = Needs {
        ops: true,
        total: true,
        processes: true,
    };
}

/// Error groups keep this many pids.
const ERROR_PIDS_KEPT: usize = 8;

impl Aggregate {
    pub fn op(&self, op: CudaOp) -> Option<&OpStats> {
        self.ops.get(&(op as u16))
    }
}

/// Streams the recording once under `sel`, grouping by each of `groupings` at the same time.
pub fn run(
    ix: &TraceIndex,
    sel: &Selection,
    groupings: Vec<Vec<String>>,
    needs: Needs,
) -> Result<Aggregate> {
    let groupings = groupings
        .into_iter()
        .map(|keys| Grouping::new(keys, &ix.labels))
        .collect();
    let mut scan = Scan::new(ix, sel, groupings, needs);
    // The range is checked by the scan, on the two kinds of record it reads, rather than by
    // the reader on every record (the same test: the record's interval overlaps the range).
    let mut reader = ix.reader(TimeRange::all());
    match (needs.ops, scan.grouped(), needs.processes) {
        (false, false, false) => scan_all::<false, false, false>(&mut reader, &mut scan),
        (false, false, true) => scan_all::<false, false, true>(&mut reader, &mut scan),
        (false, true, false) => scan_all::<false, true, false>(&mut reader, &mut scan),
        (false, true, true) => scan_all::<false, true, true>(&mut reader, &mut scan),
        (true, false, false) => scan_all::<true, false, false>(&mut reader, &mut scan),
        (true, false, true) => scan_all::<true, false, true>(&mut reader, &mut scan),
        (true, true, false) => scan_all::<true, true, false>(&mut reader, &mut scan),
        (true, true, true) => scan_all::<true, true, true>(&mut reader, &mut scan),
    }?;
    reader.warn_damage();
    Ok(scan.finish())
}

/// The pass itself, compiled once per combination of what is needed.
fn scan_all<const OPS: bool, const GROUPED: bool, const PROCS: bool>(
    reader: &mut TraceReader,
    scan: &mut Scan<'_>,
) -> Result<()> {
    // The loop runs inside the reader's (one record slot, reused: nothing allocated per event).
    reader.for_each_record(|rec| match rec {
        ReadRecord::Cuda(c) => scan.cuda::<OPS, GROUPED, PROCS>(c),
        ReadRecord::OffCpu(o) => scan.off_cpu(o),
        _ => {}
    })?;
    Ok(())
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
