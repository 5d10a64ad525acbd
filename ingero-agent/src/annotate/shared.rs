//! [`Shared`]: the state the accept loop and every connection share (counters, the global
//! rate limit, the clock converter, the queue to the timeline). Below the server, the
//! connection loop and the line processor, which all use it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::config::IngestConfig;
use super::counters::IngestCounters;
use super::ratelimit::GlobalLimiter;
use super::received::ReceivedAnnotation;
use ingero_trace::clock::ClockConverter;

/// State shared by the accept loop and every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) counters: IngestCounters,
    pub(crate) global: GlobalLimiter,
    pub(crate) clock: ClockConverter,
    pub(crate) tx: mpsc::Sender<ReceivedAnnotation>,
    pub(crate) rate_per_conn: u32,
    pub(crate) burst: u32,
    pub(crate) idle_timeout: Duration,
}

impl Shared {
    pub(crate) fn new(cfg: &IngestConfig) -> (Arc<Shared>, mpsc::Receiver<ReceivedAnnotation>) {
        let (tx, rx) = mpsc::channel(cfg.queue_capacity.max(1));
        let shared = Shared {
            counters: IngestCounters::default(),
            global: GlobalLimiter::new(cfg.global_rate),
            clock: ClockConverter::default(),
            tx,
            rate_per_conn: cfg.rate_per_conn,
            burst: cfg.burst,
            idle_timeout: cfg.idle_timeout,
        };
        (Arc::new(shared), rx)
    }
}
