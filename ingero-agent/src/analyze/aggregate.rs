//! The second pass: streams the selected records once and folds them into bounded state —
//! per-operation sketches, label groups, per-process accounting, time bins, the slowest calls
//! with their causes, and error groups. Nothing here grows with the number of events.

use std::collections::BTreeMap;

use anyhow::Result;
use ingero_ebpf::CudaOp;
use ingero_ebpf::cuda_ops::MAX_OP;

use super::activity::{Activity, ProcBins};
use super::groups::{GroupStats, Grouping};
use super::index::TraceIndex;
use super::labels::ValueId;
use super::ops::OpStats;
use super::pid_slots::PidSlots;
use super::processes::ProcStats;
use super::routes::{Routes, Sinks};
use super::selection::Selection;
use super::slow_calls::{OffCpuRings, SlowCalls};
use crate::read::{CudaCallRecord, ReadRecord, TimeRange, TraceReader};
use crate::record::FastMap;

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
    /// Records read in this pass and events that matched the selection.
    pub records: u64,
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
    let mut agg = Aggregate {
        ops: BTreeMap::new(),
        groupings: groupings
            .into_iter()
            .map(|keys| Grouping::new(keys, &ix.labels))
            .collect(),
        procs: BTreeMap::new(),
        activity: Activity::new(sel.range.start_ns, sel.range.end_ns),
        slow: SlowCalls::default(),
        errors: BTreeMap::new(),
        names: Names::default(),
        total: GroupStats::default(),
        records: 0,
        matched: 0,
    };
    // Dense during the scan (by op value, by process slot); moved into the maps at the end.
    let mut ops: Vec<Option<OpStats>> = (0..MAX_OP).map(|_| None).collect();
    let mut pids = PidSlots::default();
    let mut procs: Vec<(ProcStats, ProcBins)> = Vec::new();
    let mut rings = OffCpuRings::default();
    let mut scratch: Vec<ValueId> = Vec::new();
    let check_labels = !sel.labels.is_empty();
    let grouped = needs.total || !agg.groupings.is_empty();
    let mut routes = Routes::new(needs.total);
    let mut sinks = Sinks {
        index: &ix.labels,
        groupings: &mut agg.groupings,
        total: &mut agg.total,
    };
    let (start_ns, end_ns) = (sel.range.start_ns, sel.range.end_ns);
    // The range is checked here, on the two kinds of record the scan reads, rather than by
    // the reader on every record (the same test: the record's interval overlaps the range).
    let mut reader = TraceReader::from_files(ix.files.clone(), TimeRange::all());
    // The loop runs inside the reader's (one record slot, reused: nothing allocated per event).
    reader.for_each_record(|rec| {
        agg.records += 1;
        match rec {
            ReadRecord::Cuda(c) => {
                let pid = c.thread.pid;
                if c.ts_ns > end_ns
                    || c.ts_ns + c.duration_ns < start_ns
                    || !sel.admits_pid(pid)
                    || !sel.admits_op(c.op)
                    || (check_labels && !sel.admits_labels(&ix.labels, pid, c.ts_ns, &mut scratch))
                {
                    return;
                }
                agg.matched += 1;
                if needs.ops
                    && let Some(slot) = ops.get_mut(c.op as usize)
                {
                    slot.get_or_insert_with(|| OpStats::new(c.op))
                        .record(c.duration_ns, c.ret);
                }
                if grouped {
                    routes.add_cuda(&mut sinks, c);
                }
                if !needs.processes {
                    return;
                }
                let slot = pids.slot(pid, || {
                    procs.push((ProcStats::default(), ProcBins::new()));
                });
                if let Some((stats, bins)) = procs.get_mut(slot) {
                    let net = stats.add(c);
                    agg.activity.add_api_to(bins, c.ts_ns, c.duration_ns);
                    if net != 0 || matches!(c.args, crate::decode::CudaArgs::Alloc { .. }) {
                        let b = agg.activity.bin_near(c.ts_ns);
                        bins.net_bytes[b] += net;
                        if net > 0 {
                            bins.alloc_calls[b] += 1;
                        }
                    }
                }
                agg.slow.offer(c, &rings);
                if c.ret != 0 {
                    add_error(&mut agg.errors, c);
                }
            }
            ReadRecord::OffCpu(o) => {
                let pid = o.thread.pid;
                if o.ts_ns > end_ns
                    || o.ts_ns + o.duration_ns < start_ns
                    || !sel.admits_pid(pid)
                    || (check_labels && !sel.admits_labels(&ix.labels, pid, o.ts_ns, &mut scratch))
                {
                    return;
                }
                agg.matched += 1;
                if !needs.processes && !grouped {
                    return;
                }
                let who = agg.names.intern(&o.next_comm);
                if needs.processes {
                    rings.push(o, who);
                }
                if grouped {
                    routes.add_off_cpu(&mut sinks, o, who);
                }
            }
            _ => {}
        }
    })?;
    routes.finish(&mut sinks);
    agg.ops = ops
        .into_iter()
        .flatten()
        .map(|s| (s.op as u16, s))
        .collect();
    for (pid, (stats, bins)) in pids.pids.iter().zip(procs) {
        agg.procs.insert(*pid, stats);
        agg.activity.procs.insert(*pid, bins);
    }
    for g in &mut agg.groupings {
        g.finish();
    }
    Ok(agg)
}

/// Counts a failed call into its error group.
fn add_error(errors: &mut BTreeMap<(u16, i32), ErrorGroup>, c: &CudaCallRecord) {
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
