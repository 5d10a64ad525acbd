//! What the rules share, computed once per `explain`: the rows of every label grouping, the
//! cold calls (first calls of an operation far slower than its steady state), and how a
//! group's wall time splits into the causes of [`CauseKind`].
//!
//! The split of one group's wall time (one thread's view; with several threads the CPU part
//! is what is left and floors at zero):
//! - CUDA time by [`WorkClass`], less the time its thread was preempted inside those calls
//!   and less the cold part of first calls;
//! - `preempted`: all preempted time, inside CUDA calls or not;
//! - `blocked`: blocked time outside CUDA calls (blocked inside a call is that call's wait:
//!   a blocking synchronisation, a driver lock);
//! - `cpu`: the wall time left;
//! - `cold_start`: the cold part of first calls in the group.

use ingero_ebpf::CudaOp;

use super::{CAUSE_KINDS, Cause, CauseKind, Culprit};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;
use crate::analyze::labels::ValueId;
use crate::analyze::query::{GroupRow, REQUEST_KEY, group_rows};
use crate::analyze::work_class::{CLASSES, WorkClass};
use ingero_trace::vocab::NVTX_LABEL;

/// An operation with fewer calls than this has no steady state to compare its first with.
pub const COLD_MIN_CALLS: u64 = 20;
/// A first call at least this many times its operation's median is cold...
pub const COLD_RATIO: f64 = 10.0;
/// ...when it is also at least this much slower.
pub const COLD_CALL_MIN_NS: u64 = 100_000;
/// Groupings with fewer groups than this have no peers to compare with.
pub const MIN_PEERS: usize = 3;

/// A first call of an operation in a process, far slower than the operation's median.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdCall {
    pub pid: u32,
    pub op: CudaOp,
    pub ts_ns: u64,
    pub duration_ns: u64,
    /// Its time above the operation's median.
    pub extra_ns: u64,
}

/// The groups of one label key (processes merged), sorted by start.
pub struct KeyRows {
    pub key: String,
    /// Whether its spans overlap (overlap semantics: an event can count in several groups).
    pub overlapping: bool,
    pub rows: Vec<GroupRow>,
}

/// The groups the loop rules look at: the iterations of the loop (steps, epochs, or the key
/// of `--by`), not requests.
pub struct LoopGroups<'c> {
    pub key: &'c str,
    pub rows: &'c [GroupRow],
}

/// What every rule may read.
pub struct Context<'a> {
    pub an: &'a Analysis,
    pub agg: &'a Aggregate,
    pub keys: Vec<KeyRows>,
    pub cold: Vec<ColdCall>,
    /// NVTX ranges (start, end, message), by start: where in a group its time went.
    nvtx: Vec<(u64, u64, ValueId)>,
}

