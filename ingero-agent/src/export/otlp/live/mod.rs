//! The live export of `ingero trace --otlp-endpoint`: spans as steps and requests end, with
//! the numbers `ingero query --group-by` prints for them, and the session's metrics.
//!
//! # Design: why the numbers are `query`'s
//! `query` reads the file: a first pass learns every label interval ([`LabelIndex`]), the
//! second folds each event into the groups its start time falls in. Folding the drain loop's
//! events as they come would need a second definition of both, and could not handle span
//! annotations at all: a span is sent when it ends, so its events have gone by then. Instead
//! the engine follows **what the writer writes**:
//!
//! 1. After each write, the recording moves the record (it would drop it next) into a batch,
//!    with what the writer's tap logged (`ingero_trace::write::Tap`: each label state's begin
//!    and end as the file states them, late changes at the stream time, exits and rotations
//!    included; slices shortened to nest) and the watermark up to which everything has been
//!    written. The batch goes over a channel: the drain loop's cost is a `Vec` push per
//!    record and a channel send per 512 records, whose buffers come back to be reused
//!    ([`feed`]).
//! 2. On its own thread, the engine keeps the recent past in the reader's form (a bounded
//!    [`history`] of `CudaCallRecord`s and `OffCpuRecord`s, built by the same
//!    `CudaCallRecord::written` the writer's round-trip test holds the reader to) and the
//!    labels ([`labels`]).
//! 3. When a label interval of a grouped key has closed and the stream has been written past
//!    it, the engine builds a [`LabelIndex`] from its labels exactly as `query`'s first pass
//!    does, folds the history through `analyze::scan` (the same `Grouping`, `Routes` and
//!    `GroupStats` code) and turns the complete rows of `analyze::query::group_rows` into
//!    spans with `span_of_row`, the function the replay uses ([`engine`]).
//!
//! So a live span equals the replayed span of the same group, field for field, except where
//! the live engine cannot know what the file will later hold:
//! - **context labels** (`ingero.label.*` other than the group's keys) come from the labels
//!   in force at the group's start; a span annotation that encloses the group and ends after
//!   it (an epoch span around its steps) has not arrived when the group's span is sent;
//! - **a group whose values hold again** after its span was sent (Lightning's validation
//!   batches repeat the last training step) is sent again for the later part, with
//!   `ingero.part` = 2, 3, …; `query` (and the replay) make one row of both parts;
//! - **events the engine did not see**: past the history's bound or horizon, over the
//!   hand-off's bound, or released late by the reorder window after the group was sent:
//!   such a span is marked `ingero.incomplete` and counted;
//! - **findings** (`ingero.finding.*`) need the whole recording (a step is slow against its
//!   peers) and are sent by the replay only.
//!
//! Memory is bounded: the history by bytes (`--otlp-history-size`) and time
//! (`--otlp-horizon`, how long a span annotation may last and still be exact), the labels by
//! count, the hand-off by events and batches in flight, the send queue by spans and bytes.
//!
//! [`LabelIndex`]: crate::analyze::labels::LabelIndex

pub mod engine;
pub mod feed;
pub mod history;
pub mod labels;
pub mod run;

#[cfg(test)]
mod engine_tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::config::OtlpConfig;
use super::counters::{ExportCounters, Snapshot, thread_cpu_ns};
use super::metrics::MetricsSnapshot;
use super::queue::Queue;
use super::resource::HostResource;
use super::sender::{Sender, SenderConfig};
use engine::{Engine, EngineConfig, SessionFacts};
use feed::Feed;

/// Folds run at most this often (they are also run at once at the end).
pub const TICK_EVERY: Duration = Duration::from_millis(100);

/// The running live export: the engine's and the sender's threads.
pub struct LiveExporter {
    feed: Feed,
    engine: Option<JoinHandle<()>>,
    sender: Sender,
    queue: Arc<Queue>,
    counters: Arc<ExportCounters>,
    endpoint: String,
}

