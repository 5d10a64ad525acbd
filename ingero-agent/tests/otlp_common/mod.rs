//! What the OTLP export tests share: a synthetic workload with every case the live engine
//! must get right, and the comparison of a received span with `ingero query`'s row.

#![allow(dead_code, reason = "each test file uses part of it")]

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use ingero_e2e::otlp::ReceivedSpan;
use ingero_ebpf::{CudaOp, OffCpuReason};
use ingero_trace::model::{
    Comm, CudaArgs, Event, MemcpyKind, OffCpu, ProcessOp, Task, TimelineRecord,
};
use ingero_trace::synth::{annotation, cuda, launch_args, lifecycle, task};
use serde_json::Value;

pub const P1: u32 = 5_100_001;
pub const P2: u32 = 5_100_002;
pub const MS: u64 = 1_000_000;
pub const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

pub fn ingero() -> &'static str {
    env!("CARGO_BIN_EXE_ingero")
}

fn memcpy(count: u64, kind: MemcpyKind) -> CudaArgs {
    CudaArgs::Memcpy {
        count,
        kind,
        stream: Some(1),
        width_height: None,
        host_ptr: None,
    }
}

fn sync() -> CudaArgs {
    CudaArgs::Sync {
        stream: Some(1),
        event: None,
    }
}

fn off(t: Task, ts: u64, d: u64, reason: OffCpuReason) -> TimelineRecord {
    TimelineRecord::Event(Event::OffCpu(OffCpu {
        ts_ns: ts,
        duration_ns: d,
        task: t,
        reason,
        prev_state: if reason == OffCpuReason::Blocked {
            1
        } else {
            0
        },
        next_tid: 99,
        next_comm: Comm::from_str_lossy("kworker/0:1"),
    }))
}

/// One step's work on `t` from `ts`: launches, copies both ways, a sync, a preemption and a
/// blocking wait; `k` varies the numbers per step.
fn step_work(t: Task, ts: u64, k: u64, out: &mut Vec<TimelineRecord>) {
    let mut at = ts + 100_000;
    for i in 0..(3 + k % 3) {
        out.push(cuda(
            t,
            at,
            4_000 + i * 10 + k,
            CudaOp::LaunchKernel,
            0,
            launch_args(8, 1),
        ));
        at += 20_000;
    }
    out.push(cuda(
        t,
        at,
        50_000 + k,
        CudaOp::MemcpyAsync,
        0,
        memcpy(4096 * (k + 1), MemcpyKind::HostToDevice),
    ));
    at += 80_000;
    out.push(off(t, at, 300_000 + k * 1000, OffCpuReason::Preempted));
    at += 400_000;
    out.push(cuda(
        t,
        at,
        2_000_000 + k * 100,
        CudaOp::StreamSynchronize,
        0,
        sync(),
    ));
    at += 2_100_000;
    out.push(cuda(
        t,
        at,
        30_000 + k,
        CudaOp::Memcpy,
        i32::from(k == 4) * 700,
        memcpy(512 * k, MemcpyKind::DeviceToHost),
    ));
    at += 50_000;
    out.push(off(t, at, 1_000_000 + k * 3000, OffCpuReason::Blocked));
}

/// Two ranks of one run labelling steps 1..=5 (instant states, process-scoped; rank 1 has
/// an idle step 3), a trace-wide phase, request spans (one with a `traceparent`, two that
/// overlap) sent after the events they cover, a late label change, a step value that holds
/// again later, and an exit that ends rank 1's labels. In arrival order, times from `t0`.
pub fn workload(t0: u64) -> Vec<TimelineRecord> {
    let (a, b) = (task(P1, P1, "train_r0"), task(P2, P2, "train_r1"));
    let t = |ms: u64| t0 + ms * MS;
    let mut out = vec![
        annotation(
            t(0),
            None,
            Some(P1),
            &[("rank", "0"), ("run_id", "job-77"), ("world_size", "2")],
        ),
        annotation(
            t(0),
            None,
            Some(P2),
            &[("rank", "1"), ("run_id", "job-77"), ("world_size", "2")],
        ),
        annotation(t(0) + 1, None, None, &[("phase", "train")]),
    ];
    for s in 1..=5u64 {
        let base = t(s * 10);
        let other = base + 700_000;
        out.push(annotation(
            base,
            None,
            Some(P1),
            &[("step", &s.to_string())],
        ));
        out.push(annotation(
            other,
            None,
            Some(P2),
            &[("step", &s.to_string())],
        ));
        step_work(a, base, s, &mut out);
        if s != 3 {
            step_work(b, other, s + 10, &mut out);
        }
        if s == 2 {
            // Requests of rank 0, sent when they end (after their events were written).
            out.push(annotation(
                base + 100_000,
                Some(base + 2_000_000),
                Some(P1),
                &[("request_id", "r-1"), ("traceparent", TRACEPARENT)],
            ));
            out.push(annotation(
                base + 500_000,
                Some(base + 3_000_000),
                Some(P1),
                &[("request_id", "r-2")],
            ));
            out.push(annotation(
                base + 1_000_000,
                Some(base + 3_500_000),
                Some(P1),
                &[("request_id", "r-3")],
            ));
        }
        if s == 4 {
            // Late: stamped before the last events written.
            out.push(annotation(base + 1_000, None, None, &[("epoch", "0")]));
        }
    }
    // Rank 0 clears its step, then step 2 holds again (a validation pass of the same step),
    // long enough after its first part for the live export to have sent that one.
    out.push(annotation(t(60), None, Some(P1), &[("step", "")]));
    out.push(annotation(
        t(400),
        None,
        Some(P1),
        &[("step", "2"), ("phase", "val")],
    ));
    step_work(a, t(400), 7, &mut out);
    out.push(annotation(t(406), None, Some(P1), &[("step", "")]));
    out.push(lifecycle(b, t(408), ProcessOp::Exit, 0, ""));
    out
}

