//! What the ingest server counts: lines ingested, rejected per reason,
//! dropped, unknown fields, and connections. Atomics, so connection tasks
//! update them without locks and a snapshot can be taken at any time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use ingero_annotate::RejectReason;
use serde::Serialize;

const REASONS: usize = RejectReason::ALL.len();

/// Live counters, shared by the accept loop and every connection.
#[derive(Debug, Default)]
pub(crate) struct IngestCounters {
    ingested: AtomicU64,
    rejected: [AtomicU64; REASONS],
    dropped: AtomicU64,
    unknown_fields: AtomicU64,
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    connections_refused: AtomicU64,
}

impl IngestCounters {
    pub(crate) fn ingested(&self) {
        self.ingested.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn rejected(&self, reason: RejectReason) {
        self.rejected[reason.index()].fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn unknown_fields(&self, n: u32) {
        if n > 0 {
            self.unknown_fields
                .fetch_add(u64::from(n), Ordering::Relaxed);
        }
    }
    pub(crate) fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
    pub(crate) fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn snapshot(&self) -> IngestCountersSnapshot {
        let rejected: BTreeMap<&'static str, u64> = RejectReason::ALL
            .iter()
            .map(|r| (r.as_str(), self.rejected[r.index()].load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        IngestCountersSnapshot {
            ingested: self.ingested.load(Ordering::Relaxed),
            rejected_total: rejected.values().sum(),
            rejected,
            dropped: self.dropped.load(Ordering::Relaxed),
            unknown_fields: self.unknown_fields.load(Ordering::Relaxed),
            connections_open: self.connections_open.load(Ordering::Relaxed),
            connections_total: self.connections_total.load(Ordering::Relaxed),
            connections_refused: self.connections_refused.load(Ordering::Relaxed),
        }
    }
}

/// A point-in-time copy of the counters, for the live view and `--json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IngestCountersSnapshot {
    /// Lines accepted and queued to the timeline.
    pub ingested: u64,
    /// Lines refused, by reason name (reasons with a zero count are left out).
    pub rejected: BTreeMap<&'static str, u64>,
    /// Sum of `rejected`.
    pub rejected_total: u64,
    /// Valid lines dropped because the queue to the timeline was full.
    pub dropped: u64,
    /// Unknown top-level fields ignored in accepted lines.
    pub unknown_fields: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted since start (excluding refused ones).
    pub connections_total: u64,
    /// Connections closed at once because `max_conns` were open.
    pub connections_refused: u64,
}

impl IngestCountersSnapshot {
    /// The count for one reason (0 when absent).
    pub fn rejected_for(&self, reason: RejectReason) -> u64 {
        self.rejected.get(reason.as_str()).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_reflects_updates() {
        let c = IngestCounters::default();
        c.ingested();
        c.ingested();
        c.rejected(RejectReason::BadKey);
        c.rejected(RejectReason::BadKey);
        c.rejected(RejectReason::LineTooLong);
        c.dropped();
        c.unknown_fields(3);
        c.connection_opened();
        c.connection_opened();
        c.connection_closed();
        c.connection_refused();
        let s = c.snapshot();
        assert_eq!(s.ingested, 2);
        assert_eq!(s.rejected_for(RejectReason::BadKey), 2);
        assert_eq!(s.rejected_total, 3);
        assert_eq!((s.dropped, s.unknown_fields), (1, 3));
        assert_eq!(
            (
                s.connections_open,
                s.connections_total,
                s.connections_refused
            ),
            (1, 2, 1)
        );
        let json = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(json["rejected"]["bad_key"], 2);
        assert_eq!(json["rejected"]["line_too_long"], 1);
        assert!(json["rejected"].get("empty_labels").is_none());
    }
}
