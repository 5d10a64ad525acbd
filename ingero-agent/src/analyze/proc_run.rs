//! [`ProcRun`]: consecutive calls of one process inside one activity bin, summed (count, API
//! time, last end) and added to the process's [`ProcStats`] and bins when the run
//! ends, instead of each call updating both.
//!
//! A call joins the run only when nothing else about it needs the process's state: it
//! succeeded, neither allocates nor frees (device or pinned memory), is no async copy with a
//! host pointer, its op has all its first calls, its thread's name
//! needs no check, and it lies inside the run's bin. Any other call ends the run and goes
//! through [`ProcStats::add`] as before; the sums are order-free (counts, totals, the latest
//! end), and a call joins only if it starts no earlier than the call before the run (already
//! counted, so the process's first start stays), so the result is the same.

use std::sync::Arc;

use super::activity::{Activity, ProcBins};
use super::pinned::concerns_pinned;
use super::processes::{OpBits, ProcStats};
use ingero_trace::model::CudaArgs;
use ingero_trace::model::CudaCallRecord;

/// The calls summed so far and what lets the next one join.
pub struct ProcRun {
    pid: u32,
    slot: usize,
    /// The activity bin, from the start of the call before the run (`start`) to the end of
    /// the bin (`[1, 0)`: no run).
    bin: usize,
    start: u64,
    hi: u64,
    /// The process's state when the run began (it changes only through `ProcStats::add`,
    /// which ends the run first).
    name_empty: bool,
    name_seen: usize,
    first_calls_full: OpBits,
    calls: u64,
    api_ns: u64,
    last_ns: u64,
}

/// The address of a shared name, to compare with the one the process last checked.
fn name_addr(name: &Arc<str>) -> usize {
    Arc::as_ptr(name) as *const u8 as usize
}

impl Default for ProcRun {
    fn default() -> ProcRun {
        ProcRun {
            pid: 0,
            slot: 0,
            bin: 0,
            start: 1,
            hi: 0,
            name_empty: true,
            name_seen: 0,
            first_calls_full: OpBits::default(),
            calls: 0,
            api_ns: 0,
            last_ns: 0,
        }
    }
}

impl ProcRun {
    /// Sums `c` into the run if it can join it; false: the caller ends the run.
    #[inline(always)]
    pub fn add(&mut self, c: &CudaCallRecord) -> bool {
        let end = c.ts_ns + c.duration_ns;
        let joins = c.thread.pid == self.pid
            && self.start <= c.ts_ns
            && end < self.hi
            && c.ret == 0
            && self.first_calls_full.has(c.op)
            && !matches!(c.args, CudaArgs::Alloc { .. } | CudaArgs::Free { .. })
            && !c.args.is_by_handle()
            && !concerns_pinned(&c.args)
            && !((self.name_empty || c.thread.pid == c.thread.tid)
                && name_addr(&c.thread.name) != self.name_seen);
        if joins {
            self.calls += 1;
            self.api_ns += c.duration_ns;
            self.last_ns = self.last_ns.max(end);
        }
        joins
    }

    /// Adds the run to its process and closes it.
    pub fn finish(&mut self, procs: &mut [(ProcStats, ProcBins)]) {
        if self.calls > 0
            && let Some((stats, bins)) = procs.get_mut(self.slot)
        {
            stats.add_run(self.calls, self.api_ns, self.last_ns);
            if let Some(ns) = bins.api_ns.get_mut(self.bin) {
                *ns += self.api_ns;
            }
        }
        *self = ProcRun::default();
    }

