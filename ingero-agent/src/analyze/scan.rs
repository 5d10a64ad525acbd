//! The second pass: [`run`] streams the selected records once into an [`Aggregate`];
//! [`Scan`] is its state while it runs, and what it does per record.
//!
//! The reader calls the scan once per record from inside its decode loop, so the common case
//! (a call that passes the selection) is kept small enough to inline there: the per-operation
//! sketch and the label routes inline, per-process accounting and everything rarer out of line.

use anyhow::Result;
use ingero_ebpf::CudaOp;
use ingero_ebpf::cuda_ops::MAX_OP;

use super::activity::{Activity, ProcBins};
use super::aggregate::{Aggregate, Names, Needs, add_error};
use super::groups::{GroupSpec, GroupStats, Grouping};
use super::index::TraceIndex;
use super::labels::ValueId;
use super::ops::OpStats;
use super::pid_slots::PidSlots;
use super::proc_run::ProcRun;
use super::processes::ProcStats;
use super::routes::{Routes, Sinks};
use super::selection::Selection;
use super::slow_calls::{OffCpuRings, SlowCalls};
use ingero_trace::model::{CudaArgs, call_failed};
use ingero_trace::model::{CudaCallRecord, OffCpuRecord, ReadRecord};
use ingero_trace::read::{TimeRange, TraceReader};

/// Calls shorter than this are not searched for off-CPU time inside them: a switch out and
/// back takes microseconds, so what such a call could hold is noise, and the search costs a
/// lookup per call.
pub const INNER_OFF_CPU_MIN_NS: u64 = 10_000;

