//! How far this host's CLOCK_REALTIME may be from true time: what the kernel's clock
//! discipline (NTP, chrony, PTP through phc2sys) says about it, read with `adjtimex(2)` in
//! read-only mode (no privileges needed).
//!
//! Recordings from several hosts are aligned through REALTIME (each host's clock snapshots map
//! its MONOTONIC trace clock onto it), so two hosts' events can be placed relative to each
//! other only to within the sum of their clocks' errors. The session packet carries these
//! numbers so a reader can say how far to trust a cross-host comparison.

/// The kernel's view of its REALTIME clock's accuracy, as `adjtimex(2)` (and
/// `ntp_gettime(3)`) report it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockQuality {
    /// The maximum error (`maxerror`, µs): how far REALTIME may be from true time. The kernel
    /// grows it by 500 µs per second until the clock discipline sets it again, so an
    /// undisciplined clock shows a large, growing bound.
    pub maxerror_us: u64,
    /// The estimated error (`esterror`, µs), as the clock discipline last set it.
    pub esterror_us: u64,
    /// `STA_UNSYNC` is set (or the clock state is `TIME_ERROR`): nothing disciplines the
    /// clock, so the bounds say nothing and cross-host alignment is a guess.
    pub unsynchronized: bool,
}

impl ClockQuality {
    /// Reads this host's clock state now; `None` when the kernel refuses (it does not on
    /// Linux for a read-only call, but a seccomp filter may).
    pub fn measure() -> Option<ClockQuality> {
        // SAFETY: `timex` is a plain C struct of integers (and padding), for which all-zero
        // bytes are a valid value; `modes == 0` asks adjtimex only to read.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        tx.modes = 0;
        // SAFETY: `tx` is a valid, writable timex that lives across the call; with `modes == 0`
        // the kernel only writes the current values into it.
        let state = unsafe { libc::adjtimex(&mut tx) };
        if state < 0 {
            return None;
        }
        Some(ClockQuality {
            maxerror_us: u64::try_from(tx.maxerror).unwrap_or(0),
            esterror_us: u64::try_from(tx.esterror).unwrap_or(0),
            unsynchronized: tx.status & libc::STA_UNSYNC != 0 || state == libc::TIME_ERROR,
        })
    }

    /// The bound on this host's REALTIME error in ns, when the clock is synchronised.
    pub fn error_bound_ns(&self) -> Option<u64> {
        (!self.unsynchronized).then(|| self.maxerror_us.saturating_mul(1_000))
    }

    /// `±12.3 ms`, or `unsynchronised`: for reports.
    pub fn text(&self) -> String {
        match self.error_bound_ns() {
            Some(ns) if ns >= 1_000_000 => format!("±{:.1} ms", ns as f64 / 1e6),
            Some(ns) => format!("±{} µs", ns / 1_000),
            None => "unsynchronised".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_answers_a_read_only_query() {
        let q = ClockQuality::measure().expect("adjtimex(modes = 0) needs no privileges");
        // The kernel caps maxerror at NTP_PHASE_LIMIT (16 s).
        assert!(q.maxerror_us <= 16_000_000, "{q:?}");
        assert_eq!(q.error_bound_ns().is_none(), q.unsynchronized);
    }

    #[test]
    fn the_bound_reads_in_ms_or_us_and_unsynchronised_clocks_have_none() {
        let q = ClockQuality {
            maxerror_us: 12_345,
            esterror_us: 10,
            unsynchronized: false,
        };
        assert_eq!(q.error_bound_ns(), Some(12_345_000));
        assert_eq!(q.text(), "±12.3 ms");
        let tight = ClockQuality {
            maxerror_us: 250,
            ..q
        };
        assert_eq!(tight.text(), "±250 µs");
        let free = ClockQuality {
            unsynchronized: true,
            ..q
        };
        assert_eq!(free.error_bound_ns(), None);
        assert_eq!(free.text(), "unsynchronised");
    }
}
