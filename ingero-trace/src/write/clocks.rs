//! Clock readings for ClockSnapshot packets and the host's stable identity (`machine_id`).

use crate::clock::clock_ns;
use crate::proto::{Clock, ClockSnapshot, clock_id};

/// BOOTTIME and REALTIME relative to MONOTONIC, measured now.
#[derive(Clone, Copy, Debug)]
pub struct ClockOffsets {
    pub boot_minus_mono: i128,
    pub real_minus_mono: i128,
}

impl ClockOffsets {
    /// Reads MONOTONIC around the other two so the offsets are taken at one instant (to within
    /// the few hundred ns the reads take).
    pub fn measure() -> ClockOffsets {
        let m1 = clock_ns(libc::CLOCK_MONOTONIC);
        let boot = clock_ns(libc::CLOCK_BOOTTIME);
        let real = clock_ns(libc::CLOCK_REALTIME);
        let m2 = clock_ns(libc::CLOCK_MONOTONIC);
        let mid = i128::from(m1) + (i128::from(m2) - i128::from(m1)) / 2;
        ClockOffsets {
            boot_minus_mono: i128::from(boot) - mid,
            real_minus_mono: i128::from(real) - mid,
        }
    }

    fn at(mono: u64, offset: i128) -> u64 {
        u64::try_from((i128::from(mono) + offset).max(0)).unwrap_or(u64::MAX)
    }

    /// A snapshot stating that at MONOTONIC `mono` the other clocks read what the offsets
    /// say; `incremental` also re-states ingero's sequence-scoped clock 64 at `mono`.
    pub fn snapshot(&self, mono: u64, incremental: bool) -> ClockSnapshot {
        let mut clocks = Vec::with_capacity(4);
        if incremental {
            clocks.push(Clock {
                clock_id: Some(clock_id::INCREMENTAL_MONOTONIC),
                timestamp: Some(mono),
                is_incremental: Some(true),
            });
        }
        clocks.push(Clock {
            clock_id: Some(clock_id::MONOTONIC),
            timestamp: Some(mono),
            is_incremental: None,
        });
        clocks.push(Clock {
            clock_id: Some(clock_id::BOOTTIME),
            timestamp: Some(Self::at(mono, self.boot_minus_mono)),
            is_incremental: None,
        });
        clocks.push(Clock {
            clock_id: Some(clock_id::REALTIME),
            timestamp: Some(Self::at(mono, self.real_minus_mono)),
            is_incremental: None,
        });
        ClockSnapshot { clocks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{monotonic_now_ns, realtime_now_ns};

    #[test]
    fn snapshot_states_all_clocks_at_one_instant() {
        let off = ClockOffsets::measure();
        // BOOTTIME never runs behind MONOTONIC; the midpoint estimate may dip below by the read jitter.
        assert!(
            off.boot_minus_mono > -1_000_000,
            "BOOTTIME counts suspend too"
        );
        let s = off.snapshot(5_000, true);
        let ids: Vec<_> = s.clocks.iter().map(|c| c.clock_id).collect();
        assert_eq!(ids, vec![Some(64), Some(3), Some(6), Some(1)]);
        assert_eq!(s.clocks[0].timestamp, Some(5_000));
        assert_eq!(s.clocks[0].is_incremental, Some(true));
        let real = s.clocks[3].timestamp.unwrap_or(0);
        let expect = realtime_now_ns() - monotonic_now_ns() + 5_000;
        assert!(real.abs_diff(expect) < 50_000_000);
    }
}
