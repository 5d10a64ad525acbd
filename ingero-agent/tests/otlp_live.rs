//! The live export against `query` and the replay, in process: a synthetic workload goes
//! through the real recording path (reorder window, writer, tap, hand-off) with the live
//! export on, to an in-process OTLP receiver. Then `ingero query --group-by` on the file it
//! wrote and `ingero export otlp` of that file to a second receiver must give the same
//! groups, number for number, id for id (the documented exceptions checked as such).

mod otlp_common;

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use ingero_agent::export::otlp::config::{OtlpConfig, OtlpFlags};
use ingero_agent::export::otlp::live::engine::EngineConfig;
use ingero_agent::export::otlp::live::run::{LiveSettings, OtlpRun};
use ingero_agent::live::Stats;
use ingero_agent::recording::Recording;
use ingero_agent::timeline::merger::MergerConfig;
use ingero_e2e::otlp::{ReceivedSpan, Receiver};
use ingero_trace::clock::monotonic_now_ns;
use ingero_trace::model::{FinalStats, SessionInfo, TimelineRecord};
use ingero_trace::write::RecorderConfig;
use otlp_common::*;
use serde_json::Value;

fn settings(url: &str, group_by: &[&str]) -> Result<LiveSettings> {
    let flags = OtlpFlags {
        endpoint: Some(url.to_owned()),
        group_by: group_by.iter().map(|k| (*k).to_owned()).collect(),
        ..Default::default()
    };
    let config = OtlpConfig::resolve(&flags, &|_| None)?.context("an endpoint")?;
    Ok(LiveSettings {
        engine: EngineConfig {
            group_by: config.group_by.clone(),
            ..EngineConfig::default()
        },
        config,
        shutdown_grace: Duration::from_secs(10),
        metrics_every: Duration::from_millis(50),
    })
}

/// Records `workload` with the live export on; returns the recording's files.
fn record_live(
    dir: &std::path::Path,
    url: &str,
    group_by: &[&str],
) -> Result<Vec<std::path::PathBuf>> {
    let cfg = RecorderConfig {
        path: Some(dir.join("live.pftrace")),
        session: SessionInfo::this_host(),
        chown_to_sudo_user: false,
        // Small files: the workload crosses rotations, whose re-opened states the engine
        // must follow.
        max_file_size: 12 * 1024,
        compression_level: 0,
        ..Default::default()
    };
    // Records are pushed when they would arrive (a span when it ends), against the real
    // clock, through a reorder window that puts most of them back in order; the late epoch
    // label is older than the window and is written late, as it would be live.
    let merger = MergerConfig {
        window: Duration::from_millis(20),
        ..MergerConfig::default()
    };
    let mut recording = Recording::start(cfg, merger)?;
    let mut run = OtlpRun::start(settings(url, group_by)?, &mut recording)?;
    let t0 = monotonic_now_ns() + 5_000_000;
    let stats = Stats::default();
    let mut arrival = 0u64;
    for r in workload(t0) {
        let ends = match &r {
            TimelineRecord::Annotation(a) => a.end_ns.unwrap_or(a.ts_ns),
            other => other.ts_ns(),
        };
        arrival = arrival.max(ends);
        while monotonic_now_ns() < arrival {
            std::thread::sleep(Duration::from_micros(200));
        }
        recording.push(r);
        recording.release();
        run.each_second(&stats, Vec::new());
    }
    run.finish(&mut recording, &stats, Vec::new());
    let counts = run.snapshot();
    assert_eq!(counts.dropped_total(), 0, "{counts:?}");
    assert_eq!(counts.spans_incomplete, 0, "{counts:?}");
    recording.finish(FinalStats::default())
}

fn key(
    s: &ReceivedSpan,
) -> (
    String,
    serde_json::Map<String, Value>,
    Option<u64>,
    Option<i64>,
) {
    (
        s.span.name.clone(),
        s.labels(),
        s.resource.get("process.pid").and_then(Value::as_u64),
        s.int("ingero.part"),
    )
}

