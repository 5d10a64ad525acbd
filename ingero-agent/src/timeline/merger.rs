//! The timeline merger: a bounded reorder window that takes [`TimelineRecord`]s from several
//! producers (per-CPU eBPF rings deliver slightly out of order; annotations come from the
//! socket) and releases them in timestamp order.
//!
//! Interface:
//! - [`Merger::new`] with a [`MergerConfig`] (window, default 250 ms; hard cap on buffered
//!   records);
//! - [`Merger::push`] each record as it arrives;
//! - [`Merger::pop_ready`]`(now_ns)` repeatedly (with CLOCK_MONOTONIC now) to take what is
//!   older than the window, in order; [`Merger::drain`] at shutdown to take the rest;
//! - [`Merger::counters`] for statistics.
//!
//! Nothing is dropped: a record older than the last released one still comes out, flagged
//! [`Released::late`] and counted; when the cap is reached the oldest record is released early
//! (counted as `forced`), so memory stays bounded whatever producers do.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

use ingero_trace::model::TimelineRecord;

/// Default reorder window.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(250);
/// Default cap on buffered records: at 1 M events/s a 250 ms window holds 250 k, so this leaves
/// room for bursts while bounding memory to a few hundred MB in the worst case.
pub const DEFAULT_MAX_BUFFERED: usize = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergerConfig {
    /// How long a record is held for stragglers.
    pub window: Duration,
    /// Hard cap on buffered records.
    pub max_buffered: usize,
}

impl Default for MergerConfig {
    fn default() -> Self {
        MergerConfig {
            window: DEFAULT_WINDOW,
            max_buffered: DEFAULT_MAX_BUFFERED,
        }
    }
}

/// A record leaving the merger.
#[derive(Clone, Debug, PartialEq)]
pub struct Released {
    pub record: TimelineRecord,
    /// Older than a record already released: output order is broken for this one.
    pub late: bool,
}

/// What the merger counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergerCounters {
    pub pushed: u64,
    pub released: u64,
    /// Released out of order (arrived after a later record had left).
    pub late: u64,
    /// Released before their window passed because the buffer was full.
    pub forced: u64,
    /// Currently buffered.
    pub buffered: u64,
}

struct Entry {
    ts: u64,
    seq: u64,
    record: TimelineRecord,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.ts, self.seq) == (other.ts, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and the oldest must come out first; `seq` keeps
    // records with equal timestamps in arrival order.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ts, other.seq).cmp(&(self.ts, self.seq))
    }
}

/// The reorder window.
pub struct Merger {
    cfg: MergerConfig,
    window_ns: u64,
    heap: BinaryHeap<Entry>,
    seq: u64,
    /// Timestamp of the newest record released so far.
    high_water: Option<u64>,
    counters: MergerCounters,
}

impl Merger {
    pub fn new(cfg: MergerConfig) -> Merger {
        Merger {
            window_ns: u64::try_from(cfg.window.as_nanos()).unwrap_or(u64::MAX),
            cfg,
            heap: BinaryHeap::new(),
            seq: 0,
            high_water: None,
            counters: MergerCounters::default(),
        }
    }

    pub fn config(&self) -> MergerConfig {
        self.cfg
    }

    /// Buffers a record.
    pub fn push(&mut self, record: TimelineRecord) {
        let ts = record.ts_ns();
        self.seq += 1;
        self.heap.push(Entry {
            ts,
            seq: self.seq,
            record,
        });
        self.counters.pushed += 1;
    }

    /// The oldest record if its window has passed at `now_ns` (CLOCK_MONOTONIC), or if the
    /// buffer is over its cap. Call until `None`.
    pub fn pop_ready(&mut self, now_ns: u64) -> Option<Released> {
        let oldest = self.heap.peek()?.ts;
        let due = oldest.saturating_add(self.window_ns) <= now_ns;
        let over_cap = self.heap.len() > self.cfg.max_buffered;
        if !due && !over_cap {
            return None;
        }
        if !due {
            self.counters.forced += 1;
        }
        self.release()
    }

