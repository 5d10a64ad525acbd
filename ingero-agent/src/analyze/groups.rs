//! Grouping by labels: [`GroupStats`] (what one group of events added up to) and [`Grouping`]
//! (the groups of one `--group-by KEY[,KEY]`, keyed by the label values the events carried).
//!
//! An event belongs to every combination of the values its keys had at its start: one per
//! key for instant labels, possibly several for overlapping spans (the overlap semantics of
//! `--by-request`). Events without a value for some key belong to no group of that grouping.
//!
//! Processes: the pseudo key [`PID_KEY`] groups by the event's process. Without it, a
//! grouping made [`GroupSpec::per_process`] keeps the events of each process apart whenever
//! a value they carry is scoped to that process (two ranks' `step=7` are two groups), while
//! trace-wide values still make one group; otherwise processes are merged. A group's key is
//! the values of its keys in order (the pid itself for [`PID_KEY`]), then, per process, the
//! pid or [`MERGED`].

use ingero_ebpf::{CudaOp, OffCpuReason};
use serde::Serialize;

use super::labels::{LabelIndex, ValueId};
use super::resolve_cache::ResolveCache;
use super::work_class::{CLASSES, WorkClass, is_sync_copy};
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::{CudaArgs, MemcpyKind, call_failed};
use ingero_trace::model::{CudaCallRecord, OffCpuRecord};

/// Memcpy bytes by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemcpyBytes {
    pub h2d: u64,
    pub d2h: u64,
    pub d2d: u64,
    /// Host to host, default (unified addressing), unknown and peer copies.
    pub other: u64,
}

impl MemcpyBytes {
    /// The counter of a [`memcpy_bucket`].
    #[inline(always)]
    pub fn bucket_mut(&mut self, bucket: usize) -> &mut u64 {
        match bucket {
            0 => &mut self.h2d,
            1 => &mut self.d2h,
            2 => &mut self.d2d,
            _ => &mut self.other,
        }
    }
}

/// A call's copy, if it is one: the direction's bucket (0 host to device, 1 device to host,
/// 2 device to device, 3 the rest, peer copies included) and the bytes.
#[inline(always)]
pub fn memcpy_bucket(args: &CudaArgs) -> Option<(usize, u64)> {
    match *args {
        CudaArgs::Memcpy { count, kind, .. } => {
            let bucket = match kind {
                MemcpyKind::HostToDevice => 0,
                MemcpyKind::DeviceToHost => 1,
                MemcpyKind::DeviceToDevice => 2,
                _ => 3,
            };
            Some((bucket, count))
        }
        CudaArgs::MemcpyPeer { count, .. } => Some((3, count)),
        _ => None,
    }
}

/// The slowest call of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slowest {
    pub op: CudaOp,
    pub ts_ns: u64,
    pub duration_ns: u64,
}

/// What a group of events added up to.
///
/// Serialised, it is the counters of a query row (`query::GroupRow` flattens it, so their
/// order here is the output's); the rest is the aggregation's own (interned names, the raw
/// slowest call, first and last times), which the row shows resolved or not at all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
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
    /// Time in NCCL's calls (collectives, point-to-point, groups, communicators).
    pub nccl_time_ns: u64,
    /// NCCL collective calls.
    pub collectives: u64,
    /// Bytes NCCL's collectives and point-to-point calls moved per rank, as passed.
    pub nccl_bytes: u64,
    /// Preempting task names (interned by the aggregator) and the time they took.
    #[serde(skip)]
    pub preempters: Vec<(u32, u64)>,
    #[serde(skip)]
    pub first_ns: u64,
    #[serde(skip)]
    pub last_ns: u64,
    #[serde(skip)]
    pub slowest: Option<Slowest>,
    /// API time and calls by [`WorkClass`] (the causes `explain` splits time into).
    #[serde(skip)]
    pub class_ns: [u64; CLASSES],
    #[serde(skip)]
    pub class_calls: [u64; CLASSES],
    /// Synchronous copies and memsets (see [`is_sync_copy`]): time and calls.
    #[serde(skip)]
    pub sync_copy_ns: u64,
    #[serde(skip)]
    pub sync_copy_calls: u64,
    /// Off-CPU time that fell inside a CUDA call of the same thread: preempted, by the class
    /// of the call it interrupted, and blocked (the call's own wait: a blocking sync, a
    /// driver lock). Added by the scan when the call arrives (see `Scan::inner_off_cpu`).
    #[serde(skip)]
    pub preempted_in_cuda_ns: [u64; CLASSES],
    #[serde(skip)]
    pub blocked_in_cuda_ns: u64,
}

