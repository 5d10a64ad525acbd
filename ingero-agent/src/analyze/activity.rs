//! [`Activity`]: per process, what happened in each of a fixed number of time bins across the
//! selected range (GPU API time, allocation calls, net bytes allocated). Memory is fixed per
//! process whatever the trace length; used for contention, concurrency around slow calls,
//! allocation spikes and memory growth.

use ingero_trace::fast_map::FastMap;

/// Bins across the selected range.
pub const BINS: usize = 1024;

/// One process's bins.
#[derive(Clone)]
pub struct ProcBins {
    pub api_ns: Vec<u64>,
    pub alloc_calls: Vec<u32>,
    pub net_bytes: Vec<i64>,
}

impl Default for ProcBins {
    fn default() -> ProcBins {
        ProcBins::new()
    }
}

impl ProcBins {
    pub fn new() -> ProcBins {
        ProcBins {
            api_ns: vec![0; BINS],
            alloc_calls: vec![0; BINS],
            net_bytes: vec![0; BINS],
        }
    }
}

/// Time-binned activity of every process.
pub struct Activity {
    pub start_ns: u64,
    pub bin_ns: u64,
    pub procs: FastMap<u32, ProcBins>,
    /// The bin looked up last and the times `[lo, hi)` it covers: events arrive nearly in time
    /// order, so most fall in the same bin as the one before and skip the division.
    last: (u64, u64, usize),
}

impl Activity {
    pub fn new(start_ns: u64, end_ns: u64) -> Activity {
        let span = end_ns.saturating_sub(start_ns).max(1);
        Activity {
            start_ns,
            bin_ns: span.div_ceil(BINS as u64).max(1),
            procs: FastMap::default(),
            last: (0, 0, 0),
        }
    }

    pub fn bin_of(&self, t: u64) -> usize {
        ((t.saturating_sub(self.start_ns) / self.bin_ns) as usize).min(BINS - 1)
    }

    /// The start time of bin `b`.
    pub fn bin_start(&self, b: usize) -> u64 {
        self.start_ns + b as u64 * self.bin_ns
    }

    pub fn proc(&mut self, pid: u32) -> &mut ProcBins {
        self.procs.entry(pid).or_default()
    }

    /// Adds a call's API time, split across the bins it covers.
    pub fn add_api(&mut self, pid: u32, start: u64, dur: u64) {
        let mut p = self.procs.remove(&pid).unwrap_or_default();
        self.add_api_to(&mut p, start, dur);
        self.procs.insert(pid, p);
    }

    /// [`Activity::bin_of`], remembering the bin's bounds for the next call.
    #[inline]
    pub fn bin_near(&mut self, t: u64) -> usize {
        let (lo, hi, b) = self.last;
        if lo <= t && t < hi {
            return b;
        }
        let b = self.bin_of(t);
        // The first and last bins also take the times before and after the range.
        let lo = if b == 0 { 0 } else { self.bin_start(b) };
        let hi = if b == BINS - 1 {
            u64::MAX
        } else {
            self.bin_start(b + 1)
        };
        self.last = (lo, hi, b);
        b
    }

    /// [`Activity::bin_near`] with the times `[lo, hi)` for which it holds.
    pub fn bounds_near(&mut self, t: u64) -> (u64, u64, usize) {
        self.bin_near(t);
        self.last
    }

    /// [`Activity::add_api`] into bins the caller holds (the scan keeps them by process slot).
    #[inline]
    pub fn add_api_to(&mut self, p: &mut ProcBins, start: u64, dur: u64) {
        let end = start + dur;
        let b0 = self.bin_near(start);
        if end < self.last.1
            && let Some(ns) = p.api_ns.get_mut(b0)
        {
            *ns += dur;
            return;
        }
        self.add_api_spanning(p, b0, start, end);
    }

    /// A call that may cover several bins: each gets its share.
    #[inline(never)]
    fn add_api_spanning(&self, p: &mut ProcBins, b0: usize, start: u64, end: u64) {
        let b1 = self.bin_of(end);
        if b0 == b1 {
            p.api_ns[b0] += end - start;
            return;
        }
        for b in b0..=b1 {
            let lo = self.bin_start(b);
            let (lo, hi) = (lo.max(start), (lo + self.bin_ns).min(end));
            p.api_ns[b] += hi.saturating_sub(lo);
        }
    }

    /// API time of processes other than `pid` in `[a, b]` (whole bins, so approximate).
    pub fn others_api_ns(&self, pid: u32, a: u64, b: u64) -> Vec<(u32, u64)> {
        let (b0, b1) = (self.bin_of(a), self.bin_of(b));
        let mut out: Vec<(u32, u64)> = self
            .procs
            .iter()
            .filter(|(p, _)| **p != pid)
            .map(|(p, bins)| (*p, bins.api_ns[b0..=b1].iter().sum::<u64>()))
            .filter(|(_, ns)| *ns > 0)
            .collect();
        out.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_time_splits_across_bins() {
        let mut a = Activity::new(0, BINS as u64 * 100);
        assert_eq!(a.bin_ns, 100);
        a.add_api(1, 50, 200);
        let p = &a.procs[&1];
        assert_eq!(&p.api_ns[0..4], &[50, 100, 50, 0]);
        a.add_api(2, 120, 10);
        assert_eq!(a.others_api_ns(1, 0, 300), vec![(2, 10)]);
        assert_eq!(a.bin_of(u64::MAX), BINS - 1);
    }

    #[test]
    fn the_remembered_bin_agrees_with_the_division() {
        let mut a = Activity::new(1000, 1000 + BINS as u64 * 100);
        // Forwards, backwards (late events), both edges and outside the range.
        let times = [
            1000, 1050, 1099, 1100, 1101, 1050, 0, 999, 1000, 103_399, 103_400, 103_401,
        ];
        for t in times.into_iter().chain([u64::MAX, 5, 2000, 1999, 2100]) {
            assert_eq!(a.bin_near(t), a.bin_of(t), "t {t}");
        }
    }
}
