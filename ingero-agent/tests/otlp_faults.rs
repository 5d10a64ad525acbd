//! The export against a Collector that misbehaves, through the in-process receiver: an
//! endpoint nothing listens on, 503 with `Retry-After` (the wait measured), 429 backed off,
//! 400 not retried, partial success, and a stalled Collector, which must cost the recording
//! nothing: every span is accounted for (sent + dropped by reason = made) and the recording
//! holds every record.

mod otlp_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ingero_agent::export::otlp::config::{OtlpConfig, OtlpFlags};
use ingero_agent::export::otlp::counters::{DropReason, ExportCounters, Snapshot};
use ingero_agent::export::otlp::live::engine::EngineConfig;
use ingero_agent::export::otlp::live::run::{LiveSettings, OtlpRun};
use ingero_agent::export::otlp::queue::{Queue, QueueLimits};
use ingero_agent::export::otlp::resource::HostResource;
use ingero_agent::export::otlp::sender::{Sender, SenderConfig, send_all};
use ingero_agent::export::otlp::span::{AttrValue, SpanData};
use ingero_agent::export::otlp::transport::{Endpoint, RetryPolicy};
use ingero_agent::live::Stats;
use ingero_agent::recording::Recording;
use ingero_agent::timeline::merger::MergerConfig;
use ingero_e2e::otlp::{Answer, Receiver, dead_endpoint};
use ingero_trace::clock::monotonic_now_ns;
use ingero_trace::model::{Event, FinalStats, ReadRecord, SessionInfo, TimelineRecord};
use ingero_trace::read::{TimeRange, TraceReader};
use ingero_trace::write::RecorderConfig;
use otlp_common::workload;

fn spans(n: u64) -> Vec<SpanData> {
    (0..n)
        .map(|i| SpanData {
            trace_id: [7; 16],
            span_id: (i + 1).to_be_bytes(),
            parent_span_id: None,
            name: "ingero.step",
            start_unix_ns: 1_000 + i,
            end_unix_ns: 2_000 + i,
            attributes: vec![("ingero.step".into(), AttrValue::Str(i.to_string()))],
            process: None,
        })
        .collect()
}

fn sender(url: &str, gzip: bool, retry: RetryPolicy) -> SenderConfig {
    SenderConfig {
        traces: Endpoint {
            url: format!("{url}/v1/traces"),
            headers: vec![("x-test".into(), "1".into())],
            gzip,
        },
        metrics: None,
        timeout: Duration::from_secs(5),
        retry,
        report: false,
    }
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(200),
        deadline: Duration::from_secs(10),
    }
}

fn send(url: &str, n: u64, retry: RetryPolicy) -> Snapshot {
    let counters = Arc::new(ExportCounters::default());
    send_all(
        sender(url, true, retry),
        HostResource::default(),
        spans(n),
        counters.clone(),
    );
    counters.snapshot()
}

fn dropped(s: &Snapshot, r: DropReason) -> u64 {
    s.dropped
        .iter()
        .find(|(k, _)| *k == r.name())
        .map_or(0, |(_, n)| *n)
}

fn accounted(s: &Snapshot) {
    assert_eq!(
        s.spans_sent + s.dropped_total(),
        s.spans_queued,
        "every span accounted for: {s:?}"
    );
}

#[test]
fn a_dead_endpoint_is_retried_until_the_deadline_then_counted() -> Result<()> {
    let retry = RetryPolicy {
        deadline: Duration::from_millis(600),
        ..quick()
    };
    let s = send(&dead_endpoint()?, 10, retry);
    assert_eq!(s.spans_sent, 0);
    assert_eq!(dropped(&s, DropReason::RetriesExhausted), 10);
    assert!(s.retries >= 2, "connection refused is retried: {s:?}");
    assert!(s.last_error.is_some());
    accounted(&s);
    Ok(())
}