/// Keeps this many preempters per group (the rest are summed under the last).
const MAX_PREEMPTERS: usize = 16;

impl GroupStats {
    #[inline(always)]
    fn touch(&mut self, start: u64, end: u64) {
        if self.first_ns == 0 || start < self.first_ns {
            self.first_ns = start;
        }
        self.last_ns = self.last_ns.max(end);
    }

    #[inline(always)]
    pub fn add_cuda(&mut self, c: &CudaCallRecord) {
        let d = c.duration_ns;
        self.touch(c.ts_ns, c.ts_ns + d);
        self.cuda_calls += 1;
        self.api_time_ns += d;
        self.errors += u64::from(call_failed(c.op, c.ret));
        if c.op.is_sync() {
            self.sync_time_ns += d;
        } else if c.op.is_launch() {
            self.launches += 1;
            self.launch_time_ns += d;
        }
        let class = WorkClass::of(c.op).index();
        self.class_ns[class] += d;
        self.class_calls[class] += 1;
        if let Some((bucket, count)) = memcpy_bucket(&c.args) {
            self.memcpy_time_ns += d;
            *self.memcpy_bytes.bucket_mut(bucket) += count;
        }
        if is_sync_copy(&c.args) {
            self.sync_copy_ns += d;
            self.sync_copy_calls += 1;
        }
        if class == WorkClass::Nccl.index() {
            self.nccl_time_ns += d;
            self.collectives += u64::from(c.op.is_collective());
            self.nccl_bytes += c.args.nccl_bytes().unwrap_or(0);
        }
        if self.slowest.is_none_or(|s| d > s.duration_ns) {
            self.slowest = Some(Slowest {
                op: c.op,
                ts_ns: c.ts_ns,
                duration_ns: d,
            });
        }
    }

