//! What the export counted: spans sent and lost (by reason), retries, requests, and what the
//! live engine could not see. Atomics shared by the session's threads; a [`Snapshot`] is
//! what the final statistics, the `--json` stats lines and the exporter's own metrics show.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// The calling thread's CPU time so far, ns.
pub fn thread_cpu_ns() -> u64 {
    ingero_trace::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Why spans were not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Evicted from the full queue (drop-oldest) while the Collector was slow or away.
    QueueFull,
    /// The Collector answered with a status that is not retried (400, 401, 403, 404, 413, …).
    Rejected,
    /// Retryable answers (429, 502, 503, 504) or connection failures until the deadline.
    RetriesExhausted,
    /// Accepted by the request but rejected inside it (`partial_success.rejected_spans`).
    PartialSuccess,
    /// Still queued or in flight when the session's shutdown deadline passed.
    Shutdown,
}

impl DropReason {
    pub const ALL: [DropReason; 5] = [
        DropReason::QueueFull,
        DropReason::Rejected,
        DropReason::RetriesExhausted,
        DropReason::PartialSuccess,
        DropReason::Shutdown,
    ];

    /// The `reason` dimension and the key in statistics.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::Rejected => "rejected",
            DropReason::RetriesExhausted => "retries_exhausted",
            DropReason::PartialSuccess => "partial_success",
            DropReason::Shutdown => "shutdown",
        }
    }
}

/// The counters (all monotonic).
#[derive(Default)]
pub struct ExportCounters {
    /// Spans made (handed to the queue).
    pub spans_queued: AtomicU64,
    /// Spans the Collector accepted.
    pub spans_sent: AtomicU64,
    dropped: [AtomicU64; 5],
    /// Requests sent again.
    pub retries: AtomicU64,
    /// Requests answered with success (traces and metrics).
    pub requests_ok: AtomicU64,
    /// Requests that failed for good (traces and metrics).
    pub requests_failed: AtomicU64,
    /// Bytes of request bodies sent (compressed).
    pub bytes_sent: AtomicU64,
    /// Metric requests the Collector accepted.
    pub metric_requests_sent: AtomicU64,
    /// Data points rejected inside accepted metric requests.
    pub metric_points_rejected: AtomicU64,
    /// Events the live engine never saw: its input was over its bound.
    pub events_not_seen: AtomicU64,
    /// Events that arrived after their group's span could already have been sent.
    pub late_events: AtomicU64,
    /// Events evicted from the live engine's bounded history before their group ended.
    pub events_evicted: AtomicU64,
    /// Spans sent marked `ingero.incomplete`.
    pub spans_incomplete: AtomicU64,
    /// Label records (spans, closed states) the live engine let go at its bound.
    pub labels_evicted: AtomicU64,
    /// CPU time the live engine's thread and the sender's thread have used, ns (the
    /// export's own cost, in the statistics and the benchmark).
    pub engine_cpu_ns: AtomicU64,
    pub sender_cpu_ns: AtomicU64,
    /// The last failure, for stderr and the statistics.
    pub last_error: Mutex<Option<String>>,
}

impl ExportCounters {
    pub fn drop_spans(&self, reason: DropReason, n: u64) {
        if let Some(c) = self.dropped.get(reason as usize) {
            c.fetch_add(n, Relaxed);
        }
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped
            .get(reason as usize)
            .map_or(0, |c| c.load(Relaxed))
    }

    pub fn set_error(&self, e: String) {
        if let Ok(mut g) = self.last_error.lock() {
            *g = Some(e);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let get = |c: &AtomicU64| c.load(Relaxed);
        Snapshot {
            spans_queued: get(&self.spans_queued),
            spans_sent: get(&self.spans_sent),
            dropped: DropReason::ALL
                .iter()
                .map(|r| (r.name(), self.dropped(*r)))
                .collect(),
            retries: get(&self.retries),
            requests_ok: get(&self.requests_ok),
            requests_failed: get(&self.requests_failed),
            bytes_sent: get(&self.bytes_sent),
            metric_requests_sent: get(&self.metric_requests_sent),
            metric_points_rejected: get(&self.metric_points_rejected),
            events_not_seen: get(&self.events_not_seen),
            late_events: get(&self.late_events),
            events_evicted: get(&self.events_evicted),
            spans_incomplete: get(&self.spans_incomplete),
            labels_evicted: get(&self.labels_evicted),
            engine_cpu_ns: get(&self.engine_cpu_ns),
            sender_cpu_ns: get(&self.sender_cpu_ns),
            last_error: self.last_error.lock().ok().and_then(|g| g.clone()),
        }
    }
}

/// The counters at one instant (the `otlp` object of `--json` stats lines).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    pub spans_queued: u64,
    pub spans_sent: u64,
    pub dropped: Vec<(&'static str, u64)>,
    pub retries: u64,
    pub requests_ok: u64,
    pub requests_failed: u64,
    pub bytes_sent: u64,
    pub metric_requests_sent: u64,
    pub metric_points_rejected: u64,
    pub events_not_seen: u64,
    pub late_events: u64,
    pub events_evicted: u64,
    pub spans_incomplete: u64,
    pub labels_evicted: u64,
    pub engine_cpu_ns: u64,
    pub sender_cpu_ns: u64,
    pub last_error: Option<String>,
}

impl Snapshot {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }

    /// The entries of the session's drops (final statistics, live table, `--json`):
    /// `otlp_spans_dropped_<reason>` and what the live engine could not see.
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(&'static str, u64)> = self
            .dropped
            .iter()
            .map(|(r, n)| (drop_key(r), *n))
            .collect();
        out.push(("otlp_events_not_seen", self.events_not_seen));
        out.push(("otlp_events_evicted", self.events_evicted));
        out.push(("otlp_late_events", self.late_events));
        out.push(("otlp_spans_incomplete", self.spans_incomplete));
        out.push(("otlp_labels_evicted", self.labels_evicted));
        out
    }

    /// The `otlp` object of `--json` stats lines (docs/json-schema.md).
    pub fn json(&self, endpoint: &str) -> serde_json::Value {
        let dropped: serde_json::Map<String, serde_json::Value> = self
            .dropped
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).into()))
            .collect();
        serde_json::json!({
            "endpoint": endpoint,
            "spans_queued": self.spans_queued,
            "spans_sent": self.spans_sent,
            "spans_dropped": dropped,
            "spans_incomplete": self.spans_incomplete,
            "retries": self.retries,
            "requests_ok": self.requests_ok,
            "requests_failed": self.requests_failed,
            "bytes_sent": self.bytes_sent,
            "metric_requests_sent": self.metric_requests_sent,
            "metric_points_rejected": self.metric_points_rejected,
            "events_not_seen": self.events_not_seen,
            "events_evicted": self.events_evicted,
            "late_events": self.late_events,
            "labels_evicted": self.labels_evicted,
            "engine_cpu_ns": self.engine_cpu_ns,
            "sender_cpu_ns": self.sender_cpu_ns,
            "last_error": self.last_error,
        })
    }
}

/// `otlp_spans_dropped_<reason>` (static: the drops list takes `&'static str` keys).
fn drop_key(reason: &str) -> &'static str {
    match reason {
        "queue_full" => "otlp_spans_dropped_queue_full",
        "rejected" => "otlp_spans_dropped_rejected",
        "retries_exhausted" => "otlp_spans_dropped_retries_exhausted",
        "partial_success" => "otlp_spans_dropped_partial_success",
        _ => "otlp_spans_dropped_shutdown",
    }
}
