//! [`Routes`]: where each process's events go (the whole selection and the label groups they
//! belong to, over all groupings at once) and a running sum of the calls on the current route.
//!
//! Labels change far more slowly than events, and consecutive events mostly come from one
//! process, so a run of calls shares one route: the calls are summed once into the run and
//! the run is merged into each of the route's groups when the route (or the process) changes,
//! instead of each call being added to every group. Runs are merged in the order they ended
//! and hold consecutive events only, so every sum, first/last time and slowest call comes out
//! as adding the calls one by one would give; calls and off-CPU intervals starting at 0 (where
//! [`GroupStats`]'s "unset" first time makes the order matter) end the run first.

use ingero_ebpf::CudaOp;

use super::groups::{GroupStats, Grouping, MemcpyBytes, Slowest, memcpy_bucket};
use super::labels::LabelIndex;
use super::pid_slots::PidSlots;
use super::work_class::{CLASSES, WorkClass, is_sync_copy};
use ingero_trace::model::{CudaCallRecord, OffCpuRecord, call_failed};

/// A group an event is added to: the whole selection, or a slot of one grouping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Total,
    Group { grouping: u32, slot: u32 },
}

/// One process's groups, valid for its events in `[start, end)`.
struct Route {
    start: u64,
    end: u64,
    targets: Vec<Target>,
}

impl Route {
    #[inline]
    fn covers(&self, t: u64) -> bool {
        self.start <= t && t < self.end
    }
}

/// Where the events go, with the run of calls not yet merged.
pub struct Routes {
    /// Whether the whole selection is a target too.
    total: bool,
    slots: PidSlots,
    routes: Vec<Route>,
    /// The route of the pending run (`NONE`: no run), its process and the times it covers
    /// (`[1, 0)` without a run).
    owner: usize,
    owner_pid: u32,
    start: u64,
    end: u64,
    run: Run,
}

/// The calls of a run added up: what [`GroupStats::add_cuda`] keeps, in less work per call.
/// A run starts with a call and later ones start no earlier (see [`Routes::add_cuda`]), so
/// the first start is the first call's; the slowest is the first of the longest.
#[derive(Clone, Copy)]
struct Run {
    calls: u64,
    api_ns: u64,
    sync_ns: u64,
    memcpy_ns: u64,
    /// Host to device, device to host, device to device, other.
    bytes: [u64; 4],
    launches: u64,
    launch_ns: u64,
    errors: u64,
    first_ns: u64,
    last_ns: u64,
    slowest: Slowest,
    class_ns: [u64; CLASSES],
    class_calls: [u64; CLASSES],
    sync_copy_ns: u64,
    sync_copy_calls: u64,
    nccl_ns: u64,
    collectives: u64,
    nccl_bytes: u64,
}

impl Run {
    fn start(c: &CudaCallRecord) -> Run {
        let mut r = Run {
            first_ns: c.ts_ns,
            slowest: Slowest {
                op: c.op,
                ts_ns: c.ts_ns,
                duration_ns: c.duration_ns,
            },
            ..NO_RUN
        };
        r.add(c);
        r
    }

    #[inline(always)]
    fn add(&mut self, c: &CudaCallRecord) {
        let d = c.duration_ns;
        self.calls += 1;
        self.api_ns += d;
        self.errors += u64::from(call_failed(c.op, c.ret));
        self.last_ns = self.last_ns.max(c.ts_ns + d);
        // Masks rather than branches: launches and synchronisations interleave.
        let sync = u64::from(c.op.is_sync());
        let launch = u64::from(c.op.is_launch());
        self.sync_ns += d & sync.wrapping_neg();
        self.launches += launch;
        self.launch_ns += d & launch.wrapping_neg();
        let class = WorkClass::of(c.op).index();
        self.class_ns[class] += d;
        self.class_calls[class] += 1;
        if let Some((bucket, count)) = memcpy_bucket(&c.args) {
            self.memcpy_ns += d;
            self.bytes[bucket] += count;
        }
        if is_sync_copy(&c.args) {
            self.sync_copy_ns += d;
            self.sync_copy_calls += 1;
        }
        if class == WorkClass::Nccl.index() {
            self.nccl_ns += d;
            self.collectives += u64::from(c.op.is_collective());
            self.nccl_bytes += c.args.nccl_bytes().unwrap_or(0);
        }
        if d > self.slowest.duration_ns {
            self.slowest = Slowest {
                op: c.op,
                ts_ns: c.ts_ns,
                duration_ns: d,
            };
        }
    }

