//! The sender thread: takes batches from the [`Queue`], encodes them (protobuf, gzip), POSTs
//! them and follows the retry rules of [`super::transport`], counting every outcome. It is
//! the only thread that waits on the network: a dead or slow Collector fills the queue, whose
//! oldest spans then go (counted), and never reaches the recording. Failures are said on
//! stderr at most every [`REPORT_EVERY`], and once more when the Collector answers again.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;

use super::counters::{DropReason, ExportCounters};
use super::encode::{Gzip, body};
use super::metrics::{MetricsSnapshot, metrics_request};
use super::queue::Queue;
use super::resource::HostResource;
use super::span::SpanData;
use super::transport::{Endpoint, Outcome, RetryPolicy, agent, post};
use super::wire::trace_request_bytes;

/// Spans per request at most.
pub const MAX_BATCH: usize = 512;
/// How often a continuing failure is said again on stderr.
pub const REPORT_EVERY: Duration = Duration::from_secs(30);

/// Where and how the sender sends.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub traces: Endpoint,
    pub metrics: Option<Endpoint>,
    /// Per request (connect, send, answer).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Say failures on stderr (the live export; a replay reports at its end instead).
    pub report: bool,
}

/// Spans being sent, and whether the session stopped waiting for them.
#[derive(Default)]
struct InFlight {
    spans: u64,
    abandoned: bool,
}

/// The running sender; [`Sender::finish`] ends it.
pub struct Sender {
    thread: Option<JoinHandle<()>>,
    queue: Arc<Queue>,
    counters: Arc<ExportCounters>,
    in_flight: Arc<Mutex<InFlight>>,
    /// When the session began shutting down (retries stop at its deadline).
    closing: Arc<Mutex<Option<Instant>>>,
    grace: Arc<Mutex<Duration>>,
}

impl Sender {
    pub fn spawn(
        cfg: SenderConfig,
        host: HostResource,
        queue: Arc<Queue>,
        counters: Arc<ExportCounters>,
    ) -> Result<Sender> {
        let in_flight = Arc::new(Mutex::new(InFlight::default()));
        let closing = Arc::new(Mutex::new(None));
        let grace = Arc::new(Mutex::new(Duration::ZERO));
        let mut w = Worker {
            agent: agent(cfg.timeout),
            cfg,
            host,
            queue: queue.clone(),
            counters: counters.clone(),
            in_flight: in_flight.clone(),
            closing: closing.clone(),
            grace: grace.clone(),
            failing_since: None,
            last_report: None,
            gzip: Gzip::new(),
            raw: Vec::new(),
            zipped: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("ingero-otlp-send".into())
            .spawn(move || w.run())
            .context("starting the OTLP sender thread")?;
        Ok(Sender {
            thread: Some(thread),
            queue,
            counters,
            in_flight,
            closing,
            grace,
        })
    }

    /// No more spans are coming: sends what is queued for up to `grace` (retries included),
    /// then counts what is left as dropped (`shutdown`) and returns.
    pub fn finish(mut self, grace: Duration) {
        if let Ok(mut g) = self.grace.lock() {
            *g = grace;
        }
        if let Ok(mut c) = self.closing.lock() {
            *c = Some(Instant::now());
        }
        self.queue.close();
        let deadline = Instant::now() + grace;
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
                return;
            }
        }
        // The thread is still waiting on the network: what it holds and what is queued are
        // lost, and it must not count them again when its request ends.
        if let Ok(mut f) = self.in_flight.lock() {
            f.abandoned = true;
            self.counters.drop_spans(DropReason::Shutdown, f.spans);
            f.spans = 0;
        }
        self.queue.discard(DropReason::Shutdown);
    }
}

/// Sends `spans` from the calling thread in batches of [`MAX_BATCH`], by the same rules (the
/// replay: it can wait, so nothing is queued or dropped for room).
pub fn send_all(
    cfg: SenderConfig,
    host: HostResource,
    spans: Vec<SpanData>,
    counters: Arc<ExportCounters>,
) {
    let mut w = Worker {
        agent: agent(cfg.timeout),
        cfg,
        host,
        queue: Arc::new(Queue::new(Default::default(), counters.clone())),
        counters: counters.clone(),
        in_flight: Arc::default(),
        closing: Arc::default(),
        grace: Arc::default(),
        failing_since: None,
        last_report: None,
        gzip: Gzip::new(),
        raw: Vec::new(),
        zipped: Vec::new(),
    };
    counters.spans_queued.fetch_add(spans.len() as u64, Relaxed);
    let mut spans = spans.into_iter().peekable();
    while spans.peek().is_some() {
        let batch: Vec<SpanData> = spans.by_ref().take(MAX_BATCH).collect();
        w.send_spans(batch);
    }
}

