//! Kernel test of the OTLP export: two processes started as torchrun starts ranks label
//! their steps on the annotation socket while calling the real libcudart, traced with
//! `ingero trace --record --annotate --otlp-endpoint` pointed at an in-process OTLP
//! receiver. The spans received live are `query --group-by step` (and `request_id`) row for
//! row, exactly one per step and request, and `ingero export otlp` of the recording sends the
//! same spans. With a dead endpoint the recording is complete, the agent exits 0 and the
//! loss is reported (stderr, the final stats line, the recording's statistics).

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use ingero_e2e::otlp::{ReceivedSpan, Receiver, dead_endpoint};
use ingero_e2e::{Agent, Driver, agent_bin, cuda_driver, cudart, kernel_tests_enabled, run_ingero};
use serde_json::{Map, Value};

const STEPS: u32 = 6;
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn rank(lib: &str, socket: &str, rank: u32) -> Result<Driver> {
    let rank_text = rank.to_string();
    Driver::spawn_with_env(
        &cuda_driver()?,
        // 30 ms per step (the real library returns at once); rank 1 also sleeps 100 ms in
        // step 2, off the CPU.
        &[
            lib,
            "steps",
            socket,
            &STEPS.to_string(),
            if rank == 1 { "2" } else { "-1" },
            "100000",
            "-1",
            "0",
            "30000",
        ],
        &[
            ("RANK", &rank_text),
            ("LOCAL_RANK", &rank_text),
            ("WORLD_SIZE", "2"),
            ("TORCHELASTIC_RUN_ID", "e2e-otlp"),
        ],
    )
}

struct Run {
    dir: std::path::PathBuf,
    recording: String,
    pids: Vec<u64>,
    live: Vec<Value>,
    stderr: String,
}

