//! The time window of a multi-host analysis, defined on REALTIME: hosts' trace clocks
//! (MONOTONIC) differ by their boot times, so `--since 5m`, `--from +10s` or `--at 14:03`
//! mean the job's time, which every host places on its own clock through its REALTIME offset.
//!
//! The job's extent on REALTIME runs from the earliest host's first record to the latest
//! host's last: `--since D` counts back from the job's end, `+DURATION` counts from the job's
//! start, and times of day are wall-clock times as for one host. Each host then reads the part
//! of the window that falls in its own recording; a host with nothing in it drops out of the
//! report. The placement is as good as the hosts' clocks (see the clock error bound each
//! recording carries).

use anyhow::{Result, bail};

use crate::analyze::clock::TraceClock;
use crate::analyze::selection::SelectionSpec;
use ingero_trace::read::TimeRange;

/// The window on the job's REALTIME and its place on each host's trace clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobWindow {
    /// The job's first instant (REALTIME, unix ns).
    pub start_ns: u64,
    /// Per host (in the order given): the window on its trace clock and `--at` there; `None`
    /// when the window misses the host's recording.
    pub per_host: Vec<Option<(TimeRange, Option<u64>)>>,
}

fn shift(t: u64, by: i128) -> i128 {
    i128::from(t) + by
}

fn clamp(t: i128) -> u64 {
    u64::try_from(t.max(0)).unwrap_or(u64::MAX)
}

impl JobWindow {
    /// Places `spec`'s window; `hosts` are each host's extent on its trace clock and its
    /// REALTIME − trace-clock offset.
    pub fn resolve(spec: &SelectionSpec, hosts: &[(u64, u64, i128)]) -> Result<JobWindow> {
        let Some(start) = hosts.iter().map(|(s, _, o)| shift(*s, *o)).min() else {
            bail!("no hosts to analyse");
        };
        let end = hosts
            .iter()
            .map(|(_, e, o)| shift(*e, *o))
            .max()
            .unwrap_or(start);
        // The job's clock is REALTIME itself: its offset to wall time is zero.
        let job = TraceClock {
            start_ns: clamp(start),
            end_ns: clamp(end),
            real_minus_mono: Some(0),
        };
        let (range, at) = spec.window(&job)?;
        let per_host = hosts
            .iter()
            .map(|&(h_start, h_end, off)| {
                let from = clamp(i128::from(range.start_ns) - off).max(h_start);
                let to = clamp(i128::from(range.end_ns) - off).min(h_end);
                (from <= to).then(|| {
                    let at = at.map(|a| clamp(i128::from(a) - off));
                    (TimeRange::new(from, to), at)
                })
            })
            .collect();
        Ok(JobWindow {
            start_ns: job.start_ns,
            per_host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    /// 2026-03-14T12:00:00Z.
    const NOON: u64 = 1_773_489_600 * S;

    /// Host a booted 1000 s before noon, host b 6000 s before: the same wall instant is 5000 s
    /// apart on their clocks. a records noon..noon+60s, b noon+30s..noon+120s.
    fn hosts() -> Vec<(u64, u64, i128)> {
        let off_a = i128::from(NOON) - i128::from(1_000 * S);
        let off_b = i128::from(NOON) - i128::from(6_000 * S);
        vec![(1_000 * S, 1_060 * S, off_a), (6_030 * S, 6_120 * S, off_b)]
    }

    #[test]
    fn since_counts_back_from_the_latest_host_and_offsets_from_the_earliest() {
        let since = SelectionSpec {
            since: Some("60s".into()),
            ..Default::default()
        };
        let w = JobWindow::resolve(&since, &hosts()).expect("resolves");
        assert_eq!(w.start_ns, NOON);
        // The job's last minute: noon+60s..noon+120s, which is a's very end and b's second half.
        assert_eq!(
            w.per_host[0],
            Some((TimeRange::new(1_060 * S, 1_060 * S), None))
        );
        assert_eq!(
            w.per_host[1],
            Some((TimeRange::new(6_060 * S, 6_120 * S), None))
        );
        let from = SelectionSpec {
            from: Some("+10s".into()),
            to: Some("+20s".into()),
            ..Default::default()
        };
        let w = JobWindow::resolve(&from, &hosts()).expect("resolves");
        assert_eq!(
            w.per_host[0],
            Some((TimeRange::new(1_010 * S, 1_020 * S), None))
        );
        assert_eq!(w.per_host[1], None, "b had not started");
    }

    #[test]
    fn at_is_one_wall_instant_on_every_host() {
        let at = SelectionSpec {
            at: Some("12:00:45Z".into()),
            ..Default::default()
        };
        let w = JobWindow::resolve(&at, &hosts()).expect("resolves");
        assert_eq!(
            w.per_host[0],
            Some((TimeRange::new(1_044 * S, 1_046 * S), Some(1_045 * S)))
        );
        assert_eq!(
            w.per_host[1],
            Some((TimeRange::new(6_044 * S, 6_046 * S), Some(6_045 * S)))
        );
        let outside = SelectionSpec {
            from: Some("+10m".into()),
            ..Default::default()
        };
        assert!(JobWindow::resolve(&outside, &hosts()).is_err());
    }
}
