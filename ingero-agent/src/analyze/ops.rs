//! Per-operation statistics: a latency sketch (HDR histogram buckets, fixed size), count, total
//! and error count. Quantiles come from the sketch (about 1 % relative error).

use ingero_ebpf::CudaOp;

use super::sketch::Sketch;
use ingero_trace::model::call_failed;

/// Largest duration the sketch tells apart (longer calls are recorded as this): one hour.
const SKETCH_MAX_NS: u64 = 3_600_000_000_000;

/// One operation's latency distribution.
pub struct OpStats {
    pub op: CudaOp,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub errors: u64,
    /// The shortest call (`u64::MAX` before the first), for the sketch's histogram.
    min_ns: u64,
    sketch: Sketch,
}

impl OpStats {
    pub fn new(op: CudaOp) -> OpStats {
        OpStats {
            op,
            count: 0,
            total_ns: 0,
            max_ns: 0,
            errors: 0,
            min_ns: u64::MAX,
            sketch: Sketch::new(SKETCH_MAX_NS),
        }
    }

    #[inline(always)]
    pub fn record(&mut self, duration_ns: u64, ret: i32) {
        self.count += 1;
        self.total_ns += duration_ns;
        self.max_ns = self.max_ns.max(duration_ns);
        self.min_ns = self.min_ns.min(duration_ns);
        self.errors += u64::from(call_failed(self.op, ret));
        self.sketch.record(duration_ns);
    }

    /// The shortest and longest call, if any.
    fn extremes(&self) -> Option<(u64, u64)> {
        (self.count > 0).then_some((self.min_ns, self.max_ns))
    }

    /// The duration at quantile `q` (0..=1), never above the true maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        // The histogram fails only for invalid bounds, which these constants are not; without
        // it quantiles fall back to the maximum.
        match &self.sketch.histogram(self.extremes()) {
            Some(h) if self.count > 0 => h.value_at_quantile(q).min(self.max_ns),
            _ => self.max_ns,
        }
    }

    /// How many recorded calls took at least `ns`.
    pub fn count_at_least(&self, ns: u64) -> u64 {
        match &self.sketch.histogram(self.extremes()) {
            Some(h) => h
                .iter_recorded()
                .filter(|v| v.value_iterated_to() >= h.lowest_equivalent(ns))
                .map(|v| v.count_at_value())
                .sum(),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_track_the_distribution() {
        let mut s = OpStats::new(CudaOp::LaunchKernel);
        for i in 0..1000u64 {
            s.record(if i < 990 { 10_000 } else { 1_000_000 }, 0);
        }
        s.record(5_000, 2);
        assert_eq!(s.count, 1001);
        assert_eq!(s.errors, 1);
        assert!(s.quantile(0.5).abs_diff(10_000) <= 100);
        assert!(s.quantile(0.995).abs_diff(1_000_000) <= 10_000);
        assert_eq!(s.max_ns, 1_000_000);
        assert_eq!(s.count_at_least(500_000), 10);
    }
}