impl<'a> Context<'a> {
    pub fn new(an: &'a Analysis, agg: &'a Aggregate) -> Context<'a> {
        let keys = agg
            .groupings
            .iter()
            // Single keys, processes merged: the per-process step grouping is the
            // stragglers' own.
            .filter(|g| g.keys.len() == 1 && !g.per_process)
            .map(|g| KeyRows {
                key: g.keys[0].clone(),
                overlapping: g.overlapping,
                rows: group_rows(an, &agg.names, g),
            })
            .collect();
        let mut nvtx: Vec<(u64, u64, ValueId)> = an
            .index
            .labels
            .intervals_by_value(NVTX_LABEL)
            .into_iter()
            .flat_map(|(v, list)| list.into_iter().map(move |(a, b)| (a, b, v)))
            .collect();
        nvtx.sort_unstable();
        Context {
            an,
            agg,
            keys,
            cold: cold_calls(agg),
            nvtx,
        }
    }

    /// The NVTX ranges that lie inside `[start, end]` (not those enclosing it: a `train_step`
    /// range says nothing about where a step's time went), their time by message, most first.
    pub fn nvtx_places(&self, start: u64, end: u64) -> Vec<(&str, u64)> {
        let from = self.nvtx.partition_point(|r| r.0 < start);
        let mut by: Vec<(ValueId, u64)> = Vec::new();
        for &(a, b, v) in self.nvtx[from..].iter().take_while(|r| r.0 < end) {
            if b > end || (a == start && b == end) {
                continue;
            }
            match by.iter_mut().find(|(x, _)| *x == v) {
                Some(e) => e.1 += b - a,
                None => by.push((v, b - a)),
            }
        }
        by.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        by.into_iter()
            .map(|(v, ns)| (self.an.index.labels.value(v), ns))
            .collect()
    }

    /// The first grouping that is a loop's iterations with enough groups to compare.
    pub fn loop_groups(&self) -> Option<LoopGroups<'_>> {
        self.keys
            .iter()
            .find(|k| k.key != REQUEST_KEY && k.rows.len() >= MIN_PEERS)
            .map(|k| LoopGroups {
                key: &k.key,
                rows: &k.rows,
            })
    }

    /// The cold part of the first calls inside a group's interval (of its process, when it
    /// is one process's), by the class of the call.
    pub fn cold_in(&self, row: &GroupRow) -> [u64; CLASSES] {
        let mut out = [0; CLASSES];
        for c in &self.cold {
            if row.pid.is_none_or(|p| p == c.pid) && row.start_ns <= c.ts_ns && c.ts_ns < row.end_ns
            {
                out[WorkClass::of(c.op).index()] += c.extra_ns;
            }
        }
        out
    }

    /// The group's wall time split into causes (indexed by [`CauseKind::index`]); see the
    /// module documentation.
    pub fn components(&self, row: &GroupRow) -> [u64; CAUSE_KINDS.len()] {
        let t = &row.totals;
        let cold = self.cold_in(row);
        let mut out = [0u64; CAUSE_KINDS.len()];
        for class in WorkClass::ALL {
            let i = class.index();
            let ns = t.class_ns[i]
                .saturating_sub(t.preempted_in_cuda_ns[i])
                .saturating_sub(cold[i]);
            out[cause_of(class).index()] += ns;
        }
        let preempted_inside: u64 = t.preempted_in_cuda_ns.iter().sum();
        let blocked_outside = t.blocked_ns.saturating_sub(t.blocked_in_cuda_ns);
        out[CauseKind::Preempted.index()] = t.preempted_ns;
        out[CauseKind::Blocked.index()] = blocked_outside;
        out[CauseKind::ColdStart.index()] = cold.iter().sum();
        out[CauseKind::Cpu.index()] = row
            .duration_ns
            .saturating_sub(t.api_time_ns)
            .saturating_sub(t.preempted_ns.saturating_sub(preempted_inside))
            .saturating_sub(blocked_outside);
        out
    }

    /// A cause of `ns` out of `total`, described from the group's counters.
    pub fn cause(&self, kind: CauseKind, ns: u64, total: u64, r: &GroupRow) -> Cause {
        let t = &r.totals;
        let calls = |c: WorkClass| t.class_calls[c.index()];
        let mut by = Vec::new();
        let detail = match kind {
            CauseKind::Blocked => "voluntarily off the CPU outside CUDA calls".to_owned(),
            CauseKind::Preempted => {
                by = self.culprits(&t.preempters);
                let who = by
                    .iter()
                    .take(3)
                    .map(|c| format!("{}[{}] {}", c.comm, c.tid, fmt::dur(c.ns)))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("runnable but another task had the CPU: {who}")
            }
            CauseKind::Sync => format!("{} synchronisation calls", calls(WorkClass::Sync)),
            CauseKind::Memcpy => {
                let b = &t.memcpy_bytes;
                format!(
                    "{} copies and memsets, {} synchronous ({}); {} host to device, {} device to host, {} device to device",
                    calls(WorkClass::Memcpy),
                    t.sync_copy_calls,
                    fmt::dur(t.sync_copy_ns),
                    fmt::bytes(b.h2d),
                    fmt::bytes(b.d2h),
                    fmt::bytes(b.d2d)
                )
            }
            CauseKind::Alloc => format!("{} malloc/free calls", calls(WorkClass::Alloc)),
            CauseKind::Launch => format!("{} launches", calls(WorkClass::Launch)),
            CauseKind::Nccl => format!(
                "{} NCCL calls, {} collectives moving {}",
                calls(WorkClass::Nccl),
                t.collectives,
                fmt::bytes(t.nccl_bytes)
            ),
            CauseKind::OtherCuda => format!("{} other CUDA calls", calls(WorkClass::Other)),
            CauseKind::Cpu => "on the CPU between CUDA calls".to_owned(),
            CauseKind::ColdStart => {
                let ops: Vec<&str> = self
                    .cold
                    .iter()
                    .filter(|c| {
                        r.pid.is_none_or(|p| p == c.pid)
                            && r.start_ns <= c.ts_ns
                            && c.ts_ns < r.end_ns
                    })
                    .map(|c| c.op.name())
                    .collect();
                format!("first calls of {}", ops.join(", "))
            }
        };
        Cause {
            cause: kind,
            ns,
            share: (ns as f64 / total.max(1) as f64).min(1.0),
            detail,
            by,
        }
    }

    /// Who ran instead, from a group's preempter list: by task, most first.
    pub fn culprits(&self, preempters: &[(u32, u64)]) -> Vec<Culprit> {
        culprits(self.agg, preempters)
    }
}

/// Who ran instead, from a preempter list (task ids of [`Aggregate::names`]): most first.
pub fn culprits(agg: &Aggregate, preempters: &[(u32, u64)]) -> Vec<Culprit> {
    let mut out: Vec<Culprit> = preempters
        .iter()
        .map(|(who, ns)| {
            let tid = agg.names.tid(*who);
            Culprit {
                comm: agg.names.get(*who).to_owned(),
                tid,
                // A traced process's main thread is the process.
                pid: agg.procs.contains_key(&tid).then_some(tid),
                ns: *ns,
            }
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.comm.cmp(&b.comm)));
    out
}

/// The cause a class of CUDA work is.
pub fn cause_of(class: WorkClass) -> CauseKind {
    match class {
        WorkClass::Sync => CauseKind::Sync,
        WorkClass::Memcpy => CauseKind::Memcpy,
        WorkClass::Alloc => CauseKind::Alloc,
        WorkClass::Launch => CauseKind::Launch,
        WorkClass::Nccl => CauseKind::Nccl,
        WorkClass::Other => CauseKind::OtherCuda,
    }
}

/// Every process's cold first calls, in time order.
fn cold_calls(agg: &Aggregate) -> Vec<ColdCall> {
    let mut out = Vec::new();
    for (pid, p) in &agg.procs {
        for (op, first) in &p.first_calls {
            let Some(stats) = agg.op(*op) else {
                continue;
            };
            if stats.count < COLD_MIN_CALLS {
                continue;
            }
            let p50 = stats.quantile(0.5).max(1);
            for (ts, d) in first {
                let extra = d.saturating_sub(p50);
                if *d as f64 >= COLD_RATIO * p50 as f64 && extra >= COLD_CALL_MIN_NS {
                    out.push(ColdCall {
                        pid: *pid,
                        op: *op,
                        ts_ns: *ts,
                        duration_ns: *d,
                        extra_ns: extra,
                    });
                }
            }
        }
    }
    out.sort_by_key(|c| (c.ts_ns, c.pid, c.op as u16));
    out
}