/// Streams the recording once under `sel`, grouping by each of `groupings` at the same time.
pub fn run(
    ix: &TraceIndex,
    sel: &Selection,
    groupings: Vec<GroupSpec>,
    needs: Needs,
) -> Result<Aggregate> {
    let groupings = groupings
        .into_iter()
        .map(|spec| Grouping::new(spec, &ix.labels))
        .collect();
    let mut scan = Scan::new(ix, sel, groupings, needs);
    // The range is checked by the scan, on the two kinds of record it reads, rather than by
    // the reader on every record (the same test: the record's interval overlaps the range);
    // the reader reads only what can hold records overlapping it, and of the packets outside
    // the chunks, only what those records need.
    let mut reader = ix.window_reader(TimeRange::all(), sel.range).events_only();
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

/// A record held in memory rather than read from a file (the live exporter's history).
#[derive(Clone, Copy)]
pub enum Held<'r> {
    Cuda(&'r CudaCallRecord),
    OffCpu(&'r OffCpuRecord),
}

/// [`run`] for what `query --group-by` needs (label groups only), over records already in
/// memory instead of the indexed files, in the order given: the live OTLP exporter folds
/// its history through the very code `query` folds a recording with.
pub fn run_held<'r>(
    ix: &TraceIndex,
    sel: &Selection,
    groupings: Vec<GroupSpec>,
    records: impl IntoIterator<Item = Held<'r>>,
) -> Aggregate {
    let needs = Needs {
        ops: false,
        total: false,
        processes: false,
        kernels: false,
    };
    let groupings = groupings
        .into_iter()
        .map(|spec| Grouping::new(spec, &ix.labels))
        .collect();
    let mut scan = Scan::new(ix, sel, groupings, needs);
    for r in records {
        match r {
            Held::Cuda(c) => scan.cuda::<false, true, false>(c),
            Held::OffCpu(o) => scan.off_cpu(o),
        }
    }
    scan.finish()
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

/// The second pass in progress.
pub struct Scan<'a> {
    ix: &'a TraceIndex,
    sel: &'a Selection,
    needs: Needs,
    start_ns: u64,
    end_ns: u64,
    /// No `--pid`, `--op` or `--label`: only the time range is checked.
    unfiltered: bool,
    /// Whether events go to the total or to label groups at all.
    grouped: bool,
    agg: Aggregate,
    /// Dense during the scan (by op value, by process slot); moved into the maps at the end.
    ops: Vec<Option<OpStats>>,
    pids: PidSlots,
    procs: Vec<(ProcStats, ProcBins)>,
    rings: OffCpuRings,
    routes: Routes,
    /// The calls of one process not yet added to its stats and bins.
    run: ProcRun,
    scratch: Vec<ValueId>,
}

impl<'a> Scan<'a> {
    pub fn new(
        ix: &'a TraceIndex,
        sel: &'a Selection,
        groupings: Vec<Grouping>,
        needs: Needs,
    ) -> Scan<'a> {
        let grouped = needs.total || !groupings.is_empty();
        Scan {
            ix,
            sel,
            needs,
            start_ns: sel.range.start_ns,
            end_ns: sel.range.end_ns,
            unfiltered: sel.pids.is_empty() && sel.op_mask.is_empty() && sel.labels.is_empty(),
            grouped,
            agg: Aggregate {
                ops: Default::default(),
                groupings,
                procs: Default::default(),
                activity: Activity::new(sel.range.start_ns, sel.range.end_ns),
                slow: SlowCalls::default(),
                errors: Default::default(),
                names: Names::default(),
                total: GroupStats::default(),
                matched: 0,
                kernels: Default::default(),
                collectives: Default::default(),
            },
            ops: (0..MAX_OP).map(|_| None).collect(),
            pids: PidSlots::default(),
            procs: Vec::new(),
            rings: OffCpuRings::default(),
            routes: Routes::new(needs.total),
            run: ProcRun::default(),
            scratch: Vec::new(),
        }
    }

    /// Whether an event of `pid` over `[a, b]` (a call of `op`, if one) is selected.
    #[inline(always)]
    fn admits(&mut self, op: Option<CudaOp>, pid: u32, a: u64, b: u64) -> bool {
        a <= self.end_ns
            && b >= self.start_ns
            && (self.unfiltered || self.filters_admit(op, pid, a))
    }

    /// `--pid`, `--op` and `--label`.
    #[inline(never)]
    fn filters_admit(&mut self, op: Option<CudaOp>, pid: u32, t: u64) -> bool {
        op.is_none_or(|op| self.sel.admits_op(op))
            && self.sel.admits_pid(pid)
            && (self.sel.labels.is_empty()
                || self
                    .sel
                    .admits_labels(&self.ix.labels, pid, t, &mut self.scratch))
    }

    /// Whether events go to the total or to label groups at all.
    pub fn grouped(&self) -> bool {
        self.grouped
    }

    /// One CUDA call; `OPS`, `GROUPED` and `PROCS` are [`Needs::ops`], [`Self::grouped`] and
    /// [`Needs::processes`] (constants, so each command's loop holds only its own work).
    #[inline(always)]
    pub fn cuda<const OPS: bool, const GROUPED: bool, const PROCS: bool>(
        &mut self,
        c: &CudaCallRecord,
    ) {
        if !self.admits(Some(c.op), c.thread.pid, c.ts_ns, c.ts_ns + c.duration_ns) {
            return;
        }
        // A driver call made by a runtime call is part of that call's work: counted once, as
        // the runtime call, unless `--op` asks for the driver op itself.
        if c.detail.parent.is_some() && !self.sel.op_mask.contains(c.op) {
            return;
        }
        self.agg.matched += 1;
        if self.needs.kernels || c.op.is_graph_launch() {
            self.agg.kernels.add(c);
        } else if c.op.is_kernel_launch() {
            self.agg.kernels.eager_launches += 1;
        }
        if OPS {
            match self.ops.get_mut(c.op as usize) {
                Some(Some(s)) => s.record(c.duration_ns, c.ret),
                Some(slot) => new_op(slot, c),
                None => {}
            }
        }
        if GROUPED {
            let (ix, agg) = (self.ix, &mut self.agg);
            self.routes.add_cuda(c, || sinks(ix, agg));
        }
        if PROCS {
            self.process_cuda(c);
            // Off-CPU time inside a call is the call's (a blocking wait) or the scheduler's
            // (preempted), not time the thread spent elsewhere: the groups learn which.
            if GROUPED && c.duration_ns >= INNER_OFF_CPU_MIN_NS {
                self.inner_off_cpu(c);
            }
        }
    }

    /// Off-CPU time of the call's thread inside the call (its intervals arrived first: they
    /// end before the call does), counted into the call's groups.
    #[inline(never)]
    fn inner_off_cpu(&mut self, c: &CudaCallRecord) {
        let (pre, blk, _) = self
            .rings
            .overlap(c.thread.tid, c.ts_ns, c.ts_ns + c.duration_ns);
        if pre + blk == 0 {
            return;
        }
        let (ix, agg) = (self.ix, &mut self.agg);
        self.routes
            .add_inner_off_cpu(&mut sinks(ix, agg), c, pre, blk);
    }

    /// Per-process accounting, activity bins, slow calls and errors of a call.
    #[inline(always)]
    fn process_cuda(&mut self, c: &CudaCallRecord) {
        if !self.run.add(c) {
            self.process_cuda_alone(c);
        }
        if c.op.is_collective() {
            self.agg.collectives.add(c);
        }
        self.agg.slow.offer(c, &self.rings);
    }

    /// A call outside the process run: ends it, is added on its own, starts the next.
    #[inline(never)]
    fn process_cuda_alone(&mut self, c: &CudaCallRecord) {
        self.run.finish(&mut self.procs);
        let procs = &mut self.procs;
        let slot = self.pids.slot(c.thread.pid, || {
            procs.push((ProcStats::default(), ProcBins::new()));
        });
        let activity = &mut self.agg.activity;
        if let Some((stats, bins)) = self.procs.get_mut(slot) {
            let net = stats.add(c);
            activity.add_api_to(bins, c.ts_ns, c.duration_ns);
            if net != 0
                || matches!(
                    c.args,
                    CudaArgs::Alloc { .. } | CudaArgs::PhysicalCreate { .. }
                )
            {
                let b = activity.bin_near(c.ts_ns);
                bins.net_bytes[b] += net;
                if net > 0 {
                    bins.alloc_calls[b] += 1;
                }
            }
            self.run.open(c.thread.pid, slot, stats, activity, c.ts_ns);
        }
        if call_failed(c.op, c.ret) {
            add_error(&mut self.agg.errors, c);
        }
    }

    /// One off-CPU interval.
    #[inline(never)]
    pub fn off_cpu(&mut self, o: &OffCpuRecord) {
        if !self.admits(None, o.thread.pid, o.ts_ns, o.ts_ns + o.duration_ns) {
            return;
        }
        self.agg.matched += 1;
        if !self.needs.processes && !self.grouped {
            return;
        }
        let who = self.agg.names.intern(&o.next_comm, o.next_tid);
        if self.needs.processes {
            self.rings.push(o, who);
        }
        if self.grouped {
            self.routes
                .add_off_cpu(&mut sinks(self.ix, &mut self.agg), o, who);
        }
    }

    /// Merges what is still pending and moves the dense state into the [`Aggregate`].
    pub fn finish(mut self) -> Aggregate {
        self.routes.finish(&mut sinks(self.ix, &mut self.agg));
        self.run.finish(&mut self.procs);
        let mut agg = self.agg;
        agg.ops = self
            .ops
            .into_iter()
            .flatten()
            .map(|s| (s.op as u16, s))
            .collect();
        for (pid, (stats, bins)) in self.pids.pids.iter().zip(self.procs) {
            agg.procs.insert(*pid, stats);
            agg.activity.procs.insert(*pid, bins);
        }
        for g in &mut agg.groupings {
            g.finish();
        }
        agg
    }
}

/// Where the routes count events.
#[inline(always)]
fn sinks<'s>(ix: &'s TraceIndex, agg: &'s mut Aggregate) -> Sinks<'s> {
    Sinks {
        index: &ix.labels,
        groupings: &mut agg.groupings,
        total: &mut agg.total,
    }
}

/// The first call of an op: its stats start here.
#[inline(never)]
fn new_op(slot: &mut Option<OpStats>, c: &CudaCallRecord) {
    slot.get_or_insert_with(|| OpStats::new(c.op))
        .record(c.duration_ns, c.ret);
}