    /// Adds the calls summed in `run` (by [`Self::add_cuda`], none starting at 0) as if each
    /// were added here in turn: sums add, the earliest start and latest end hold, and the
    /// slowest stays the first of the longest.
    pub fn merge_cuda(&mut self, run: &GroupStats) {
        if run.cuda_calls == 0 {
            return;
        }
        self.touch(run.first_ns, run.last_ns);
        self.cuda_calls += run.cuda_calls;
        self.api_time_ns += run.api_time_ns;
        self.sync_time_ns += run.sync_time_ns;
        self.memcpy_time_ns += run.memcpy_time_ns;
        self.memcpy_bytes.h2d += run.memcpy_bytes.h2d;
        self.memcpy_bytes.d2h += run.memcpy_bytes.d2h;
        self.memcpy_bytes.d2d += run.memcpy_bytes.d2d;
        self.memcpy_bytes.other += run.memcpy_bytes.other;
        self.launches += run.launches;
        self.launch_time_ns += run.launch_time_ns;
        self.errors += run.errors;
        for i in 0..CLASSES {
            self.class_ns[i] += run.class_ns[i];
            self.class_calls[i] += run.class_calls[i];
        }
        self.sync_copy_ns += run.sync_copy_ns;
        self.sync_copy_calls += run.sync_copy_calls;
        self.nccl_time_ns += run.nccl_time_ns;
        self.collectives += run.collectives;
        self.nccl_bytes += run.nccl_bytes;
        if let Some(s) = run.slowest {
            if self.slowest.is_none_or(|m| s.duration_ns > m.duration_ns) {
                self.slowest = Some(s);
            }
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

impl GroupStats {
    /// Counts off-CPU time of a thread that fell inside one of its CUDA calls, of `class`.
    pub fn add_inner_off_cpu(&mut self, class: WorkClass, preempted_ns: u64, blocked_ns: u64) {
        self.preempted_in_cuda_ns[class.index()] += preempted_ns;
        self.blocked_in_cuda_ns += blocked_ns;
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

/// A value without a group yet (in `slot_of_value`).
const NO_SLOT: u32 = u32::MAX;

/// The pseudo key meaning "the event's process" (not a label: a label of that name cannot be
/// grouped by).
pub const PID_KEY: &str = "pid";

/// The process part of a per-process group's key when its values were trace-wide.
pub const MERGED: u32 = u32::MAX;

/// What one grouping groups by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    /// Label keys, and maybe [`PID_KEY`].
    pub keys: Vec<String>,
    /// Keep processes apart where their values are process-scoped (the default of
    /// `query --group-by`; `--merge-processes` turns it off).
    pub per_process: bool,
}

impl GroupSpec {
    /// A grouping by `keys` that merges processes.
    pub fn merged(keys: Vec<String>) -> GroupSpec {
        GroupSpec {
            keys,
            per_process: false,
        }
    }
}

/// The groups of one `--group-by KEY[,KEY]`.
pub struct Grouping {
    pub keys: Vec<String>,
    /// A process part ends each group's key (per process, and no [`PID_KEY`] among the keys).
    pub per_process: bool,
    /// Whether any key is a span key whose spans overlap (overlap semantics apply: an event
    /// can count in several groups).
    pub overlapping: bool,
    /// Filled by [`Grouping::finish`] once the scan is done.
    pub groups: FastMap<Vec<ValueId>, GroupStats>,
    /// During the scan: each group's values and stats, by slot, and the slot of each group.
    slots: Vec<(Vec<ValueId>, GroupStats)>,
    slot_of: FastMap<Vec<ValueId>, u32>,
    /// With a single key, the slot of each value by value id (`NO_SLOT`: none yet) instead of
    /// hashing one-value combinations; as long as the label index has values.
    slot_of_value: Vec<u32>,
    cache: ResolveCache,
    /// Scratch: the values of each key for the current event, a position in each, the
    /// current combination and the slots it resolved to.
    values: Vec<Vec<ValueId>>,
    idx: Vec<usize>,
    combo: Vec<ValueId>,
    resolved: Vec<u32>,
}

impl Grouping {
    pub fn new(spec: GroupSpec, index: &LabelIndex) -> Grouping {
        let GroupSpec { keys, per_process } = spec;
        let overlapping = keys.iter().any(|k| k != PID_KEY && index.spans_overlap(k));
        let per_process = per_process && !keys.iter().any(|k| k == PID_KEY);
        Grouping {
            values: vec![Vec::new(); keys.len()],
            idx: vec![0; keys.len()],
            keys,
            per_process,
            overlapping,
            groups: FastMap::default(),
            slots: Vec::new(),
            slot_of: FastMap::default(),
            slot_of_value: Vec::new(),
            cache: ResolveCache::default(),
            combo: Vec::new(),
            resolved: Vec::new(),
        }
    }

    /// Calls `f` on every group the event of `pid` at `t` belongs to.
    #[inline]
    pub fn for_each_group(
        &mut self,
        index: &LabelIndex,
        pid: u32,
        t: u64,
        mut f: impl FnMut(&mut GroupStats),
    ) {
        if self.cache.get(pid, t).is_none() {
            self.refresh(index, pid, t);
        }
        for s in self.cache.current() {
            if let Some((_, g)) = self.slots.get_mut(*s as usize) {
                f(g);
            }
        }
    }

    /// Looks the event up in the label index and remembers the answer for the next ones.
    #[inline(never)]
    fn refresh(&mut self, index: &LabelIndex, pid: u32, t: u64) {
        let end = self.resolve(index, pid, t);
        self.cache.put(pid, t, end, &self.resolved);
    }

    /// Looks up the groups of an event of `pid` at `t` into `resolved` (creating groups seen
    /// for the first time); returns until when that answer holds.
    pub(super) fn resolve(&mut self, index: &LabelIndex, pid: u32, t: u64) -> u64 {
        self.resolved.clear();
        let mut end = u64::MAX;
        let mut scoped = false;
        for (i, k) in self.keys.iter().enumerate() {
            self.values[i].clear();
            if k == PID_KEY {
                self.values[i].push(pid);
                continue;
            }
            let Some(key) = index.key(k) else {
                return end;
            };
            let (until, own) = key.values_until_scoped(pid, t, &mut self.values[i]);
            end = end.min(until);
            scoped |= own;
            if self.values[i].is_empty() {
                return end;
            }
        }
        // The process part of the key, when there is one.
        let process = match (self.per_process, scoped) {
            (false, _) => None,
            (true, true) => Some(pid),
            (true, false) => Some(MERGED),
        };
        if let ([one], [key], None | Some(MERGED)) =
            (self.values.as_slice(), self.keys.as_slice(), process)
        {
            if key == PID_KEY {
                return self.resolve_combos(process, end);
            }
            for v in one {
                let i = *v as usize;
                if self.slot_of_value.len() <= i {
                    self.slot_of_value.resize(i + 1, NO_SLOT);
                }
                let mut slot = self.slot_of_value[i];
                if slot == NO_SLOT {
                    slot = self.slots.len() as u32;
                    let mut values = vec![*v];
                    values.extend(process);
                    self.slots.push((values, GroupStats::default()));
                    self.slot_of_value[i] = slot;
                }
                self.resolved.push(slot);
            }
            return end;
        }
        self.resolve_combos(process, end)
    }

    /// The general case of [`Self::resolve`]: every combination of the keys' values (almost
    /// always a single one), with the process part; returns `end`.
    fn resolve_combos(&mut self, process: Option<u32>, end: u64) -> u64 {
        self.idx.iter_mut().for_each(|i| *i = 0);
        loop {
            self.combo.clear();
            self.combo
                .extend(self.idx.iter().enumerate().map(|(k, i)| self.values[k][*i]));
            self.combo.extend(process);
            let slot = match self.slot_of.get(self.combo.as_slice()) {
                Some(s) => *s,
                None => {
                    let s = self.slots.len() as u32;
                    self.slots.push((self.combo.clone(), GroupStats::default()));
                    self.slot_of.insert(self.combo.clone(), s);
                    s
                }
            };
            self.resolved.push(slot);
            let mut k = self.idx.len();
            loop {
                if k == 0 {
                    return end;
                }
                k -= 1;
                self.idx[k] += 1;
                if self.idx[k] < self.values[k].len() {
                    break;
                }
                self.idx[k] = 0;
            }
        }
    }

    /// The slots the last [`Self::resolve`] found.
    pub(super) fn resolved(&self) -> &[u32] {
        &self.resolved
    }

    /// The stats of a group by slot (during the scan).
    #[inline]
    pub(super) fn slot_stats(&mut self, slot: u32) -> Option<&mut GroupStats> {
        self.slots.get_mut(slot as usize).map(|(_, g)| g)
    }

    /// The process a group's key names: its [`PID_KEY`] value or its process part (`None`
    /// for a group that merges processes).
    pub fn process_of(&self, values: &[ValueId]) -> Option<u32> {
        if let Some(i) = self.keys.iter().position(|k| k == PID_KEY) {
            return values.get(i).copied();
        }
        if !self.per_process {
            return None;
        }
        values
            .get(self.keys.len())
            .copied()
            .filter(|p| *p != MERGED)
    }

    /// Moves the groups gathered during the scan into [`Grouping::groups`].
    pub fn finish(&mut self) {
        self.slot_of = FastMap::default();
        self.slot_of_value = Vec::new();
        self.groups.extend(self.slots.drain(..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::labels::test_records::{span, state};

    fn index() -> LabelIndex {
        let mut ix = LabelIndex::default();
        let step = |pid, v, start, end| state(pid, "step", v, start, end);
        ix.add_state(&step(Some(7), "1", 10, 20));
        ix.add_state(&step(Some(7), "2", 20, 30));
        ix.add_state(&step(None, "g", 0, 50));
        for (pid, v, a, b) in [(Some(7), "r1", 15, 25), (None, "r2", 22, 40)] {
            ix.add_span(&span(pid, v, a, b));
        }
        ix.seal();
        ix
    }

    /// Events per group as an uncached lookup sees them.
    fn expected(ix: &LabelIndex, keys: &[&str], events: &[(u32, u64)]) -> Vec<(Vec<String>, u64)> {
        let mut out: FastMap<Vec<String>, u64> = FastMap::default();
        for (pid, t) in events {
            let mut combos: Vec<Vec<String>> = vec![Vec::new()];
            for k in keys {
                let mut vals = Vec::new();
                if let Some(key) = ix.key(k) {
                    key.values_at(*pid, *t, &mut vals);
                }
                combos = combos
                    .iter()
                    .flat_map(|c| {
                        vals.iter().map(move |v| {
                            let mut c = c.clone();
                            c.push(ix.value(*v).to_owned());
                            c
                        })
                    })
                    .collect();
            }
            for c in combos {
                *out.entry(c).or_default() += 1;
            }
        }
        let mut v: Vec<_> = out.into_iter().collect();
        v.sort();
        v
    }

    fn grouped(ix: &LabelIndex, keys: &[&str], events: &[(u32, u64)]) -> Vec<(Vec<String>, u64)> {
        let spec = GroupSpec::merged(keys.iter().map(|k| (*k).to_owned()).collect());
        by_process(ix, spec, events)
            .into_iter()
            .map(|(labels, _, n)| (labels, n))
            .collect()
    }

    #[test]
    fn cached_lookups_match_fresh_ones() {
        let ix = index();
        let mut events: Vec<(u32, u64)> = Vec::new();
        // In order across label boundaries, two processes interleaved, then late
        // (out-of-order) events from before the last answer, and instants at the very ends.
        for t in 0..60 {
            events.push((7, t));
            events.push((8, t));
        }
        events.extend([
            (7, 19),
            (7, 20),
            (7, 12),
            (7, 30),
            (7, 29),
            (8, 25),
            (7, 25),
            (7, 40),
        ]);
        events.extend([(7, 41), (9, 0), (7, u64::MAX), (7, 0)]);
        for keys in [
            &["step"][..],
            &["request_id"],
            &["step", "request_id"],
            &["nope"],
        ] {
            assert_eq!(
                grouped(&ix, keys, &events),
                expected(&ix, keys, &events),
                "grouping by {keys:?}"
            );
        }
    }

    /// Groups of `spec` as (label values, process) with their event counts.
    fn by_process(
        ix: &LabelIndex,
        spec: GroupSpec,
        events: &[(u32, u64)],
    ) -> Vec<(Vec<String>, Option<u32>, u64)> {
        let mut g = Grouping::new(spec, ix);
        for (pid, t) in events {
            g.for_each_group(ix, *pid, *t, |s| s.cuda_calls += 1);
        }
        g.finish();
        let mut v: Vec<_> = g
            .groups
            .iter()
            .map(|(k, s)| {
                let labels = g
                    .keys
                    .iter()
                    .zip(k)
                    .map(|(key, v)| match key.as_str() {
                        PID_KEY => format!("pid {v}"),
                        _ => ix.value(*v).to_owned(),
                    })
                    .collect();
                (labels, g.process_of(k), s.cuda_calls)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn process_scoped_values_split_by_process_and_pid_is_a_key() {
        let mut ix = LabelIndex::default();
        ix.add_state(&state(Some(7), "step", "1", 0, 10));
        ix.add_state(&state(Some(8), "step", "1", 0, 10));
        ix.add_state(&state(None, "step", "g", 10, 20));
        ix.add_state(&state(Some(7), "rank", "0", 0, 20));
        ix.add_state(&state(Some(8), "rank", "1", 0, 20));
        ix.seal();
        let events = [(7, 1), (8, 2), (8, 3), (7, 11), (8, 12)];
        let spec = |keys: &[&str], per_process| GroupSpec {
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            per_process,
        };
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            by_process(&ix, spec(&["step"], true), &events),
            [
                (s(&["1"]), Some(7), 1),
                (s(&["1"]), Some(8), 2),
                (s(&["g"]), None, 2),
            ],
            "own values per process, the trace-wide one merged"
        );
        assert_eq!(
            by_process(&ix, spec(&["step"], false), &events),
            [(s(&["1"]), None, 3), (s(&["g"]), None, 2)]
        );
        assert_eq!(
            by_process(&ix, spec(&["step", "pid"], true), &events),
            [
                (s(&["1", "pid 7"]), Some(7), 1),
                (s(&["1", "pid 8"]), Some(8), 2),
                (s(&["g", "pid 7"]), Some(7), 1),
                (s(&["g", "pid 8"]), Some(8), 1),
            ],
            "the pid key splits trace-wide values too"
        );
        assert_eq!(
            by_process(&ix, spec(&["rank"], false), &events),
            [(s(&["0"]), None, 2), (s(&["1"]), None, 3)]
        );
        assert_eq!(
            by_process(&ix, spec(&["pid"], true), &events).len(),
            2,
            "pid alone"
        );
        // Context: a merged group names only what its processes agree on.
        assert!(ix.context_at(1, &[]).iter().all(|(k, _)| *k != "rank"));
        assert!(ix.context_of(8, 1, &[]).contains(&("rank", "1")));
        assert_eq!(ix.process_value("rank", 7), Some("0"));
        assert_eq!(ix.process_value("rank", 9), None);
    }
}