    /// Everything still buffered, in order (shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = Released> + '_ {
        std::iter::from_fn(move || self.release())
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn counters(&self) -> MergerCounters {
        MergerCounters {
            buffered: self.heap.len() as u64,
            ..self.counters
        }
    }

    fn release(&mut self) -> Option<Released> {
        let entry = self.heap.pop()?;
        let late = self.high_water.is_some_and(|hw| entry.ts < hw);
        if late {
            self.counters.late += 1;
        } else {
            self.high_water = Some(entry.ts);
        }
        self.counters.released += 1;
        Some(Released {
            record: entry.record,
            late,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_trace::model::AnnotationRecord;

    const MS: u64 = 1_000_000;

    fn ann(ts_ns: u64) -> TimelineRecord {
        TimelineRecord::Annotation(AnnotationRecord {
            labels: vec![("k".into(), ts_ns.to_string())],
            scope: None,
            ts_ns,
            end_ns: None,
            provenance_uid: 0,
            provenance_pid: None,
            ..Default::default()
        })
    }

    fn cfg(window_ms: u64, cap: usize) -> MergerConfig {
        MergerConfig {
            window: Duration::from_millis(window_ms),
            max_buffered: cap,
        }
    }

    fn take(m: &mut Merger, now: u64) -> Vec<(u64, bool)> {
        std::iter::from_fn(|| m.pop_ready(now))
            .map(|r| (r.record.ts_ns(), r.late))
            .collect()
    }

    #[test]
    fn reorders_within_the_window() {
        let mut m = Merger::new(cfg(250, 100));
        for ts in [30, 10, 20, 50, 40] {
            m.push(ann(ts * MS));
        }
        assert!(
            take(&mut m, 100 * MS).is_empty(),
            "nothing is older than the window yet"
        );
        let out = take(&mut m, 285 * MS);
        assert_eq!(
            out,
            vec![(10 * MS, false), (20 * MS, false), (30 * MS, false)]
        );
        assert_eq!(m.len(), 2);
        let rest: Vec<u64> = m.drain().map(|r| r.record.ts_ns()).collect();
        assert_eq!(rest, vec![40 * MS, 50 * MS]);
    }

    #[test]
    fn equal_timestamps_keep_arrival_order() {
        let mut m = Merger::new(cfg(0, 100));
        for i in 0..5 {
            let mut r = ann(7);
            if let TimelineRecord::Annotation(a) = &mut r {
                a.labels[0].1 = i.to_string();
            }
            m.push(r);
        }
        let order: Vec<String> = m
            .drain()
            .map(|r| match r.record {
                TimelineRecord::Annotation(a) => a.labels[0].1.clone(),
                TimelineRecord::Event(_) | TimelineRecord::Nvtx(_) | TimelineRecord::Driver(_) => {
                    String::new()
                }
            })
            .collect();
        assert_eq!(order, ["0", "1", "2", "3", "4"]);
    }

    #[test]
    fn a_straggler_is_released_flagged_late_and_counted() {
        let mut m = Merger::new(cfg(250, 100));
        m.push(ann(100 * MS));
        assert_eq!(take(&mut m, 400 * MS), vec![(100 * MS, false)]);
        m.push(ann(50 * MS));
        m.push(ann(120 * MS));
        assert_eq!(
            take(&mut m, 400 * MS),
            vec![(50 * MS, true), (120 * MS, false)]
        );
        let c = m.counters();
        assert_eq!(
            (c.pushed, c.released, c.late, c.forced, c.buffered),
            (3, 3, 1, 0, 0)
        );
    }

    #[test]
    fn the_cap_releases_the_oldest_early() {
        let mut m = Merger::new(cfg(250, 3));
        for ts in 1..=5 {
            m.push(ann(ts * MS));
        }
        // Nothing is due at time 0, but two records are over the cap.
        assert_eq!(take(&mut m, 0), vec![(MS, false), (2 * MS, false)]);
        assert_eq!(m.counters().forced, 2);
        assert_eq!(m.len(), 3);
    }
}