    /// The run as group stats, to merge.
    fn stats(&self) -> GroupStats {
        GroupStats {
            cuda_calls: self.calls,
            api_time_ns: self.api_ns,
            sync_time_ns: self.sync_ns,
            memcpy_time_ns: self.memcpy_ns,
            memcpy_bytes: MemcpyBytes {
                h2d: self.bytes[0],
                d2h: self.bytes[1],
                d2d: self.bytes[2],
                other: self.bytes[3],
            },
            launches: self.launches,
            launch_time_ns: self.launch_ns,
            errors: self.errors,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            slowest: Some(self.slowest),
            class_ns: self.class_ns,
            class_calls: self.class_calls,
            sync_copy_ns: self.sync_copy_ns,
            sync_copy_calls: self.sync_copy_calls,
            nccl_time_ns: self.nccl_ns,
            collectives: self.collectives,
            nccl_bytes: self.nccl_bytes,
            ..GroupStats::default()
        }
    }
}

/// An empty run (never merged: `owner` is `NONE` while it is in place).
const NO_RUN: Run = Run {
    calls: 0,
    api_ns: 0,
    sync_ns: 0,
    memcpy_ns: 0,
    bytes: [0; 4],
    launches: 0,
    launch_ns: 0,
    errors: 0,
    first_ns: 0,
    last_ns: 0,
    slowest: Slowest {
        op: CudaOp::LaunchKernel,
        ts_ns: 0,
        duration_ns: 0,
    },
    class_ns: [0; CLASSES],
    class_calls: [0; CLASSES],
    sync_copy_ns: 0,
    sync_copy_calls: 0,
    nccl_ns: 0,
    collectives: 0,
    nccl_bytes: 0,
};

const NONE: usize = usize::MAX;

/// The groups an event is counted into: the whole selection and every grouping's groups.
pub struct Sinks<'a> {
    pub index: &'a LabelIndex,
    pub groupings: &'a mut [Grouping],
    pub total: &'a mut GroupStats,
}

impl Sinks<'_> {
    fn stats(&mut self, t: Target) -> Option<&mut GroupStats> {
        match t {
            Target::Total => Some(&mut *self.total),
            Target::Group { grouping, slot } => self
                .groupings
                .get_mut(grouping as usize)
                .and_then(|g| g.slot_stats(slot)),
        }
    }
}

impl Routes {
    /// Routes to every grouping's groups, and to the total when `total`.
    pub fn new(total: bool) -> Routes {
        Routes {
            total,
            slots: PidSlots::default(),
            routes: Vec::new(),
            owner: NONE,
            owner_pid: 0,
            start: 1,
            end: 0,
            run: NO_RUN,
        }
    }