impl LiveExporter {
    /// Starts both threads. `facts` are the recording's (machine id, session start, path).
    pub fn start(
        cfg: &OtlpConfig,
        engine_cfg: EngineConfig,
        host: HostResource,
        facts: SessionFacts,
    ) -> Result<LiveExporter> {
        let counters = Arc::new(ExportCounters::default());
        let queue = Arc::new(Queue::new(cfg.queue, counters.clone()));
        let sender = Sender::spawn(
            SenderConfig {
                traces: cfg.traces.clone(),
                metrics: Some(cfg.metrics.clone()),
                timeout: cfg.timeout,
                retry: cfg.retry,
                report: true,
            },
            host,
            queue.clone(),
            counters.clone(),
        )?;
        let (tx, rx) = mpsc::channel();
        let (spare_tx, spare_rx) = mpsc::sync_channel(feed::SPARE_BUFFERS);
        let feed = Feed {
            spare: Arc::new(std::sync::Mutex::new(spare_rx)),
            tx,
            events_in_flight: Arc::new(AtomicUsize::new(0)),
            batches_in_flight: Arc::new(AtomicUsize::new(0)),
            desynced: Arc::new(AtomicBool::new(false)),
            counters: counters.clone(),
        };
        let mut engine = Engine::new(engine_cfg, facts, counters.clone());
        let (events, batches, desynced) = (
            feed.events_in_flight.clone(),
            feed.batches_in_flight.clone(),
            feed.desynced.clone(),
        );
        let q = queue.clone();
        let c = counters.clone();
        let thread = std::thread::Builder::new()
            .name("ingero-otlp-live".into())
            .spawn(move || {
                let mut last_tick = Instant::now();
                let mut push = |s| q.push(s);
                loop {
                    match rx.recv_timeout(TICK_EVERY) {
                        Ok(batch) => {
                            let (n, last) = (batch.events, batch.last);
                            let mut emptied = engine.apply(batch);
                            emptied.clear();
                            let _ = spare_tx.try_send(emptied);
                            events.fetch_sub(n, Relaxed);
                            batches.fetch_sub(1, Relaxed);
                            engine.desynced |= desynced.load(Relaxed);
                            if last {
                                engine.tick(&mut push);
                                c.engine_cpu_ns.store(thread_cpu_ns(), Relaxed);
                                return;
                            }
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => {
                            engine.tick(&mut push);
                            c.engine_cpu_ns.store(thread_cpu_ns(), Relaxed);
                            return;
                        }
                    }
                    if last_tick.elapsed() >= TICK_EVERY {
                        last_tick = Instant::now();
                        if engine.due() {
                            engine.tick(&mut push);
                        } else {
                            engine.idle();
                        }
                    }
                    c.engine_cpu_ns.store(thread_cpu_ns(), Relaxed);
                }
            })
            .context("starting the OTLP live export thread")?;
        Ok(LiveExporter {
            feed,
            engine: Some(thread),
            sender,
            queue,
            counters,
            endpoint: cfg.traces.url.clone(),
        })
    }

    /// The recording's end of the hand-off.
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// Queues a metrics snapshot (replacing one not yet sent).
    pub fn metrics(&self, m: MetricsSnapshot) {
        self.queue.push_metrics(m);
    }

    pub fn counters(&self) -> Snapshot {
        self.counters.snapshot()
    }

    /// The traces URL (for statistics).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// After the last batch was fed: waits for the engine's last spans, then gives the
    /// sender `grace` to deliver what is queued; returns the final counts.
    pub fn finish(mut self, last_metrics: Option<MetricsSnapshot>, grace: Duration) -> Snapshot {
        drop(self.feed);
        if let Some(t) = self.engine.take() {
            let _ = t.join();
        }
        if let Some(m) = last_metrics {
            self.queue.push_metrics(m);
        }
        self.sender.finish(grace);
        self.counters.snapshot()
    }
}