/// Traces two ranks' steps (and one request span of rank 0) with `--otlp-endpoint url`.
fn trace_ranks(name: &str, url: &str) -> Result<Run> {
    let dir = std::env::temp_dir().join(format!("ingero-e2e-otlp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let recording = dir.join("run.pftrace").to_string_lossy().to_string();
    let socket = dir.join("annotate.sock").to_string_lossy().to_string();
    let lib = cudart()?.to_string_lossy().to_string();
    let mut drivers = Vec::new();
    let mut pids = Vec::new();
    for r in 0..2 {
        let mut d = rank(&lib, &socket, r)?;
        pids.push(d.read()?["pid"].as_u64().context("driver pid")?);
        drivers.push(d);
    }
    let agent = Agent::start(&[
        "--cuda-lib",
        &lib,
        "--pid",
        &format!("{},{}", pids[0], pids[1]),
        "-o",
        &recording,
        "--annotate",
        "--annotate-socket",
        &socket,
        "--otlp-endpoint",
        url,
        "--otlp-shutdown-timeout",
        "3s",
        "--otlp-metrics-interval",
        "1s",
    ])?;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    let running: Vec<_> = drivers
        .into_iter()
        .map(|d| std::thread::spawn(move || d.go_and_finish()))
        .collect();
    for r in running {
        let done = r
            .join()
            .map_err(|_| anyhow::anyhow!("driver thread panicked"))??;
        ensure!(done.get("done").is_some(), "{done}");
    }
    // A request over the whole run, trace-wide (the job's, whichever rank served it), sent
    // when it ends as an inference server's adapter sends it.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    let status = Command::new(agent_bin()?)
        .args(["annotate", "--socket", &socket])
        .args([
            "--label",
            "request_id=req-e2e",
            "--label",
            &format!("traceparent={TRACEPARENT}"),
        ])
        .args([
            "--span-start",
            &before.to_string(),
            "--span-end",
            &now.to_string(),
        ])
        .status()?;
    ensure!(status.success(), "ingero annotate: {status}");
    // Let the last labels through the reorder window, and a metrics interval pass.
    std::thread::sleep(Duration::from_millis(1500));
    let (live, stderr) = agent.stop_with_stderr()?;
    Ok(Run {
        stderr,
        dir,
        recording,
        pids,
        live,
    })
}

fn query(recording: &str, keys: &str) -> Result<Vec<Value>> {
    let q = run_ingero(&["query", "--trace", recording, "--group-by", keys, "--json"])?;
    Ok(serde_json::from_str::<Value>(&q)?
        .as_array()
        .context("rows")?
        .clone())
}

fn labels(row: &Value) -> Map<String, Value> {
    row["labels"].as_object().cloned().unwrap_or_default()
}

/// The labels of the request span that encloses the whole run. It is sent when the ranks are
/// done, so whether a step's live span carries them depends on whether the step's span was sent
/// before it arrived (docs/fleet.md, "context labels"); `query` of the recording, and the
/// replay, give them to every step. Step spans are compared without them.
const LATE_CONTEXT: [&str; 2] = ["request_id", "traceparent"];

fn without_late_context(mut labels: Map<String, Value>) -> Map<String, Value> {
    for k in LATE_CONTEXT {
        labels.remove(k);
    }
    labels
}

/// The span's numbers are the row's.
fn same_numbers(s: &ReceivedSpan, row: &Value) -> bool {
    [
        ("ingero.cuda_calls", &row["cuda_calls"]),
        ("ingero.api_time_ns", &row["api_time_ns"]),
        ("ingero.sync_time_ns", &row["sync_time_ns"]),
        ("ingero.memcpy.h2d_bytes", &row["memcpy_bytes"]["h2d"]),
        ("ingero.memcpy.d2h_bytes", &row["memcpy_bytes"]["d2h"]),
        ("ingero.launches", &row["launches"]),
        ("ingero.errors", &row["errors"]),
        ("ingero.off_cpu.preempted_ns", &row["preempted_ns"]),
        ("ingero.off_cpu.blocked_ns", &row["blocked_ns"]),
        ("ingero.held_ns", &row["duration_ns"]),
        ("ingero.recording.start_ns", &row["start_ns"]),
        ("ingero.recording.end_ns", &row["end_ns"]),
    ]
    .iter()
    .all(|(k, v)| s.int(k).map(|x| x as u64) == v.as_u64())
}

fn pid_of(s: &ReceivedSpan) -> Option<u64> {
    s.resource.get("process.pid").and_then(Value::as_u64)
}

#[test]
fn live_spans_are_query_rows_and_the_replay_sends_the_same() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let rx = Receiver::start()?;
    let run = trace_ranks("live", &rx.url())?;
    assert!(rx.errors().is_empty(), "{:?}", rx.errors());
    let spans = rx.spans();
    let stats = run
        .live
        .iter()
        .rev()
        .find(|l| l["type"] == "stats" && l["final"] == true)
        .context("final stats line")?;
    assert_eq!(
        stats["otlp"]["spans_sent"].as_u64(),
        Some(spans.len() as u64),
        "{}",
        stats["otlp"]
    );
    assert_eq!(
        stats["otlp"]["spans_queued"].as_u64(),
        Some(spans.len() as u64)
    );

    for (name, key) in [("ingero.step", "step"), ("ingero.request", "request_id")] {
        let rows = query(&run.recording, key)?;
        let got: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.span.name == name).collect();
        assert_eq!(
            got.len(),
            rows.len(),
            "exactly one {name} span per row: {rows:#?}"
        );
        let of_step = |l: Map<String, Value>| {
            if name == "ingero.step" {
                without_late_context(l)
            } else {
                l
            }
        };
        for s in &got {
            let row = rows
                .iter()
                .find(|r| {
                    of_step(labels(r)) == of_step(s.labels()) && r["pid"].as_u64() == pid_of(s)
                })
                .with_context(|| format!("no row for {:?}", s.labels()))?;
            assert!(
                same_numbers(s, row),
                "{name} {:?}:\n{:#?}\n{row:#}",
                s.labels(),
                s.attributes
            );
        }
    }
    // Each rank's steps 0..STEPS (and the closing label), the same trace for a step of both.
    let steps: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.span.name == "ingero.step")
        .collect();
    for p in &run.pids {
        let mine: Vec<&&ReceivedSpan> = steps.iter().filter(|s| pid_of(s) == Some(*p)).collect();
        assert_eq!(mine.len(), STEPS as usize + 1, "pid {p}");
        // Every step had calls (where the clocks put a step's first call, a label sent a few
        // microseconds before it, is not what this test is about).
        for s in &mine {
            let step: u32 = s
                .str("ingero.step")
                .and_then(|v| v.parse().ok())
                .unwrap_or(u32::MAX);
            if step < STEPS {
                assert!(
                    s.int("ingero.cuda_calls").unwrap_or(0) > 0,
                    "pid {p} step {step}"
                );
            }
        }
    }
    for n in 0..STEPS {
        let ids: Vec<&Vec<u8>> = steps
            .iter()
            .filter(|s| s.str("ingero.step") == Some(&n.to_string()))
            .map(|s| &s.span.trace_id)
            .collect();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0], ids[1], "step {n} of both ranks is one trace");
    }
    let r = steps
        .iter()
        .find(|s| pid_of(s) == Some(run.pids[1]))
        .context("rank 1")?;
    assert_eq!(r.resource.get("ingero.rank"), Some(&Value::from(1)));
    assert_eq!(
        r.resource.get("ingero.run_id").and_then(Value::as_str),
        Some("e2e-otlp")
    );
    let req = spans
        .iter()
        .find(|s| s.span.name == "ingero.request")
        .context("the request")?;
    assert_eq!(pid_of(req), None, "a trace-wide request merges the ranks");
    assert!(
        req.int("ingero.cuda_calls").unwrap_or(0) >= i64::from(2 * 7 * STEPS),
        "both ranks' calls"
    );
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(hex(&req.span.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(hex(&req.span.parent_span_id), "b7ad6b7169203331");
    assert!(!rx.metric_requests().is_empty(), "metrics were sent");

    // The replay sends the same spans.
    let replay = Receiver::start()?;
    run_ingero(&[
        "export",
        "otlp",
        "--trace",
        &run.recording,
        "--otlp-endpoint",
        &replay.url(),
    ])?;
    let again = replay.spans();
    assert_eq!(again.len(), spans.len());
    let strip = |s: &ReceivedSpan| {
        let mut a = s.attributes.clone();
        a.retain(|k, _| !k.starts_with("ingero.finding."));
        if s.span.name == "ingero.step" {
            for k in LATE_CONTEXT {
                a.remove(&format!("ingero.label.{k}"));
            }
        }
        a
    };
    for l in &spans {
        let r = again
            .iter()
            .find(|r| r.span.span_id == l.span.span_id)
            .with_context(|| format!("replayed {:?}", l.labels()))?;
        assert_eq!(r.span.trace_id, l.span.trace_id);
        assert_eq!(
            (r.span.start_time_unix_nano, r.span.end_time_unix_nano),
            (l.span.start_time_unix_nano, l.span.end_time_unix_nano)
        );
        assert_eq!(strip(r), strip(l));
    }
    let _ = std::fs::remove_dir_all(&run.dir);
    Ok(())
}

#[test]
fn a_dead_collector_leaves_the_recording_complete_and_the_agent_exiting_0() -> Result<()> {
    if !kernel_tests_enabled() {
        return Ok(());
    }
    let run = trace_ranks("dead", &dead_endpoint()?)?;
    assert!(
        run.stderr.contains("OTLP export to") && run.stderr.contains("failing"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("otlp: 0 of"),
        "the summary says what was lost:\n{}",
        run.stderr
    );
    // The loss is reported in the final stats line, as drops.
    let stats = run
        .live
        .iter()
        .rev()
        .find(|l| l["type"] == "stats" && l["final"] == true)
        .context("final stats line")?;
    let otlp = &stats["otlp"];
    let queued = otlp["spans_queued"].as_u64().unwrap_or(0);
    assert!(queued >= u64::from(2 * STEPS), "{otlp}");
    assert_eq!(otlp["spans_sent"], 0, "{otlp}");
    let dropped: u64 = otlp["spans_dropped"]
        .as_object()
        .context("by reason")?
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(dropped, queued, "{otlp}");
    let drops: u64 = stats["drops"]
        .as_object()
        .context("drops")?
        .iter()
        .filter(|(k, _)| k.starts_with("otlp_spans_dropped_"))
        .filter_map(|(_, v)| v.as_u64())
        .sum();
    assert_eq!(drops, queued);
    // The recording holds every call the driver made: per rank, a cudaMalloc (which fails
    // without a GPU, so nothing is freed), 5 launches and a sync per step (counted by op, so
    // the test does not depend on where the clocks put a step's first call), and a row for
    // every step label.
    let rows = query(&run.recording, "step")?;
    for p in &run.pids {
        let pid = p.to_string();
        let ops = run_ingero(&["query", "--trace", &run.recording, "--pid", &pid, "--json"])?;
        let ops: Vec<Value> = serde_json::from_str::<Value>(&ops)?
            .as_array()
            .context("ops")?
            .clone();
        let count = |op: &str| {
            ops.iter()
                .find(|o| o["op"] == op)
                .and_then(|o| o["count"].as_u64())
                .unwrap_or(0)
        };
        let steps = u64::from(STEPS);
        assert_eq!(
            (
                count("cudaMalloc"),
                count("cudaLaunchKernel"),
                count("cudaStreamSynchronize")
            ),
            (steps, 5 * steps, steps),
            "pid {p}: {ops:#?}"
        );
        let mut labelled: Vec<u64> = rows
            .iter()
            .filter(|r| r["pid"].as_u64() == Some(*p))
            .filter_map(|r| r["labels"]["step"].as_str()?.parse().ok())
            .collect();
        labelled.sort_unstable();
        assert_eq!(labelled, (0..=steps).collect::<Vec<_>>(), "pid {p}");
    }
    let _ = std::fs::remove_dir_all(&run.dir);
    Ok(())
}