#[test]
fn retry_after_is_honoured_on_503() -> Result<()> {
    let rx = Receiver::start()?;
    rx.script([Answer::Status(503, Some("1".into()))]);
    let s = send(&rx.url(), 5, quick());
    assert_eq!(s.spans_sent, 5);
    assert_eq!(s.retries, 1);
    let log = rx.log();
    assert_eq!(log.len(), 2, "{log:?}");
    let waited = log[1].at - log[0].at;
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(3),
        "waited {waited:?} for Retry-After: 1"
    );
    assert_eq!(rx.spans().len(), 5);
    accounted(&s);
    Ok(())
}

#[test]
fn too_many_requests_backs_off_exponentially() -> Result<()> {
    let rx = Receiver::start()?;
    rx.script([
        Answer::Status(429, None),
        Answer::Status(429, None),
        Answer::Status(502, None),
    ]);
    let s = send(&rx.url(), 3, quick());
    assert_eq!((s.spans_sent, s.retries), (3, 3));
    let log = rx.log();
    assert_eq!(log.len(), 4);
    let gaps: Vec<Duration> = log.windows(2).map(|w| w[1].at - w[0].at).collect();
    for (gap, least) in gaps.iter().zip([50u64, 100, 200]) {
        assert!(*gap >= Duration::from_millis(least), "{gaps:?}");
    }
    accounted(&s);
    Ok(())
}

#[test]
fn a_bad_request_is_not_retried_and_is_counted() -> Result<()> {
    let rx = Receiver::start()?;
    rx.script([Answer::Status(400, None)]);
    let s = send(&rx.url(), 4, quick());
    assert_eq!(s.spans_sent, 0);
    assert_eq!(s.retries, 0);
    assert_eq!(dropped(&s, DropReason::Rejected), 4);
    assert_eq!(rx.log().len(), 1, "one request only");
    assert!(
        s.last_error.as_deref().is_some_and(|e| e.contains("400")),
        "{s:?}"
    );
    accounted(&s);
    Ok(())
}

#[test]
fn partial_success_is_counted() -> Result<()> {
    let rx = Receiver::start()?;
    rx.script([Answer::Partial(2)]);
    let s = send(&rx.url(), 6, quick());
    assert_eq!(s.spans_sent, 4);
    assert_eq!(dropped(&s, DropReason::PartialSuccess), 2);
    accounted(&s);
    Ok(())
}

#[test]
fn bodies_are_protobuf_gzip_with_the_headers_asked_for() -> Result<()> {
    let rx = Receiver::start()?;
    let counters = Arc::new(ExportCounters::default());
    send_all(
        sender(&rx.url(), true, quick()),
        HostResource::default(),
        spans(2),
        counters.clone(),
    );
    send_all(
        sender(&rx.url(), false, quick()),
        HostResource::default(),
        spans(2),
        counters,
    );
    let log = rx.log();
    assert_eq!(log.len(), 2);
    assert!(
        log.iter()
            .all(|l| l.content_type == "application/x-protobuf" && l.path == "/v1/traces")
    );
    assert_eq!((log[0].gzip, log[1].gzip), (true, false));
    assert_eq!(rx.spans().len(), 4);
    assert!(rx.errors().is_empty(), "{:?}", rx.errors());
    Ok(())
}

#[test]
fn a_stalled_collector_never_blocks_the_producer_and_the_oldest_spans_go() -> Result<()> {
    let rx = Receiver::start()?;
    rx.script([Answer::Stall(Duration::from_secs(3))]);
    let counters = Arc::new(ExportCounters::default());
    let limits = QueueLimits {
        max_spans: 100,
        max_bytes: 1 << 20,
    };
    let queue = Arc::new(Queue::new(limits, counters.clone()));
    let s = Sender::spawn(
        sender(&rx.url(), true, quick()),
        HostResource::default(),
        queue.clone(),
        counters.clone(),
    )?;
    queue.push(spans(1).remove(0));
    // The first request is in the stalled Collector's hands...
    let started = Instant::now();
    while rx.log().is_empty() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rx.log().len(), 1);
    // ...while the producer goes on: every push returns, the queue keeps its bound.
    for sp in spans(5_000) {
        queue.push(sp);
    }
    assert_eq!(
        rx.log().len(),
        1,
        "the stalled request is still the only one"
    );
    assert_eq!(queue.len(), 100);
    assert_eq!(counters.dropped(DropReason::QueueFull), 4_900);
    s.finish(Duration::from_millis(200));
    let snap = counters.snapshot();
    assert!(dropped(&snap, DropReason::Shutdown) >= 100, "{snap:?}");
    accounted(&snap);
    Ok(())
}