struct Worker {
    agent: ureq::Agent,
    cfg: SenderConfig,
    host: HostResource,
    queue: Arc<Queue>,
    counters: Arc<ExportCounters>,
    in_flight: Arc<Mutex<InFlight>>,
    closing: Arc<Mutex<Option<Instant>>>,
    grace: Arc<Mutex<Duration>>,
    failing_since: Option<Instant>,
    last_report: Option<Instant>,
    gzip: Gzip,
    /// The last request's protobuf bytes and body (their room reused).
    raw: Vec<u8>,
    zipped: Vec<u8>,
}

fn decode_traces(b: &[u8]) -> Option<(u64, String)> {
    let r = ExportTraceServiceResponse::decode(b).ok()?;
    let p = r.partial_success?;
    Some((
        u64::try_from(p.rejected_spans).unwrap_or(0),
        p.error_message,
    ))
}

fn decode_metrics(b: &[u8]) -> Option<(u64, String)> {
    let r = ExportMetricsServiceResponse::decode(b).ok()?;
    let p = r.partial_success?;
    Some((
        u64::try_from(p.rejected_data_points).unwrap_or(0),
        p.error_message,
    ))
}

/// How one request ended.
enum Sent {
    Ok { rejected: u64, message: String },
    Failed { reason: DropReason, why: String },
}

impl Worker {
    fn run(&mut self) {
        loop {
            let batch = self.queue.take(MAX_BATCH, Duration::from_millis(200));
            if batch.is_empty() {
                if self.queue.is_closed() {
                    return;
                }
                continue;
            }
            if !batch.spans.is_empty() {
                self.send_spans(batch.spans);
            }
            if let Some(m) = batch.metrics {
                self.send_metrics(&m);
            }
            self.counters
                .sender_cpu_ns
                .store(super::counters::thread_cpu_ns(), Relaxed);
        }
    }

    /// The instant retries stop: the session's shutdown deadline, once it is closing.
    fn shutdown_deadline(&self) -> Option<Instant> {
        let at = self.closing.lock().ok().and_then(|c| *c)?;
        let grace = self.grace.lock().map(|g| *g).unwrap_or_default();
        Some(at + grace)
    }

    fn send_spans(&mut self, spans: Vec<SpanData>) {
        let n = spans.len() as u64;
        if let Ok(mut f) = self.in_flight.lock() {
            f.spans = n;
        }
        self.raw.clear();
        trace_request_bytes(&self.host, &spans, &mut self.raw);
        let (mut raw, mut zipped) = (
            std::mem::take(&mut self.raw),
            std::mem::take(&mut self.zipped),
        );
        let ep = self.cfg.traces.clone();
        let outcome = if ep.gzip {
            match self.gzip.compress_into(&raw, &mut zipped) {
                Ok(()) => self.send(&ep, &zipped, decode_traces),
                Err(e) => Sent::Failed {
                    reason: DropReason::Rejected,
                    why: format!("encoding: {e:#}"),
                },
            }
        } else {
            self.send(&ep, &raw, decode_traces)
        };
        raw.clear();
        (self.raw, self.zipped) = (raw, zipped);
        let Ok(mut f) = self.in_flight.lock() else {
            return;
        };
        f.spans = 0;
        if f.abandoned {
            return;
        }
        match outcome {
            Sent::Ok { rejected, message } => {
                let rejected = rejected.min(n);
                self.counters.spans_sent.fetch_add(n - rejected, Relaxed);
                if rejected > 0 {
                    self.counters
                        .drop_spans(DropReason::PartialSuccess, rejected);
                    self.counters.set_error(format!(
                        "the Collector rejected {rejected} of {n} spans: {message}"
                    ));
                }
            }
            Sent::Failed { reason, why } => {
                self.counters.drop_spans(reason, n);
                drop(f);
                self.failed(&why);
            }
        }
    }