/// `ingero query --group-by KEYS --json` rows of `trace`.
pub fn query_rows(trace: &Path, keys: &str) -> Result<Vec<Value>> {
    let out = Command::new(ingero())
        .args(["query", "--group-by", keys, "--json", "--trace"])
        .arg(trace)
        .output()
        .context("running ingero query")?;
    ensure!(
        out.status.success(),
        "query: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

/// The row's group labels (its `labels` object) as the span carries them.
pub fn row_labels(row: &Value) -> serde_json::Map<String, Value> {
    row["labels"].as_object().cloned().unwrap_or_default()
}

/// The row of `rows` a span is about: the same labels and process.
pub fn row_of<'r>(span: &ReceivedSpan, rows: &'r [Value]) -> Option<&'r Value> {
    let pid = span.resource.get("process.pid").and_then(Value::as_u64);
    rows.iter()
        .find(|r| row_labels(r) == span.labels() && r["pid"].as_u64() == pid)
}

/// Every number the span carries equals the row's; its times are the row's, converted with
/// the recording's clock (`offset` = REALTIME − MONOTONIC).
pub fn assert_span_is_row(span: &ReceivedSpan, row: &Value, offset: i128) {
    let pairs = [
        ("ingero.cuda_calls", &row["cuda_calls"]),
        ("ingero.api_time_ns", &row["api_time_ns"]),
        ("ingero.sync_time_ns", &row["sync_time_ns"]),
        ("ingero.memcpy_time_ns", &row["memcpy_time_ns"]),
        ("ingero.memcpy.h2d_bytes", &row["memcpy_bytes"]["h2d"]),
        ("ingero.memcpy.d2h_bytes", &row["memcpy_bytes"]["d2h"]),
        ("ingero.memcpy.d2d_bytes", &row["memcpy_bytes"]["d2d"]),
        ("ingero.memcpy.other_bytes", &row["memcpy_bytes"]["other"]),
        ("ingero.launches", &row["launches"]),
        ("ingero.launch_time_ns", &row["launch_time_ns"]),
        ("ingero.errors", &row["errors"]),
        ("ingero.off_cpu_ns", &row["off_cpu_ns"]),
        ("ingero.off_cpu.preempted_ns", &row["preempted_ns"]),
        ("ingero.off_cpu.blocked_ns", &row["blocked_ns"]),
        ("ingero.held_ns", &row["duration_ns"]),
        ("ingero.recording.start_ns", &row["start_ns"]),
        ("ingero.recording.end_ns", &row["end_ns"]),
    ];
    for (attr, want) in pairs {
        assert_eq!(
            span.int(attr).map(|v| v as u64),
            want.as_u64(),
            "{attr} of {:?}",
            span.labels()
        );
    }
    match row["slowest_op"].as_object() {
        Some(s) => {
            assert_eq!(span.str("ingero.slowest.op"), s["op"].as_str());
            assert_eq!(
                span.int("ingero.slowest.duration_ns").map(|v| v as u64),
                s["duration_ns"].as_u64()
            );
        }
        None => assert!(span.attributes.get("ingero.slowest.op").is_none()),
    }
    let wall = |t: &Value| (i128::from(t.as_u64().unwrap_or(0)) + offset) as u64;
    assert_eq!(
        span.span.start_time_unix_nano,
        wall(&row["start_ns"]),
        "start of {:?}",
        span.labels()
    );
    assert_eq!(
        span.span.end_time_unix_nano,
        wall(&row["end_ns"]),
        "end of {:?}",
        span.labels()
    );
}

/// REALTIME − MONOTONIC as the recording's first clock snapshot states it, read with the
/// reader itself.
pub fn recording_offset(files: Vec<std::path::PathBuf>) -> Result<i128> {
    use ingero_trace::read::{TimeRange, TraceReader, empty_record};
    let mut r = TraceReader::from_files(files, TimeRange::all());
    let mut rec = empty_record();
    while r.next_into(&mut rec)? {}
    r.first_realtime_offset()
        .context("the recording has a clock snapshot")
}

/// Spans of one name.
pub fn named<'s>(spans: &'s [ReceivedSpan], name: &str) -> Vec<&'s ReceivedSpan> {
    spans.iter().filter(|s| s.span.name == name).collect()
}