    /// Counts a call into its groups; `sinks` gives them when the call leaves the run (made
    /// only then: most calls touch nothing but the run).
    #[inline(always)]
    pub fn add_cuda<'s>(&mut self, c: &CudaCallRecord, sinks: impl FnOnce() -> Sinks<'s>) {
        // `start` is never 0 (see `add_cuda_slow`), so a call at 0 misses.
        if self.owner_pid == c.thread.pid && self.start <= c.ts_ns && c.ts_ns < self.end {
            self.run.add(c);
            return;
        }
        self.add_cuda_slow(&mut sinks(), c);
    }

    /// A call of another process, past its route's labels, or at 0.
    #[inline(never)]
    fn add_cuda_slow(&mut self, sinks: &mut Sinks<'_>, c: &CudaCallRecord) {
        self.flush(sinks);
        let r = self.route(sinks, c.thread.pid, c.ts_ns);
        if c.ts_ns == 0 {
            if let Some(route) = self.routes.get(r) {
                for t in &route.targets {
                    if let Some(s) = sinks.stats(*t) {
                        s.add_cuda(c);
                    }
                }
            }
            return;
        }
        if let Some(route) = self.routes.get(r) {
            self.owner = r;
            self.owner_pid = c.thread.pid;
            // The run starts here: earlier (late-arriving) calls of the process miss.
            self.start = c.ts_ns;
            self.end = route.end;
            self.run = Run::start(c);
        }
    }

    /// Counts an off-CPU interval into its groups (directly: off-CPU time is not summed in
    /// runs, so preempter lists fill in event order).
    pub fn add_off_cpu(&mut self, sinks: &mut Sinks<'_>, o: &OffCpuRecord, who: u32) {
        if o.ts_ns == 0 {
            self.flush(sinks);
        }
        let r = self.route(sinks, o.thread.pid, o.ts_ns);
        if let Some(route) = self.routes.get(r) {
            for t in &route.targets {
                if let Some(s) = sinks.stats(*t) {
                    s.add_off_cpu(o, who);
                }
            }
        }
    }

    /// Counts off-CPU time found inside a call (after the call itself was counted) into the
    /// call's groups.
    pub fn add_inner_off_cpu(
        &mut self,
        sinks: &mut Sinks<'_>,
        c: &CudaCallRecord,
        preempted_ns: u64,
        blocked_ns: u64,
    ) {
        let class = WorkClass::of(c.op);
        let r = self.route(sinks, c.thread.pid, c.ts_ns);
        if let Some(route) = self.routes.get(r) {
            for t in &route.targets {
                if let Some(s) = sinks.stats(*t) {
                    s.add_inner_off_cpu(class, preempted_ns, blocked_ns);
                }
            }
        }
    }

    /// Merges the pending run; call once the scan is done.
    pub fn finish(&mut self, sinks: &mut Sinks<'_>) {
        self.flush(sinks);
    }

    /// Merges the pending run into its route's groups and closes it.
    fn flush(&mut self, sinks: &mut Sinks<'_>) {
        if self.owner == NONE {
            return;
        }
        if let Some(route) = self.routes.get(self.owner) {
            let run = self.run.stats();
            for t in &route.targets {
                if let Some(s) = sinks.stats(*t) {
                    s.merge_cuda(&run);
                }
            }
        }
        self.owner = NONE;
        self.start = 1;
        self.end = 0;
        self.run = NO_RUN;
    }

    /// The route of `pid` at `t`, looked up again when its last one does not cover `t` (after
    /// merging the run, should it be on that route).
    fn route(&mut self, sinks: &mut Sinks<'_>, pid: u32, t: u64) -> usize {
        let routes = &mut self.routes;
        let r = self.slots.slot(pid, || {
            routes.push(Route {
                start: 1,
                end: 0,
                targets: Vec::new(),
            })
        });
        if self.routes.get(r).is_some_and(|route| route.covers(t)) {
            return r;
        }
        if r == self.owner {
            self.flush(sinks);
        }
        if let Some(route) = self.routes.get_mut(r) {
            route.targets.clear();
            route.start = t;
            route.end = u64::MAX;
            if self.total {
                route.targets.push(Target::Total);
            }
            for (i, g) in sinks.groupings.iter_mut().enumerate() {
                route.end = route.end.min(g.resolve(sinks.index, pid, t));
                route
                    .targets
                    .extend(g.resolved().iter().map(|slot| Target::Group {
                        grouping: i as u32,
                        slot: *slot,
                    }));
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ingero_ebpf::{CudaOp, OffCpuReason};

    use super::*;
    use crate::analyze::groups::GroupSpec;
    use crate::analyze::labels::test_records::state;
    use ingero_trace::fast_map::FastMap;
    use ingero_trace::model::ThreadRef;
    use ingero_trace::model::{CudaArgs, MemcpyKind};

    fn index() -> LabelIndex {
        let mut ix = LabelIndex::default();
        let step = |pid, v, start, end| state(pid, "step", v, start, end);
        ix.add_state(&step(Some(7), "1", 0, 20));
        ix.add_state(&step(Some(7), "2", 20, 40));
        ix.add_state(&step(None, "g", 10, 60));
        ix.seal();
        ix
    }

    enum Ev {
        Cuda(CudaCallRecord),
        Off(OffCpuRecord, u32),
    }

    fn thread(pid: u32) -> ThreadRef {
        ThreadRef {
            pid,
            tid: pid,
            name: Arc::from("t"),
        }
    }

    /// Calls of two processes (runs, interleaved, late, at 0, equal durations) and off-CPU
    /// intervals between them.
    fn events() -> Vec<Ev> {
        let mut out = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..400u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pid = if (i / 7) % 3 == 0 { 8 } else { 7 };
            let ts = match i {
                50 | 51 | 300 => 0,
                _ if i.is_multiple_of(41) => (i / 8).saturating_sub(9),
                _ => i / 6,
            };
            if i.is_multiple_of(29) {
                let reason = if i.is_multiple_of(2) {
                    OffCpuReason::Preempted
                } else {
                    OffCpuReason::Blocked
                };
                let o = OffCpuRecord {
                    ts_ns: if i == 58 { 0 } else { ts },
                    duration_ns: x % 5,
                    thread: thread(pid),
                    reason,
                    prev_state: 0,
                    next_tid: 1,
                    next_comm: String::new(),
                    cpu: 0,
                    cgroup_id: 0,
                    clamped_from_ns: None,
                };
                out.push(Ev::Off(o, (x % 20) as u32));
            }
            let (op, args) = match x % 4 {
                0 => (
                    CudaOp::StreamSynchronize,
                    CudaArgs::Sync {
                        stream: None,
                        event: None,
                    },
                ),
                1 => (
                    CudaOp::MemcpyAsync,
                    CudaArgs::Memcpy {
                        count: x % 1000,
                        kind: MemcpyKind::HostToDevice,
                        stream: None,
                        width_height: None,
                        host_ptr: None,
                    },
                ),
                _ => (
                    CudaOp::DeviceSynchronize,
                    CudaArgs::Sync {
                        stream: None,
                        event: None,
                    },
                ),
            };
            out.push(Ev::Cuda(CudaCallRecord {
                detail: Default::default(),
                ts_ns: ts,
                duration_ns: x % 6,
                thread: thread(pid),
                op,
                ret: i32::from(x.is_multiple_of(9)),
                args,
                clamped_from_ns: None,
                cpu: 0,
                cgroup_id: 0,
            }));
        }
        out
    }

    type Groups = Vec<(Vec<u32>, GroupStats)>;

    fn sorted(g: &mut Grouping) -> Groups {
        g.finish();
        let mut v: Groups = g
            .groups
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    #[test]
    fn runs_merge_into_what_adding_each_event_gives() {
        let ix = index();
        let events = events();
        // Each event added to each of its groups in turn.
        let mut direct = Grouping::new(GroupSpec::merged(vec!["step".into()]), &ix);
        let mut direct_total = GroupStats::default();
        for e in &events {
            match e {
                Ev::Cuda(c) => {
                    direct_total.add_cuda(c);
                    direct.for_each_group(&ix, c.thread.pid, c.ts_ns, |s| s.add_cuda(c));
                }
                Ev::Off(o, who) => {
                    direct_total.add_off_cpu(o, *who);
                    direct.for_each_group(&ix, o.thread.pid, o.ts_ns, |s| s.add_off_cpu(o, *who));
                }
            }
        }
        let mut groupings = vec![Grouping::new(GroupSpec::merged(vec!["step".into()]), &ix)];
        let mut total = GroupStats::default();
        let mut routes = Routes::new(true);
        let mut sinks = Sinks {
            index: &ix,
            groupings: &mut groupings,
            total: &mut total,
        };
        for e in &events {
            match e {
                Ev::Cuda(c) => routes.add_cuda(c, || Sinks {
                    index: sinks.index,
                    groupings: &mut *sinks.groupings,
                    total: &mut *sinks.total,
                }),
                Ev::Off(o, who) => routes.add_off_cpu(&mut sinks, o, *who),
            }
        }
        routes.finish(&mut sinks);
        assert_eq!(total, direct_total);
        let got = sorted(&mut groupings[0]);
        assert_eq!(got, sorted(&mut direct));
        assert_eq!(got.len(), 3, "steps 1, 2 and the trace-wide g");
        let by_value: FastMap<Vec<u32>, u64> =
            got.iter().map(|(k, s)| (k.clone(), s.cuda_calls)).collect();
        assert!(by_value.values().all(|n| *n > 0));
    }
}
