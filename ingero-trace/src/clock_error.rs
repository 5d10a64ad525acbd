//! How far this host's wall clock may be from true time, as the kernel's NTP discipline
//! states it: `adjtimex(2)` in read-only mode (no privileges), the figures `ntp_gettime(3)`
//! reports. Times from several hosts can only be compared to within the sum of their
//! bounds, so exporters put it beside the times they send (OTLP resource attributes
//! `ingero.clock.maxerror_us`, `ingero.clock.unsync`) and recordings can carry it.

/// The clock's error bound at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockErrorBound {
    /// Maximum error, microseconds (grows by the tolerance each second until a time source
    /// resets it).
    pub maxerror_us: u64,
    /// Estimated error, microseconds.
    pub esterror_us: u64,
    /// No time source disciplines the clock (`STA_UNSYNC` set, or the clock state is
    /// `TIME_ERROR`): the bound means little.
    pub unsync: bool,
}

/// Reads the clock's error bound now; `None` when the kernel does not answer.
pub fn clock_error_bound() -> Option<ClockErrorBound> {
    // SAFETY: `timex` is plain old data (integers, a timeval and padding), for which all
    // zero bytes are a valid value; zero `modes` asks for a read only.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, writable timex that outlives the call; with `modes == 0`
    // adjtimex changes nothing and only fills it in.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return None;
    }
    Some(ClockErrorBound {
        maxerror_us: u64::try_from(tx.maxerror).unwrap_or(0),
        esterror_us: u64::try_from(tx.esterror).unwrap_or(0),
        unsync: tx.status & libc::STA_UNSYNC != 0 || state == libc::TIME_ERROR,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_states_a_bound() {
        let b = clock_error_bound().expect("adjtimex answers without privileges");
        // An unsynchronised clock reports the kernel's ceiling (16 s); a synchronised one a
        // bound below it, and an estimate no larger than the bound.
        assert!(b.maxerror_us <= 16_000_000, "{b:?}");
        assert!(b.unsync || b.esterror_us <= b.maxerror_us, "{b:?}");
    }
}