    /// Starts a run for the process in `slot` after its call at `t` (not in the run).
    pub fn open(
        &mut self,
        pid: u32,
        slot: usize,
        stats: &ProcStats,
        activity: &mut Activity,
        t: u64,
    ) {
        let (_, hi, bin) = activity.bounds_near(t);
        let (name_empty, name_seen, first_calls_full) = stats.run_view();
        *self = ProcRun {
            pid,
            slot,
            bin,
            start: t,
            hi,
            name_empty,
            name_seen: name_seen.map_or(0, name_addr),
            first_calls_full,
            ..ProcRun::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use ingero_ebpf::CudaOp;

    use super::*;
    use ingero_trace::model::ThreadRef;

    /// Calls of two processes and their threads: plain launches, allocations, frees, failures,
    /// a renamed main thread, late calls and calls across bin edges.
    fn calls() -> Vec<CudaCallRecord> {
        let names: [Arc<str>; 3] = [Arc::from("main"), Arc::from("worker"), Arc::from("renamed")];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..3000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let pid = if (i / 50) % 4 == 3 { 20 } else { 10 };
                let tid = pid + (x % 2) as u32;
                let name = match (tid == pid, i > 1500) {
                    (true, false) => &names[0],
                    (true, true) => &names[2],
                    _ => &names[1],
                };
                let (op, args) = match x % 40 {
                    0 => (
                        CudaOp::Malloc,
                        CudaArgs::Alloc {
                            size: x % 4096,
                            ptr: Some(x % 64),
                            stream: None,
                        },
                    ),
                    1 => (
                        CudaOp::Free,
                        CudaArgs::Free {
                            ptr: x % 64,
                            size: None,
                            stream: None,
                        },
                    ),
                    _ => (
                        CudaOp::StreamSynchronize,
                        CudaArgs::Sync {
                            stream: None,
                            event: None,
                        },
                    ),
                };
                let ts = if i.is_multiple_of(97) {
                    i * 10 - i.min(300)
                } else {
                    i * 10
                };
                CudaCallRecord {
                    detail: Default::default(),
                    ts_ns: ts,
                    duration_ns: x % 40,
                    thread: ThreadRef {
                        pid,
                        tid,
                        name: Arc::clone(name),
                    },
                    op,
                    ret: i32::from(x.is_multiple_of(53)),
                    args,
                    clamped_from_ns: None,
                    cpu: 0,
                    cgroup_id: 0,
                }
            })
            .collect()
    }

    fn slot(pid: u32) -> usize {
        usize::from(pid == 20)
    }

    #[test]
    fn runs_add_up_to_adding_each_call() {
        let calls = calls();
        let new = || -> Vec<(ProcStats, ProcBins)> {
            (0..2)
                .map(|_| (ProcStats::default(), ProcBins::new()))
                .collect()
        };
        let mut direct = new();
        let mut a = Activity::new(0, 1_000_000);
        for c in &calls {
            let (stats, bins) = &mut direct[slot(c.thread.pid)];
            stats.add(c);
            a.add_api_to(bins, c.ts_ns, c.duration_ns);
        }
        let mut summed = new();
        let mut b = Activity::new(0, 1_000_000);
        let mut run = ProcRun::default();
        let mut joined = 0;
        for c in &calls {
            if run.add(c) {
                joined += 1;
                continue;
            }
            run.finish(&mut summed);
            let s = slot(c.thread.pid);
            let (stats, bins) = &mut summed[s];
            stats.add(c);
            b.add_api_to(bins, c.ts_ns, c.duration_ns);
            run.open(c.thread.pid, s, stats, &mut b, c.ts_ns);
        }
        run.finish(&mut summed);
        assert!(joined > calls.len() / 2, "most calls join a run ({joined})");
        for ((d, db), (s, sb)) in direct.iter().zip(&summed) {
            assert_eq!(
                (d.calls, d.api_ns, d.first_ns, d.last_ns, &d.name),
                (s.calls, s.api_ns, s.first_ns, s.last_ns, &s.name)
            );
            assert_eq!(
                (d.allocs, d.frees, d.failed_allocs),
                (s.allocs, s.frees, s.failed_allocs)
            );
            assert_eq!(d.first_calls, s.first_calls);
            assert_eq!(db.api_ns, sb.api_ns);
        }
        assert_eq!(direct[0].0.name, "renamed");
    }

    #[test]
    fn a_call_that_could_rename_the_process_does_not_join() {
        let call = |tid: u32, name: &Arc<str>, ts: u64| CudaCallRecord {
            detail: Default::default(),
            ts_ns: ts,
            duration_ns: 1,
            thread: ThreadRef {
                pid: 10,
                tid,
                name: Arc::clone(name),
            },
            op: CudaOp::StreamSynchronize,
            ret: 0,
            args: CudaArgs::Sync {
                stream: None,
                event: None,
            },
            clamped_from_ns: None,
            cpu: 0,
            cgroup_id: 0,
        };
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("a"));
        let mut procs = vec![(ProcStats::default(), ProcBins::new())];
        let mut act = Activity::new(0, 1_000_000);
        // Enough first calls of the op that only the name decides.
        for ts in 0..5 {
            procs[0].0.add(&call(10, &a, ts));
        }
        let mut run = ProcRun::default();
        run.open(10, 0, &procs[0].0, &mut act, 4);
        assert!(run.add(&call(10, &a, 5)), "the name checked last");
        assert!(
            run.add(&call(11, &b, 6)),
            "another thread, once the process has a name"
        );
        assert!(
            !run.add(&call(10, &b, 7)),
            "the main thread under another (equal) name"
        );
        run.finish(&mut procs);
        assert_eq!(procs[0].0.calls, 7);
    }
}
