//! The recording's wall clock: how REALTIME relates to the trace clock (CLOCK_MONOTONIC), from
//! the first ClockSnapshot the first pass meets (`TraceReader::first_realtime_offset`; when
//! there is none the session packet's `started_realtime_ns` stands in), and turning user times
//! ([`TimeSpec`]) into points on the trace clock.

use anyhow::{Context, Result};

use super::timespec::{self, TimeSpec};

/// The recording's extent on the trace clock and its relation to wall time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceClock {
    /// First and last instant of any record.
    pub start_ns: u64,
    pub end_ns: u64,
    /// REALTIME − MONOTONIC, when known.
    pub real_minus_mono: Option<i128>,
}

impl TraceClock {
    /// Unix nanoseconds of a trace time.
    pub fn to_wall(&self, trace_ns: u64) -> Option<i128> {
        self.real_minus_mono.map(|o| i128::from(trace_ns) + o)
    }

    /// The trace time of a wall time (clamped to the clock's range).
    pub fn to_trace(&self, unix_ns: i128) -> Option<u64> {
        self.real_minus_mono
            .map(|o| u64::try_from((unix_ns - o).max(0)).unwrap_or(u64::MAX))
    }

    /// RFC 3339 UTC text of a trace time, when the wall clock is known.
    pub fn wall_text(&self, trace_ns: u64) -> Option<String> {
        let unix = self.to_wall(trace_ns)?;
        let unix = u64::try_from(unix).ok()?;
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix);
        Some(humantime::format_rfc3339_micros(t).to_string())
    }

    /// Places a user time on the trace clock. A time of day takes the recording's start date
    /// (local, or in the zone given); one earlier than the start moves to the next day, so a
    /// recording across midnight can be addressed by the clock alone.
    pub fn resolve(&self, spec: TimeSpec) -> Result<u64> {
        let start_wall = || {
            self.to_wall(self.start_ns).context(
                "this recording has no wall-clock reference; use +DURATION from its start instead",
            )
        };
        let unix = match spec {
            TimeSpec::Offset(off) => return Ok(self.start_ns.saturating_add(off)),
            TimeSpec::DateTime {
                year,
                month,
                day,
                secs_of_day,
                nanos,
                zone,
            } => {
                start_wall()?;
                timespec::civil_to_unix_ns((year, month, day), secs_of_day, nanos, zone)?
            }
            TimeSpec::TimeOfDay {
                secs_of_day,
                nanos,
                zone,
            } => {
                let start_wall = start_wall()?;
                let date = timespec::date_at(start_wall, zone);
                let t = timespec::civil_to_unix_ns(date, secs_of_day, nanos, zone)?;
                // A minute of slack: "14:23" for a recording that began at 14:23:30.
                if t < start_wall - 60_000_000_000 {
                    t + 86_400_000_000_000
                } else {
                    t
                }
            }
        };
        self.to_trace(unix)
            .context("this recording has no wall-clock reference")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_offsets_zoned_times_and_times_of_day() {
        let noon_utc = i128::from(timespec::days_from_civil(2026, 3, 14)) * 86_400_000_000_000
            + 12 * 3_600_000_000_000;
        let clock = TraceClock {
            start_ns: 1_000_000_000_000,
            end_ns: 1_000_000_000_000 + 3_600_000_000_000,
            real_minus_mono: Some(noon_utc - 1_000_000_000_000),
        };
        assert_eq!(
            clock.resolve(TimeSpec::Offset(5)).ok(),
            Some(1_000_000_000_005)
        );
        let at = timespec::parse("12:30Z")
            .and_then(|s| clock.resolve(s))
            .ok();
        assert_eq!(at, Some(1_000_000_000_000 + 1_800_000_000_000));
        // 11:00 UTC is before the start: tomorrow.
        let next = timespec::parse("11:00Z")
            .and_then(|s| clock.resolve(s))
            .ok();
        assert_eq!(next, Some(1_000_000_000_000 + 23 * 3_600_000_000_000));
        let dated = timespec::parse("2026-03-14 13:00+01:00")
            .and_then(|s| clock.resolve(s))
            .ok();
        assert_eq!(dated, Some(1_000_000_000_000));
        assert_eq!(
            clock.wall_text(1_000_000_000_000).as_deref(),
            Some("2026-03-14T12:00:00.000000Z")
        );
        let unknown = TraceClock {
            real_minus_mono: None,
            ..clock
        };
        assert!(unknown.resolve(TimeSpec::Offset(1)).is_ok());
        assert!(
            timespec::parse("12:00")
                .and_then(|s| unknown.resolve(s))
                .is_err()
        );
    }
}
