//! The queue between whoever makes spans (the live engine, the replay) and the sender
//! thread: bounded by span count AND bytes, never blocking the producer. When full, the
//! oldest spans go (drop-oldest: the newest steps matter most to someone watching a job) and
//! are counted as `queue_full`. Metrics are cumulative, so only the newest snapshot is kept.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::counters::{DropReason, ExportCounters};
use super::metrics::MetricsSnapshot;
use super::span::SpanData;

/// The queue's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    pub max_spans: usize,
    pub max_bytes: usize,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            max_spans: 8192,
            max_bytes: 8 << 20,
        }
    }
}

#[derive(Default)]
struct Inner {
    spans: VecDeque<(SpanData, usize)>,
    bytes: usize,
    metrics: Option<Box<MetricsSnapshot>>,
    closed: bool,
}

/// What the sender takes at once.
#[derive(Default)]
pub struct Batch {
    pub spans: Vec<SpanData>,
    pub metrics: Option<Box<MetricsSnapshot>>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty() && self.metrics.is_none()
    }
}

pub struct Queue {
    inner: Mutex<Inner>,
    ready: Condvar,
    limits: QueueLimits,
    counters: Arc<ExportCounters>,
}

impl Queue {
    pub fn new(limits: QueueLimits, counters: Arc<ExportCounters>) -> Queue {
        Queue {
            inner: Mutex::new(Inner::default()),
            ready: Condvar::new(),
            limits,
            counters,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a span; evicts the oldest while over a bound (counted). Never blocks.
    pub fn push(&self, span: SpanData) {
        let size = span.approx_bytes();
        let mut g = self.lock();
        g.spans.push_back((span, size));
        g.bytes += size;
        let mut evicted = 0;
        while g.spans.len() > self.limits.max_spans || g.bytes > self.limits.max_bytes {
            let Some((_, b)) = g.spans.pop_front() else {
                break;
            };
            g.bytes -= b;
            evicted += 1;
        }
        drop(g);
        self.counters
            .spans_queued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if evicted > 0 {
            self.counters.drop_spans(DropReason::QueueFull, evicted);
        }
        self.ready.notify_one();
    }

    /// Replaces the metrics snapshot waiting to be sent.
    pub fn push_metrics(&self, m: MetricsSnapshot) {
        self.lock().metrics = Some(Box::new(m));
        self.ready.notify_one();
    }

    /// Waits up to `wait` for something to send, then takes up to `max_spans` spans and the
    /// metrics snapshot. Empty on timeout, or once closed and empty.
    pub fn take(&self, max_spans: usize, wait: Duration) -> Batch {
        let deadline = Instant::now() + wait;
        let mut g = self.lock();
        while g.spans.is_empty() && g.metrics.is_none() && !g.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Batch::default();
            }
            g = match self.ready.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        let n = g.spans.len().min(max_spans);
        let mut spans = Vec::with_capacity(n);
        for _ in 0..n {
            if let Some((s, b)) = g.spans.pop_front() {
                g.bytes -= b;
                spans.push(s);
            }
        }
        Batch {
            spans,
            metrics: g.metrics.take(),
        }
    }

    /// No more pushes are coming: a waiting `take` returns.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Wakes a sender waiting in a back-off (see [`Queue::wait_closed`]).
    pub fn wait_closed(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let mut g = self.lock();
        while !g.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = match self.ready.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }

    /// Spans waiting.
    pub fn len(&self) -> usize {
        self.lock().spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops everything still queued, counting the spans under `reason`.
    pub fn discard(&self, reason: DropReason) {
        let mut g = self.lock();
        let n = g.spans.len() as u64;
        g.spans.clear();
        g.bytes = 0;
        g.metrics = None;
        drop(g);
        self.counters.drop_spans(reason, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::otlp::span::{AttrValue, SpanData};

    fn span(i: u64) -> SpanData {
        SpanData {
            trace_id: [1; 16],
            span_id: i.max(1).to_be_bytes(),
            parent_span_id: None,
            name: "ingero.step",
            start_unix_ns: i,
            end_unix_ns: i + 1,
            attributes: vec![("ingero.step".into(), AttrValue::Int(i as i64))],
            process: None,
        }
    }

    #[test]
    fn the_oldest_spans_go_first_under_either_bound_and_are_counted() {
        let counters = Arc::new(ExportCounters::default());
        let q = Queue::new(
            QueueLimits {
                max_spans: 3,
                max_bytes: 1 << 20,
            },
            counters.clone(),
        );
        for i in 0..5 {
            q.push(span(i));
        }
        let b = q.take(10, Duration::ZERO);
        let kept: Vec<u64> = b.spans.iter().map(|s| s.start_unix_ns).collect();
        assert_eq!(kept, [2, 3, 4], "drop-oldest");
        assert_eq!(counters.dropped(DropReason::QueueFull), 2);
        assert_eq!(counters.snapshot().spans_queued, 5);

        let one = span(0).approx_bytes();
        let q = Queue::new(
            QueueLimits {
                max_spans: 100,
                max_bytes: 2 * one,
            },
            counters.clone(),
        );
        for i in 0..4 {
            q.push(span(i));
        }
        assert_eq!(q.len(), 2, "the byte bound holds too");
        assert_eq!(counters.dropped(DropReason::QueueFull), 4);
    }

    #[test]
    fn take_waits_for_work_and_returns_once_closed() {
        let q = Arc::new(Queue::new(QueueLimits::default(), Arc::default()));
        assert!(q.take(10, Duration::from_millis(10)).is_empty());
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.take(10, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        q.push(span(7));
        let got = t.join().expect("joins");
        assert_eq!(got.spans.len(), 1);
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.take(10, Duration::from_secs(10)));
        q.close();
        assert!(t.join().expect("joins").is_empty());
    }
}
