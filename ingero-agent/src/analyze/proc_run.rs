//! [`ProcRun`]: consecutive calls of one process inside one activity bin, summed (count, API
//! time, first start, last end) and added to the process's [`ProcStats`] and bins when the run
//! ends, instead of each call updating both.
//!
//! A call joins the run only when nothing else about it needs the process's state: it
//! succeeded, neither allocates nor frees, its op has all its first calls, its thread's name
//! needs no check, and it lies inside the run's bin. Any other call ends the run and goes
//! through [`ProcStats::add`] as before; the sums are order-free (counts, totals, the
//! earliest start and latest end), so the result is the same.

use std::sync::Arc;

use super::activity::{Activity, ProcBins};
use super::processes::ProcStats;
use crate::decode::CudaArgs;
use crate::read::CudaCallRecord;

/// The calls summed so far and what lets the next one join.
pub struct ProcRun {
    pid: u32,
    slot: usize,
    /// The activity bin and the times `[lo, hi)` it covers (`[1, 0)`: no run).
    bin: usize,
    lo: u64,
    hi: u64,
    /// The process's state when the run began (it changes only through `ProcStats::add`,
    /// which ends the run first).
    name_empty: bool,
    name_seen: usize,
    first_calls_full: u64,
    calls: u64,
    api_ns: u64,
    first_ns: u64,
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
            lo: 1,
            hi: 0,
            name_empty: true,
            name_seen: 0,
            first_calls_full: 0,
            calls: 0,
            api_ns: 0,
            first_ns: u64::MAX,
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
            && self.lo <= c.ts_ns
            && end < self.hi
            && c.ret == 0
            && self.first_calls_full & (1u64 << (c.op as u16 & 63)) != 0
            && !matches!(c.args, CudaArgs::Alloc { .. } | CudaArgs::Free { .. })
            && !((self.name_empty || c.thread.pid == c.thread.tid)
                && name_addr(&c.thread.name) != self.name_seen);
        if joins {
            self.calls += 1;
            self.api_ns += c.duration_ns;
            self.first_ns = self.first_ns.min(c.ts_ns);
            self.last_ns = self.last_ns.max(end);
        }
        joins
    }

    /// Adds the run to its process and closes it.
    pub fn finish(&mut self, procs: &mut [(ProcStats, ProcBins)]) {
        if self.calls > 0
            && let Some((stats, bins)) = procs.get_mut(self.slot)
        {
            stats.add_run(self.calls, self.api_ns, self.first_ns, self.last_ns);
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
        let (lo, hi, bin) = activity.bounds_near(t);
        let (name_empty, name_seen, first_calls_full) = stats.run_view();
        *self = ProcRun {
            pid,
            slot,
            bin,
            lo,
            hi,
            name_empty,
            name_seen: name_seen.map_or(0, name_addr),
            first_calls_full,
            ..ProcRun::default()
        };
    }
}
