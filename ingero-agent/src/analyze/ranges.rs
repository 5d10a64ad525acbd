//! What the individual ranges of an NVTX group looked like (`query --group-by nvtx`): how many
//! there were and the distribution of their durations. A group's own duration is the union of
//! its ranges (nested or overlapping ones count once there); these are per range.

use serde::Serialize;

use ingero_trace::vocab::{NVTX_DOMAIN_LABEL, NVTX_LABEL};

/// The ranges of one group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RangeStats {
    /// How many ranges.
    pub count: u64,
    /// Their durations added up (nested and overlapping ranges each count in full).
    pub total_ns: u64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// Whether a grouping key's groups get [`RangeStats`].
pub fn has_range_stats(key: &str) -> bool {
    key == NVTX_LABEL || key == NVTX_DOMAIN_LABEL
}

/// The statistics of `intervals` (each a range's `[start, end]`), nearest-rank quantiles.
pub fn range_stats(intervals: &[(u64, u64)]) -> RangeStats {
    let mut d: Vec<u64> = intervals
        .iter()
        .map(|(a, b)| b.saturating_sub(*a))
        .collect();
    if d.is_empty() {
        return RangeStats::default();
    }
    d.sort_unstable();
    let q = |p: f64| {
        let rank = (p * d.len() as f64).ceil() as usize;
        d[rank.clamp(1, d.len()) - 1]
    };
    RangeStats {
        count: d.len() as u64,
        total_ns: d.iter().sum(),
        p50_ns: q(0.50),
        p95_ns: q(0.95),
        p99_ns: q(0.99),
        max_ns: d[d.len() - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank_over_the_ranges() {
        let iv: Vec<(u64, u64)> = (1..=100).map(|i| (1000, 1000 + i * 10)).collect();
        let s = range_stats(&iv);
        assert_eq!(s.count, 100);
        assert_eq!(s.total_ns, 10 * 5050);
        assert_eq!(
            (s.p50_ns, s.p95_ns, s.p99_ns, s.max_ns),
            (500, 950, 990, 1000)
        );
        assert_eq!(range_stats(&[]), RangeStats::default());
        assert_eq!(range_stats(&[(5, 9)]).p50_ns, 4);
        assert!(has_range_stats("nvtx") && !has_range_stats("step"));
    }
}
