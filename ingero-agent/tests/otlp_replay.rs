//! `ingero export otlp` on a synthetic recording (the scenario, then labelled launches:
//! steps, overlapping request spans): its spans are `query --group-by step` and `query
//! --group-by request_id` row for row, `--dry-run --json` prints what it sends, findings name
//! their groups, and a Collector that refuses makes it exit non-zero.

mod otlp_common;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use ingero_e2e::otlp::{Answer, Receiver};
use ingero_trace::synth::{TraceOptions, write_trace};
use otlp_common::*;
use serde_json::Value;

fn recording(name: &str) -> Result<PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("ingero-otlp-replay-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("synth.pftrace");
    write_trace(
        path.clone(),
        &TraceOptions {
            events: 20_000,
            labels: true,
            ..Default::default()
        },
    )?;
    Ok(path)
}

fn export(args: &[&str], trace: &PathBuf) -> Result<std::process::Output> {
    Command::new(ingero())
        .args(["export", "otlp", "--trace"])
        .arg(trace)
        .args(args)
        .output()
        .context("running ingero export otlp")
}

#[test]
fn replayed_spans_are_query_rows_exactly() -> Result<()> {
    let trace = recording("exact")?;
    let rx = Receiver::start()?;
    let out = export(&["--otlp-endpoint", &rx.url()], &trace)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = rx.spans();
    let offset = recording_offset(vec![trace.clone()])?;
    for (name, key) in [("ingero.step", "step"), ("ingero.request", "request_id")] {
        let rows = query_rows(&trace, key)?;
        let got = named(&spans, name);
        assert!(rows.len() > 10, "{key}: {} rows", rows.len());
        assert_eq!(got.len(), rows.len(), "one {name} span per row");
        for s in got {
            let row = row_of(s, &rows).unwrap_or_else(|| panic!("no row for {:?}", s.labels()));
            assert_span_is_row(s, row, offset);
        }
    }
    // The findings that name a step are on its span.
    let explain = Command::new(ingero())
        .args(["explain", "--json", "--trace"])
        .arg(&trace)
        .output()?;
    let report: Value = serde_json::from_slice(&explain.stdout)?;
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    let about_steps: Vec<&Value> = findings
        .iter()
        .filter(|f| f["labels"].get("step").is_some())
        .collect();
    assert!(
        !about_steps.is_empty(),
        "the scenario has a finding about a step"
    );
    for f in about_steps {
        let step = f["labels"]["step"].as_str().unwrap_or_default();
        let span = named(&spans, "ingero.step")
            .into_iter()
            .find(|s| s.str("ingero.step") == Some(step))
            .expect("its span");
        let kind = span
            .str("ingero.finding.kind")
            .expect("a finding on the span");
        // The span carries the most severe finding about its group.
        let first = findings
            .iter()
            .find(|g| g["labels"].get("step").and_then(Value::as_str) == Some(step))
            .expect("one");
        assert_eq!(Some(kind), first["kind"].as_str());
        assert_eq!(span.str("ingero.finding.id"), first["id"].as_str());
    }
    Ok(())
}

#[test]
fn dry_run_json_prints_the_spans_it_would_send() -> Result<()> {
    let trace = recording("dry")?;
    let out = export(&["--dry-run", "--json"], &trace)?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let rx = Receiver::start()?;
    let sent = export(&["--otlp-endpoint", &rx.url()], &trace)?;
    assert!(sent.status.success());
    let spans = rx.spans();
    assert_eq!(lines.len(), spans.len());
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    for line in &lines {
        let span = spans
            .iter()
            .find(|s| Some(hex(&s.span.span_id).as_str()) == line["span_id"].as_str())
            .unwrap_or_else(|| panic!("sent: {line}"));
        assert_eq!(
            line["trace_id"].as_str(),
            Some(hex(&span.span.trace_id).as_str())
        );
        assert_eq!(line["name"].as_str(), Some(span.span.name.as_str()));
        assert_eq!(
            line["start_time_unix_nano"].as_u64(),
            Some(span.span.start_time_unix_nano)
        );
        assert_eq!(line["attributes"], Value::Object(span.attributes.clone()));
        assert_eq!(line["resource"], Value::Object(span.resource.clone()));
    }
    Ok(())
}

#[test]
fn a_refusing_collector_makes_the_replay_fail_loudly() -> Result<()> {
    let trace = recording("refused")?;
    let rx = Receiver::start()?;
    rx.script((0..100).map(|_| Answer::Status(401, None)));
    let out = export(&["--otlp-endpoint", &rx.url()], &trace)?;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rejected") && err.contains("401"), "{err}");
    assert!(rx.spans().is_empty());
    Ok(())
}
