//! Grouping by labels: [`GroupStats`] (what one group of events added up to) and [`Grouping`]
//! (the groups of one `--group-by KEY[,KEY]`, keyed by the label values the events carried).
//!
//! An event belongs to every combination of the values its keys had at its start: one per
//! key for instant labels, possibly several for overlapping spans (the overlap semantics of
//! `--by-request`). Events without a value for some key belong to no group of that grouping.

use ingero_ebpf::{CudaOp, OffCpuReason};
use serde::Serialize;

use super::labels::{KeyRef, LabelIndex, ValueId};
use crate::decode::{CudaArgs, MemcpyKind};
use crate::read::{CudaCallRecord, OffCpuRecord};
use crate::record::FastMap;

/// Whether an op waits for the device (its time is synchronisation wait).
pub fn is_sync(op: CudaOp) -> bool {
    matches!(
        op,
        CudaOp::StreamSynchronize | CudaOp::DeviceSynchronize | CudaOp::EventSynchronize
    )
}

/// Whether an op submits a kernel or graph.
pub fn is_launch(op: CudaOp) -> bool {
    matches!(
        op,
        CudaOp::LaunchKernel
            | CudaOp::LaunchKernelExC
            | CudaOp::LaunchCooperativeKernel
            | CudaOp::GraphLaunch
    )
}

/// Memcpy bytes by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemcpyBytes {
    pub h2d: u64,
    pub d2h: u64,
    pub d2d: u64,
    /// Host to host, default (unified addressing), unknown and peer copies.
    pub other: u64,
}

/// The slowest call of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slowest {
    pub op: CudaOp,
    pub ts_ns: u64,
    pub duration_ns: u64,
}

/// What a group of events added up to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub cuda_calls: u64,
    pub api_time_ns: u64,
    pub sync_time_ns: u64,
    pub memcpy_time_ns: u64,
    pub memcpy_bytes: MemcpyBytes,
    pub launches: u64,
    pub launch_time_ns: u64,
    pub errors: u64,
    pub off_cpu_ns: u64,
    pub preempted_ns: u64,
    pub blocked_ns: u64,
    /// Preempting task names (interned by the aggregator) and the time they took.
    pub preempters: Vec<(u32, u64)>,
    pub first_ns: u64,
    pub last_ns: u64,
    pub slowest: Option<Slowest>,
}

/// Keeps this many preempters per group (the rest are summed under the last).
const MAX_PREEMPTERS: usize = 16;

impl GroupStats {
    fn touch(&mut self, start: u64, end: u64) {
        if self.first_ns == 0 || start < self.first_ns {
            self.first_ns = start;
        }
        self.last_ns = self.last_ns.max(end);
    }

    pub fn add_cuda(&mut self, c: &CudaCallRecord) {
        let d = c.duration_ns;
        self.touch(c.ts_ns, c.ts_ns + d);
        self.cuda_calls += 1;
        self.api_time_ns += d;
        if c.ret != 0 {
            self.errors += 1;
        }
        if is_sync(c.op) {
            self.sync_time_ns += d;
        } else if is_launch(c.op) {
            self.launches += 1;
            self.launch_time_ns += d;
        }
        match c.args {
            CudaArgs::Memcpy { count, kind, .. } => {
                self.memcpy_time_ns += d;
                let slot = match kind {
                    MemcpyKind::HostToDevice => &mut self.memcpy_bytes.h2d,
                    MemcpyKind::DeviceToHost => &mut self.memcpy_bytes.d2h,
                    MemcpyKind::DeviceToDevice => &mut self.memcpy_bytes.d2d,
                    _ => &mut self.memcpy_bytes.other,
                };
                *slot += count;
            }
            CudaArgs::MemcpyPeer { count, .. } => {
                self.memcpy_time_ns += d;
                self.memcpy_bytes.other += count;
            }
            _ => {}
        }
        if self.slowest.is_none_or(|s| d > s.duration_ns) {
            self.slowest = Some(Slowest {
                op: c.op,
                ts_ns: c.ts_ns,
                duration_ns: d,
            });
        }
    }

    pub fn add_off_cpu(&mut self, o: &OffCpuRecord, preempter: u32) {
        self.touch(o.ts_ns, o.ts_ns + o.duration_ns);
        self.off_cpu_ns += o.duration_ns;
        match o.reason {
            OffCpuReason::Preempted => {
                self.preempted_ns += o.duration_ns;
                add_preempter(&mut self.preempters, preempter, o.duration_ns);
            }
            OffCpuReason::Blocked => self.blocked_ns += o.duration_ns,
        }
    }
}

/// Adds time to a bounded list of preempters.
pub fn add_preempter(list: &mut Vec<(u32, u64)>, who: u32, ns: u64) {
    if let Some(e) = list.iter_mut().find(|(w, _)| *w == who) {
        e.1 += ns;
    } else if list.len() < MAX_PREEMPTERS {
        list.push((who, ns));
    } else if let Some(last) = list.last_mut() {
        last.1 += ns;
    }
}

/// The groups of one `--group-by KEY[,KEY]`.
pub struct Grouping {
    pub keys: Vec<String>,
    /// Whether any key is a span key (overlap semantics apply).
    pub overlapping: bool,
    pub groups: FastMap<Vec<ValueId>, GroupStats>,
    /// Scratch: the values of each key for the current event.
    values: Vec<Vec<ValueId>>,
    combo: Vec<ValueId>,
}

impl Grouping {
    pub fn new(keys: Vec<String>, index: &LabelIndex) -> Grouping {
        let overlapping = keys.iter().any(|k| index.is_span_key(k));
        Grouping {
            values: vec![Vec::new(); keys.len()],
            keys,
            overlapping,
            groups: FastMap::default(),
            combo: Vec::new(),
        }
    }

    /// Calls `f` on every group the event of `pid` at `t` belongs to.
    pub fn for_each_group(
        &mut self,
        index: &LabelIndex,
        pid: u32,
        t: u64,
        mut f: impl FnMut(&mut GroupStats),
    ) {
        for (i, k) in self.keys.iter().enumerate() {
            self.values[i].clear();
            let Some(key) = index.key(k) else {
                return;
            };
            KeyRef::values_at(&key, pid, t, &mut self.values[i]);
            if self.values[i].is_empty() {
                return;
            }
        }
        // Cartesian product of the keys' values (almost always a single combination).
        let mut idx = vec![0usize; self.keys.len()];
        loop {
            self.combo.clear();
            self.combo
                .extend(idx.iter().enumerate().map(|(k, i)| self.values[k][*i]));
            match self.groups.get_mut(self.combo.as_slice()) {
                Some(g) => f(g),
                None => f(self.groups.entry(self.combo.clone()).or_default()),
            }
            let mut k = idx.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < self.values[k].len() {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
}