#[test]
fn live_spans_are_query_rows_and_the_replayed_spans() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("ingero-otlp-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let live = Receiver::start()?;
    let files = record_live(&dir, &live.url(), &["step"])?;
    assert!(files.len() > 1, "the recording rotated: {files:?}");
    assert!(live.errors().is_empty(), "{:?}", live.errors());
    let live_spans = live.spans();
    let offset = recording_offset(files.clone())?;
    // The directory: all of the session's rotated files.
    let trace = &dir;

    // Steps: one span per query row, except the step that held again (one row, two spans).
    let rows = query_rows(trace, "step")?;
    let steps = named(&live_spans, "ingero.step");
    let again: Vec<&&ReceivedSpan> = steps
        .iter()
        .filter(|s| {
            s.labels().get("step").and_then(Value::as_str) == Some("2")
                && s.resource.get("process.pid").and_then(Value::as_u64) == Some(u64::from(P1))
        })
        .collect();
    assert_eq!(again.len(), 2, "step 2 of rank 0 held twice: {again:#?}");
    assert_eq!(
        again
            .iter()
            .filter(|s| s.int("ingero.part") == Some(2))
            .count(),
        1
    );
    assert_eq!(steps.len(), rows.len() + 1, "{rows:#?}");
    for s in steps
        .iter()
        .filter(|s| !again.iter().any(|a| std::ptr::eq(**a, **s)))
    {
        let row = row_of(s, &rows).unwrap_or_else(|| panic!("no row for {:?}", s.labels()));
        assert_span_is_row(s, row, offset);
    }
    // The two parts add up to the row.
    let row2 = rows
        .iter()
        .find(|r| r["labels"]["step"] == "2" && r["pid"] == P1)
        .expect("step 2 of rank 0");
    for (attr, field) in [
        ("ingero.cuda_calls", "cuda_calls"),
        ("ingero.api_time_ns", "api_time_ns"),
        ("ingero.off_cpu.blocked_ns", "blocked_ns"),
    ] {
        let sum: i64 = again.iter().filter_map(|s| s.int(attr)).sum();
        assert_eq!(sum as u64, row2[field].as_u64().unwrap_or(0), "{attr}");
    }
    // Every rank's step N is one trace; the idle step is there too.
    for n in ["1", "4"] {
        let ids: Vec<&Vec<u8>> = steps
            .iter()
            .filter(|s| s.labels().get("step").and_then(Value::as_str) == Some(n))
            .map(|s| &s.span.trace_id)
            .collect();
        assert_eq!(ids.len(), 2, "step {n} of both ranks");
        assert_eq!(ids[0], ids[1], "step {n}: one trace");
    }
    assert!(
        steps.iter().any(|s| s.int("ingero.cuda_calls") == Some(0)),
        "rank 1's idle step 3"
    );
    let r1 = steps
        .iter()
        .find(|s| s.resource.get("process.pid").and_then(Value::as_u64) == Some(u64::from(P2)))
        .expect("rank 1");
    assert_eq!(r1.resource.get("ingero.rank"), Some(&Value::from(1)));
    assert_eq!(
        r1.resource.get("ingero.run_id").and_then(Value::as_str),
        Some("job-77")
    );
    assert_eq!(
        r1.resource.get("process.command").and_then(Value::as_str),
        Some("train_r1")
    );

    // Requests: one span per row; the one with a traceparent joins the application's trace.
    let req_rows = query_rows(trace, "request_id")?;
    let reqs = named(&live_spans, "ingero.request");
    assert_eq!(reqs.len(), req_rows.len());
    assert_eq!(reqs.len(), 3);
    for s in &reqs {
        assert_span_is_row(s, row_of(s, &req_rows).expect("a row"), offset);
    }
    let r1 = reqs
        .iter()
        .find(|s| s.str("ingero.request_id") == Some("r-1"))
        .expect("r-1");
    assert_eq!(hex(&r1.span.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex(&r1.span.parent_span_id), "00f067aa0ba902b7");

    // The replay of the file sends the same spans: ids, times and attributes (findings and
    // the live part number aside), and one span for the step that held twice.
    let replay = Receiver::start()?;
    let out = Command::new(ingero())
        .args([
            "export",
            "otlp",
            "--otlp-endpoint",
            &replay.url(),
            "--trace",
        ])
        .arg(trace)
        .output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed = replay.spans();
    assert_eq!(replayed.len(), rows.len() + req_rows.len());
    let strip = |s: &ReceivedSpan| {
        let mut a = s.attributes.clone();
        a.retain(|k, _| !k.starts_with("ingero.finding."));
        a
    };
    for l in live_spans
        .iter()
        .filter(|s| !again.iter().any(|a| std::ptr::eq(**a, *s)))
    {
        let r = replayed
            .iter()
            .find(|r| key(r) == key(l))
            .unwrap_or_else(|| panic!("no replayed span for {:?}", key(l)));
        assert_eq!(r.span.trace_id, l.span.trace_id);
        assert_eq!(r.span.span_id, l.span.span_id);
        assert_eq!(r.span.parent_span_id, l.span.parent_span_id);
        assert_eq!(
            (r.span.start_time_unix_nano, r.span.end_time_unix_nano),
            (l.span.start_time_unix_nano, l.span.end_time_unix_nano)
        );
        assert_eq!(strip(r), strip(l), "{:?}", key(l));
        for k in [
            "process.pid",
            "process.command",
            "ingero.rank",
            "ingero.run_id",
            "ingero.machine_id",
            "service.name",
            "host.name",
        ] {
            assert_eq!(r.resource.get(k), l.resource.get(k), "resource {k}");
        }
    }
    // Metrics came too, with the exporter's own counters.
    let names: Vec<String> = live
        .metric_requests()
        .iter()
        .flat_map(|m| m.resource_metrics.iter())
        .flat_map(|r| r.scope_metrics.iter())
        .flat_map(|s| s.metrics.iter().map(|m| m.name.clone()))
        .collect();
    for m in [
        "ingero.cuda.calls",
        "ingero.cuda.duration",
        "ingero.export.spans_sent",
        "ingero.export.dropped",
        "ingero.export.retries",
    ] {
        assert!(names.iter().any(|n| n == m), "{m} in {names:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