    fn send_metrics(&mut self, m: &MetricsSnapshot) {
        let Some(ep) = self.cfg.metrics.clone() else {
            return;
        };
        let req = metrics_request(&self.host, m, &self.counters.snapshot());
        let gzip = ep.gzip.then_some(&mut self.gzip);
        let outcome = match body(&req, gzip) {
            Ok(b) => self.send(&ep, &b, decode_metrics),
            Err(e) => Sent::Failed {
                reason: DropReason::Rejected,
                why: format!("encoding metrics: {e:#}"),
            },
        };
        match outcome {
            Sent::Ok { rejected, .. } => {
                self.counters.metric_requests_sent.fetch_add(1, Relaxed);
                self.counters
                    .metric_points_rejected
                    .fetch_add(rejected, Relaxed);
            }
            Sent::Failed { why, .. } => self.failed(&format!("metrics: {why}")),
        }
    }

    /// POSTs until accepted, refused, or the retry (or shutdown) deadline passes.
    fn send(
        &mut self,
        ep: &Endpoint,
        body: &[u8],
        decode: fn(&[u8]) -> Option<(u64, String)>,
    ) -> Sent {
        let first = Instant::now();
        let mut attempt = 0u32;
        loop {
            self.counters
                .bytes_sent
                .fetch_add(body.len() as u64, Relaxed);
            match post(&self.agent, ep, body, decode) {
                Outcome::Accepted { rejected, message } => {
                    self.counters.requests_ok.fetch_add(1, Relaxed);
                    self.recovered();
                    return Sent::Ok { rejected, message };
                }
                Outcome::Rejected { why } => {
                    self.counters.requests_failed.fetch_add(1, Relaxed);
                    return Sent::Failed {
                        reason: DropReason::Rejected,
                        why: format!("{why} (not retried)"),
                    };
                }
                Outcome::Retry { after, why } => {
                    attempt += 1;
                    let wait = self.cfg.retry.wait(attempt, after);
                    let retry_at = Instant::now() + wait;
                    let give_up = first + self.cfg.retry.deadline;
                    let shutdown = self.shutdown_deadline();
                    if retry_at > give_up || shutdown.is_some_and(|d| retry_at > d) {
                        self.counters.requests_failed.fetch_add(1, Relaxed);
                        let reason = match shutdown {
                            Some(d) if retry_at > d && retry_at <= give_up => DropReason::Shutdown,
                            _ => DropReason::RetriesExhausted,
                        };
                        return Sent::Failed {
                            reason,
                            why: format!("{why} (gave up after {attempt} attempts)"),
                        };
                    }
                    self.note_failure(&why);
                    self.counters.retries.fetch_add(1, Relaxed);
                    self.sleep_until(retry_at);
                }
            }
        }
    }

    /// Waits for a retry, waking early when the session starts closing so that the shutdown
    /// deadline is checked at once.
    fn sleep_until(&self, at: Instant) {
        loop {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            if self.queue.wait_closed(left) {
                // Closing: sleep the rest (the deadline check already allowed it).
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                return;
            }
        }
    }

    fn note_failure(&mut self, why: &str) {
        self.counters.set_error(why.to_owned());
        self.failing_since.get_or_insert_with(Instant::now);
        let due = self.last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY);
        if self.cfg.report && due {
            self.last_report = Some(Instant::now());
            let s = self.counters.snapshot();
            eprintln!(
                "ingero: OTLP export to {} failing: {why}; retrying ({} spans dropped so far; the recording is unaffected)",
                self.cfg.traces.url,
                s.dropped_total()
            );
        }
    }

    fn failed(&mut self, why: &str) {
        self.note_failure(why);
    }

    fn recovered(&mut self) {
        if let Some(since) = self.failing_since.take() {
            if self.cfg.report {
                let s = self.counters.snapshot();
                eprintln!(
                    "ingero: OTLP export to {} recovered after {:.0?} ({} spans dropped meanwhile)",
                    self.cfg.traces.url,
                    since.elapsed(),
                    s.dropped_total()
                );
            }
            self.last_report = None;
        }
    }
}