/// Records the workload with the live export pointed at `url` (a short shutdown grace and
/// a small queue); returns the counts and the recording's CUDA calls read back.
fn record_with(url: &str, queue: QueueLimits) -> Result<(Snapshot, usize, usize)> {
    let dir = std::env::temp_dir().join(format!(
        "ingero-otlp-faults-{}-{}",
        std::process::id(),
        queue.max_spans
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let flags = OtlpFlags {
        endpoint: Some(url.to_owned()),
        ..Default::default()
    };
    let mut config = OtlpConfig::resolve(&flags, &|_| None)?.context("an endpoint")?;
    config.queue = queue;
    config.retry = RetryPolicy {
        deadline: Duration::from_millis(400),
        ..quick()
    };
    let settings = LiveSettings {
        engine: EngineConfig::default(),
        config,
        shutdown_grace: Duration::from_millis(500),
        metrics_every: Duration::from_secs(3600),
    };
    let cfg = RecorderConfig {
        path: Some(dir.join("run.pftrace")),
        session: SessionInfo::this_host(),
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let merger = MergerConfig {
        window: Duration::ZERO,
        ..MergerConfig::default()
    };
    let mut recording = Recording::start(cfg, merger)?;
    let mut run = OtlpRun::start(settings, &mut recording)?;
    let input = workload(monotonic_now_ns() - 10_000_000_000);
    let calls_in = input
        .iter()
        .filter(|r| matches!(r, TimelineRecord::Event(Event::Cuda(_))))
        .count();
    for r in input {
        recording.push(r);
        recording.release();
    }
    let stats = Stats::default();
    let t = Instant::now();
    run.finish(&mut recording, &stats, Vec::new());
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the end waited {:?}",
        t.elapsed()
    );
    let files = recording.finish(FinalStats::default())?;
    let calls_out = TraceReader::from_files(files, TimeRange::all())
        .filter(|r| matches!(r, Ok(ReadRecord::Cuda(_))))
        .count();
    let _ = std::fs::remove_dir_all(&dir);
    Ok((run.snapshot(), calls_in, calls_out))
}

#[test]
fn a_dead_collector_costs_the_recording_nothing() -> Result<()> {
    let (s, calls_in, calls_out) = record_with(&dead_endpoint()?, QueueLimits::default())?;
    assert_eq!(calls_out, calls_in, "the recording holds every call");
    assert!(s.spans_queued >= 10, "{s:?}");
    assert_eq!(s.spans_sent, 0);
    assert_eq!(s.dropped_total(), s.spans_queued, "{s:?}");
    accounted(&s);
    Ok(())
}

#[test]
fn a_stalled_collector_costs_the_recording_nothing() -> Result<()> {
    let rx = Receiver::start()?;
    rx.script((0..100).map(|_| Answer::Stall(Duration::from_secs(2))));
    let small = QueueLimits {
        max_spans: 3,
        max_bytes: 1 << 20,
    };
    let (s, calls_in, calls_out) = record_with(&rx.url(), small)?;
    assert_eq!(calls_out, calls_in, "the recording holds every call");
    assert!(dropped(&s, DropReason::QueueFull) > 0, "{s:?}");
    assert!(dropped(&s, DropReason::Shutdown) > 0, "{s:?}");
    accounted(&s);
    Ok(())
}
