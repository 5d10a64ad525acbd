//! [`Sketch`]: the per-operation latency counts, recorded with a few instructions per call and
//! turned into an HDR histogram only when a quantile is asked for.
//!
//! The buckets are exactly those of `hdrhistogram` with lowest value 1 and 2 significant digits
//! (256 sub-buckets, the lower half of every bucket but the first unused), so the histogram
//! built from the counts — with the same total, minimum and maximum — answers every query as
//! one fed call by call would. The tests check the mapping against the library.

use hdrhistogram::Histogram;

/// Sub-buckets per bucket, as log2: 2 significant digits need 200 distinct values, so 256.
const SUB_BUCKET_MAGNITUDE: u32 = 8;
const HALF_MAGNITUDE: u32 = SUB_BUCKET_MAGNITUDE - 1;
const HALF_COUNT: u64 = 1 << HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << SUB_BUCKET_MAGNITUDE) - 1;
/// 64 − log2(lowest value 1) − `HALF_MAGNITUDE` − 1.
const LEADING_ZERO_BASE: u32 = 64 - HALF_MAGNITUDE - 1;
/// Significant digits the counts stand for.
pub const DIGITS: u8 = 2;

/// The hdrhistogram counts index of `v` (≥ 1).
#[inline(always)]
fn index_of(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = v >> bucket;
    (((u64::from(bucket) + 1) << HALF_MAGNITUDE) + sub - HALF_COUNT) as usize
}

/// The lowest value that lands in counts index `i`.
fn lowest_of(i: usize) -> u64 {
    let i = i as u64;
    let bucket = (i >> HALF_MAGNITUDE).saturating_sub(1);
    let mut sub = (i & (HALF_COUNT - 1)) + HALF_COUNT;
    if i >> HALF_MAGNITUDE == 0 {
        sub -= HALF_COUNT;
    }
    sub << bucket
}

/// Latency counts of values in `[1, max]`. The smallest and largest value recorded are kept
/// by the caller (who usually has them anyway) and given to [`Sketch::histogram`].
pub struct Sketch {
    max_value: u64,
    counts: Vec<u64>,
}

impl Sketch {
    /// A sketch for values `1..=max_value` (larger ones must be clamped by the caller).
    pub fn new(max_value: u64) -> Sketch {
        Sketch {
            max_value,
            counts: vec![0; index_of(max_value.max(1)) + 1],
        }
    }

    /// Counts one value, clamped to `[1, max_value]`.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        // Not `clamp`, whose bounds assertion keeps it from being inlined.
        let v = v.max(1).min(self.max_value);
        if let Some(c) = self.counts.get_mut(index_of(v)) {
            *c += 1;
        }
    }

    /// The HDR histogram these counts stand for, given the smallest and largest value recorded
    /// (before clamping; `None`: nothing recorded). `None` only if the library refuses the
    /// bounds.
    pub fn histogram(&self, extremes: Option<(u64, u64)>) -> Option<Histogram<u64>> {
        let mut h = Histogram::new_with_bounds(1, self.max_value, DIGITS).ok()?;
        let Some((min, max)) = extremes else {
            return Some(h);
        };
        // Clamping keeps order, so these are the extremes of the values counted.
        let (min, max) = (
            min.max(1).min(self.max_value),
            max.max(1).min(self.max_value),
        );
        // The largest value goes in as itself so the histogram's maximum is exact; the rest of
        // each bucket goes in at a value of that bucket no smaller than the minimum (so its
        // minimum is exact too).
        h.saturating_record(max);
        let top = index_of(max);
        for (i, c) in self.counts.iter().enumerate() {
            let n = if i == top { c.saturating_sub(1) } else { *c };
            if n > 0 {
                h.saturating_record_n(lowest_of(i).clamp(min, max), n);
            }
        }
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 3_600_000_000_000;

    fn probes() -> Vec<u64> {
        let mut v: Vec<u64> = (1..600).collect();
        for k in 8..42 {
            let p = 1u64 << k;
            v.extend([p - 1, p, p + 1, p + p / 3, p + p / 2 + 7]);
        }
        v.extend([MAX - 1, MAX]);
        v
    }

    #[test]
    fn buckets_match_the_library() {
        let h = Histogram::<u64>::new_with_bounds(1, MAX, DIGITS).expect("valid bounds");
        for v in probes() {
            let i = index_of(v);
            assert_eq!(lowest_of(i), h.lowest_equivalent(v), "value {v}");
            assert_eq!(index_of(lowest_of(i)), i, "value {v}");
        }
    }

    #[test]
    fn histogram_equals_one_fed_call_by_call() {
        let mut direct = Histogram::<u64>::new_with_bounds(1, MAX, DIGITS).expect("valid bounds");
        let mut s = Sketch::new(MAX);
        // A deterministic spread over many magnitudes, with repeats and both ends.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = probes();
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x % (1 << (x % 40)));
        }
        values.push(u64::MAX);
        for v in &values {
            direct.saturating_record((*v).clamp(1, MAX));
            s.record(*v);
        }
        let extremes = values.iter().min().zip(values.iter().max());
        let built = s
            .histogram(extremes.map(|(a, b)| (*a, *b)))
            .expect("valid bounds");
        assert_eq!(built.len(), direct.len());
        assert_eq!(built.max(), direct.max());
        assert_eq!(built.min_nz(), direct.min_nz());
        assert_eq!(built.min(), direct.min());
        for q in [0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(
                built.value_at_quantile(q),
                direct.value_at_quantile(q),
                "q {q}"
            );
        }
        let a: Vec<(u64, u64)> = built
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        let b: Vec<(u64, u64)> = direct
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn an_empty_sketch_gives_an_empty_histogram() {
        let h = Sketch::new(MAX).histogram(None).expect("valid bounds");
        assert_eq!(h.len(), 0);
    }
}
