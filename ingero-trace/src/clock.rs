//! The trace clock and conversions into it.
//!
//! Everything inside the agent is CLOCK_MONOTONIC nanoseconds (what
//! `bpf_ktime_get_ns` returns). Clients stamp annotations with
//! CLOCK_REALTIME (unix ns), so they are converted at the edge with an
//! offset `realtime - monotonic`. That offset drifts (NTP slews REALTIME,
//! an admin can step it), so it is re-measured periodically instead of
//! once at start-up.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// How often the offset is re-measured by default.
pub const DEFAULT_REMEASURE_INTERVAL: Duration = Duration::from_secs(1);

/// CPU time the calling thread has used, in seconds: what the benchmarks divide by, so their
/// per-core figures hold on a shared machine.
pub fn thread_cpu_secs() -> f64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) as f64 / 1e9
}

/// CPU time the whole process has used (all its threads), in seconds: for benchmarks of work
/// spread over helper threads.
pub fn process_cpu_secs() -> f64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e9
}

/// Reads a clock in nanoseconds (also used for the recording's clock snapshots).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes
    // to it. The clocks used with it (MONOTONIC, REALTIME, BOOTTIME, the
    // thread's and the process's CPU clocks) always exist on Linux, so the call cannot fail; if
    // it somehow did, `ts` stays zeroed.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// CLOCK_MONOTONIC now, in ns: the trace clock.
pub fn monotonic_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME now, in unix ns.
pub fn realtime_now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Measures `realtime - monotonic` once: the REALTIME read is bracketed by
/// two MONOTONIC reads and the tightest of a few tries is kept, so a
/// preemption between reads does not skew the result.
pub fn measure_offset_ns() -> i64 {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..3 {
        let m1 = monotonic_now_ns();
        let r = realtime_now_ns();
        let m2 = monotonic_now_ns();
        let width = m2.saturating_sub(m1);
        let mid = m1 + width / 2;
        let offset = i128::from(r) - i128::from(mid);
        let offset = i64::try_from(offset).unwrap_or(if offset < 0 { i64::MIN } else { i64::MAX });
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, offset));
        }
    }
    best.map_or(0, |(_, o)| o)
}

/// Converts between CLOCK_REALTIME and the trace clock. Cheap to call from
/// many threads: the offset lives in atomics and is re-measured lazily by
/// whichever caller first notices it is older than the interval.
#[derive(Debug)]
pub struct ClockConverter {
    offset_ns: AtomicI64,
    measured_at_ns: AtomicU64,
    interval_ns: u64,
}

impl Default for ClockConverter {
    fn default() -> Self {
        Self::new(DEFAULT_REMEASURE_INTERVAL)
    }
}

impl ClockConverter {
    /// A converter that re-measures the offset when it is older than
    /// `interval`.
    pub fn new(interval: Duration) -> ClockConverter {
        let c = ClockConverter {
            offset_ns: AtomicI64::new(0),
            measured_at_ns: AtomicU64::new(0),
            interval_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        };
        c.remeasure();
        c
    }

    /// Measure the offset now.
    pub fn remeasure(&self) {
        let offset = measure_offset_ns();
        self.offset_ns.store(offset, Ordering::Relaxed);
        self.measured_at_ns
            .store(monotonic_now_ns(), Ordering::Relaxed);
    }

    /// The current `realtime - monotonic` offset, re-measured first if it
    /// is stale.
    pub fn offset_ns(&self) -> i64 {
        let now = monotonic_now_ns();
        if now.saturating_sub(self.measured_at_ns.load(Ordering::Relaxed)) >= self.interval_ns {
            self.remeasure();
        }
        self.offset_ns.load(Ordering::Relaxed)
    }

    /// A unix-ns timestamp on the trace clock. Times before boot clamp to 0
    /// (no event can precede boot, so nothing is lost).
    pub fn realtime_to_monotonic(&self, realtime_ns: u64) -> u64 {
        let mono = i128::from(realtime_ns) - i128::from(self.offset_ns());
        u64::try_from(mono.max(0)).unwrap_or(u64::MAX)
    }

    /// A trace-clock timestamp as unix ns, for display.
    pub fn monotonic_to_realtime(&self, monotonic_ns: u64) -> u64 {
        let real = i128::from(monotonic_ns) + i128::from(self.offset_ns());
        u64::try_from(real.max(0)).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_move_forward_and_agree_with_std() {
        let a = monotonic_now_ns();
        let b = monotonic_now_ns();
        assert!(b >= a);
        let std_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        assert!(realtime_now_ns().abs_diff(std_now) < 1_000_000_000);
    }

    #[test]
    fn conversion_round_trips_and_matches_now() {
        let c = ClockConverter::default();
        let real = realtime_now_ns();
        let mono = c.realtime_to_monotonic(real);
        assert!(mono.abs_diff(monotonic_now_ns()) < 50_000_000, "{mono}");
        assert_eq!(c.monotonic_to_realtime(mono), real);
        assert_eq!(c.realtime_to_monotonic(0), 0, "before boot clamps");
    }

    #[test]
    fn offset_is_remeasured_after_the_interval() {
        let c = ClockConverter::new(Duration::from_millis(10));
        // Corrupt the offset; a stale measurement must be replaced.
        c.offset_ns.store(12_345, Ordering::Relaxed);
        assert_eq!(c.offset_ns(), 12_345, "fresh: kept");
        std::thread::sleep(Duration::from_millis(20));
        let off = c.offset_ns();
        assert!(off.abs_diff(measure_offset_ns()) < 50_000_000, "{off}");
    }
}
