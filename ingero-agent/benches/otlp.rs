//! The OTLP export's cost (docs/benchmarks-otlp.md):
//!
//! 1. **Per span**: CPU of encoding (protobuf), gzip and the HTTP send to a local receiver,
//!    on the sending thread, and bytes per span on the wire and before gzip; the share of a
//!    core at 10,000 spans/s.
//! 2. **The drain path with export off and on**: the pipeline of the drain benchmark (decode,
//!    statistics) with the recording (reorder window, writer) and step and request
//!    annotations, its thread's CPU per event; on, the live engine's thread CPU per event
//!    (its fold of every event into the groups) and per span, beside `query --group-by`'s
//!    fold of the same recording (the baseline the engine's work is: one more fold); and the
//!    drain thread's instructions off and on, counted by callgrind in a copy of this
//!    benchmark when valgrind is installed (deterministic where CPU time is not).
//!
//! Run: `cargo bench -p ingero-agent --bench otlp` (or `cargo xtask bench otlp`). All CPU
//! figures are thread CPU (the machine is shared); ratios are against baselines measured in
//! the same run.

mod common;

use std::hint::black_box;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use common::{RECORDS, records};
use flate2::write::GzEncoder;
use ingero_agent::analyze::{self, Analysis, QueryMode, SelectionSpec};
use ingero_agent::export::otlp::config::{OtlpConfig, OtlpFlags};
use ingero_agent::export::otlp::counters::{ExportCounters, Snapshot, thread_cpu_ns};
use ingero_agent::export::otlp::encode::{Gzip, trace_request};
use ingero_agent::export::otlp::live::engine::EngineConfig;
use ingero_agent::export::otlp::live::run::{LiveSettings, OtlpRun};
use ingero_agent::export::otlp::resource::{HostFacts, HostResource};
use ingero_agent::export::otlp::sender::{MAX_BATCH, SenderConfig, send_all};
use ingero_agent::export::otlp::span::{AttrKey, AttrValue, ProcessResource, SpanData};
use ingero_agent::export::otlp::wire::trace_request_bytes;
use ingero_agent::pipeline::Pipeline;
use ingero_agent::recording::Recording;
use ingero_agent::timeline::merger::MergerConfig;
use ingero_e2e::otlp::Receiver;
use ingero_trace::model::{AnnotationRecord, FinalStats, Scope, SessionInfo};
use ingero_trace::write::RecorderConfig;
use prost::Message;
use std::io::Write;

const SPANS: usize = 50_000;
const ROUNDS: usize = 3;
/// Rounds of the drain path, export off and on alternately (the figures are the best of
/// each: the machines this runs on are shared, and a round's neighbours vary).
const DRAIN_ROUNDS: usize = 7;
/// Records between two releases of the reorder window (the agent releases every 100 ms).
const RELEASE_EVERY: usize = 2_000;
/// A step label every this many records, a request span every [`REQUEST_EVERY`].
const STEP_EVERY: usize = 2_000;
const REQUEST_EVERY: usize = 500;
const PID: u32 = 4242;

fn host() -> HostResource {
    HostResource::new(&HostFacts::this_host(
        "ingero".into(),
        "gpu-node-1".into(),
        1234,
        Vec::new(),
    ))
}

/// Spans shaped like the export's step spans: five labels, the counters, a process.
fn spans() -> Vec<SpanData> {
    let process = Arc::new(ProcessResource {
        pid: PID,
        command: "python3".into(),
        labels: vec![
            ("ingero.rank", "3".into()),
            ("ingero.run_id", "job-20261201-a".into()),
        ],
    });
    let counters = [
        "ingero.held_ns",
        "ingero.cuda_calls",
        "ingero.api_time_ns",
        "ingero.sync_time_ns",
        "ingero.memcpy_time_ns",
        "ingero.memcpy.h2d_bytes",
        "ingero.memcpy.d2h_bytes",
        "ingero.memcpy.d2d_bytes",
        "ingero.memcpy.other_bytes",
        "ingero.launches",
        "ingero.launch_time_ns",
        "ingero.errors",
        "ingero.off_cpu_ns",
        "ingero.off_cpu.preempted_ns",
        "ingero.off_cpu.blocked_ns",
        "ingero.slowest.duration_ns",
        "ingero.recording.start_ns",
        "ingero.recording.end_ns",
    ];
    (0..SPANS as u64)
        .map(|i| {
            let mut attributes: Vec<(AttrKey, AttrValue)> = vec![
                ("ingero.label.step".into(), AttrValue::Str(i.to_string())),
                ("ingero.label.phase".into(), AttrValue::Str("train".into())),
                (
                    "ingero.label.epoch".into(),
                    AttrValue::Str((i / 1000).to_string()),
                ),
                ("ingero.label.rank".into(), AttrValue::Str("3".into())),
                (
                    "ingero.label.run_id".into(),
                    AttrValue::Str("job-20261201-a".into()),
                ),
                ("ingero.step".into(), AttrValue::Str(i.to_string())),
                (
                    "ingero.slowest.op".into(),
                    AttrValue::Str("cudaStreamSynchronize".into()),
                ),
                (
                    "ingero.recording.path".into(),
                    AttrValue::Str(
                        "/home/user/.ingero/traces/ingero-20261201T101500.000Z.pftrace".into(),
                    ),
                ),
            ];
            for (k, c) in counters.iter().enumerate() {
                let v = (i * 7_919 + k as u64 * 104_729) % 5_000_000_000;
                attributes.push(((*c).into(), AttrValue::Int(v as i64)));
            }
            SpanData {
                trace_id: ingero_agent::export::otlp::ids::trace_id(
                    "job",
                    &[("step", &i.to_string())],
                ),
                span_id: (i + 1).to_be_bytes(),
                parent_span_id: None,
                name: "ingero.step",
                start_unix_ns: 1_796_000_000_000_000_000 + i * 1_000_000_000,
                end_unix_ns: 1_796_000_000_900_000_000 + i * 1_000_000_000,
                attributes,
                process: Some(process.clone()),
            }
        })
        .collect()
}

/// CPU ns of `f` on this thread, best of [`ROUNDS`].
fn cpu(mut f: impl FnMut()) -> u64 {
    (0..ROUNDS)
        .map(|_| {
            let t = thread_cpu_ns();
            f();
            thread_cpu_ns() - t
        })
        .min()
        .unwrap_or(0)
}

/// Per span, CPU ns: the generated types' build + encode, the wire encoder, gzip alone (flate2,
/// libdeflate), the sender's whole work; then bytes: protobuf, gzipped.
struct PerSpan {
    generated: f64,
    wire: f64,
    flate2: f64,
    libdeflate: f64,
    send: f64,
    raw: f64,
    gzipped: f64,
}

fn per_span(spans: &[SpanData], receiver: &Receiver) -> Result<PerSpan> {
    let host = host();
    let n = spans.len() as f64;
    let mut raw_total = 0;
    for c in spans.chunks(MAX_BATCH) {
        let mut out = Vec::new();
        trace_request_bytes(&host, c, &mut out);
        raw_total += out.len();
    }
    let generated = cpu(|| {
        for c in spans.chunks(MAX_BATCH) {
            black_box(trace_request(&host, c).encode_to_vec());
        }
    });
    let mut out = Vec::new();
    let wire = cpu(|| {
        for c in spans.chunks(MAX_BATCH) {
            out.clear();
            trace_request_bytes(&host, c, &mut out);
            black_box(&out);
        }
    });
    // gzip alone, on the request bodies already encoded: the floor under the sender's work.
    let bodies: Vec<Vec<u8>> = spans
        .chunks(MAX_BATCH)
        .map(|c| {
            let mut b = Vec::new();
            trace_request_bytes(&host, c, &mut b);
            b
        })
        .collect();
    let flate2 = cpu(|| {
        for b in &bodies {
            let mut z = GzEncoder::new(Vec::new(), flate2::Compression::new(1));
            let _ = z.write_all(b);
            black_box(z.finish().ok());
        }
    });
    let mut gz = Gzip::new();
    let mut zipped = Vec::new();
    let libdeflate = cpu(|| {
        for b in &bodies {
            black_box(gz.compress_into(b, &mut zipped).ok());
        }
    });
    let counters = Arc::new(ExportCounters::default());
    let flags = OtlpFlags {
        endpoint: Some(receiver.url()),
        ..Default::default()
    };
    let cfg = OtlpConfig::resolve(&flags, &|_| None)?.context("config")?;
    // The copies handed to `send_all` are made before: cloning is the caller's cost.
    let mut copies: Vec<Vec<SpanData>> = (0..ROUNDS).map(|_| spans.to_vec()).collect();
    let send = cpu(|| {
        send_all(
            SenderConfig {
                traces: cfg.traces.clone(),
                metrics: None,
                timeout: Duration::from_secs(10),
                retry: cfg.retry,
                report: false,
            },
            host.clone(),
            copies.pop().unwrap_or_default(),
            counters.clone(),
        );
    });
    let s = counters.snapshot();
    ensure!(
        s.spans_sent == (SPANS * ROUNDS) as u64,
        "not all sent: {s:?}"
    );
    Ok(PerSpan {
        generated: generated as f64 / n,
        wire: wire as f64 / n,
        flate2: flate2 as f64 / n,
        libdeflate: libdeflate as f64 / n,
        send: send as f64 / n,
        raw: raw_total as f64 / n,
        gzipped: s.bytes_sent as f64 / (n * ROUNDS as f64),
    })
}

fn annotation(ts: u64, end: Option<u64>, labels: &[(&str, String)]) -> AnnotationRecord {
    AnnotationRecord {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        scope: Some(Scope {
            pid: PID,
            start_time: 1,
        }),
        ts_ns: ts,
        end_ns: end,
        ..Default::default()
    }
}

/// One run of the drain path with the recording, export on or off: (drain thread CPU ns,
/// the export's counts, the recording's directory).
fn drain(recs: &[Vec<u8>], url: Option<&str>, dir: &Path) -> Result<(u64, Option<Snapshot>)> {
    let _ = std::fs::remove_dir_all(dir);
    let cfg = RecorderConfig {
        path: Some(dir.join("bench.pftrace")),
        session: SessionInfo::this_host(),
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut p = Pipeline::new(None);
    let mut rec = Recording::start(cfg, MergerConfig::default())?;
    if let Some(url) = url {
        let flags = OtlpFlags {
            endpoint: Some(url.to_owned()),
            ..Default::default()
        };
        let config = OtlpConfig::resolve(&flags, &|_| None)?.context("config")?;
        let s = LiveSettings {
            engine: EngineConfig::default(),
            config,
            shutdown_grace: Duration::from_secs(30),
            metrics_every: Duration::from_secs(3600),
        };
        p.otlp = Some(OtlpRun::start(s, &mut rec)?);
    }
    p.recording = Some(rec);
    let t = thread_cpu_ns();
    drain_loop(&mut p, recs);
    let drain_cpu = thread_cpu_ns() - t;
    let mut counts = None;
    if let (Some(o), Some(rec)) = (p.otlp.as_mut(), p.recording.as_mut()) {
        o.finish(rec, &p.stats, Vec::new());
        counts = Some(o.snapshot());
    }
    if let Some(rec) = p.recording.take() {
        rec.finish(FinalStats::default())?;
    }
    Ok((drain_cpu, counts))
}

/// The drain thread's work of one run: what the CPU figures measure, and what
/// `--toggle-collect` of the instruction count names (kept out of line for it).
#[inline(never)]
fn drain_loop(p: &mut Pipeline, recs: &[Vec<u8>]) {
    let ts = |i: usize| 1_000_000 + i as u64 * 1000;
    let mut request_start = ts(0);
    for (i, r) in recs.iter().enumerate() {
        if i % STEP_EVERY == 0 {
            p.write_annotation(annotation(
                ts(i),
                None,
                &[("step", (i / STEP_EVERY).to_string())],
            ));
        }
        if i % REQUEST_EVERY == 0 && i > 0 {
            let id = format!("r-{}", i / REQUEST_EVERY);
            p.write_annotation(annotation(
                request_start,
                Some(ts(i)),
                &[("request_id", id)],
            ));
            request_start = ts(i);
        }
        p.handle_record(black_box(r));
        if i % RELEASE_EVERY == 0 {
            if let Some(rec) = p.recording.as_mut() {
                rec.release();
            }
        }
    }
    if let Some(rec) = p.recording.as_mut() {
        rec.release();
    }
}

/// Set (to `off` or `on`) in the copy of this benchmark that runs under callgrind: it makes
/// one drain run and nothing else.
const ONCE_VAR: &str = "INGERO_BENCH_DRAIN_ONCE";

/// One drain run, export on or off (the run callgrind counts).
fn drain_once(on: bool) -> Result<()> {
    let receiver = Receiver::start()?;
    let recs = records();
    let dir = std::env::temp_dir().join(format!("ingero-bench-otlp-{}", std::process::id()));
    let url = receiver.url();
    drain(&recs, on.then_some(url.as_str()), &dir)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The instructions the drain thread executes in [`drain_loop`], export off and on, counted
/// by callgrind in a copy of this benchmark (`--toggle-collect` counts the thread that runs
/// the function, not the engine's or the sender's): the same for the same binary and input
/// whatever else the machine does, where the VM has no hardware counters. `None` without
/// valgrind.
fn drain_instructions() -> Result<Option<(u64, u64)>> {
    let exe = std::env::current_exe()?;
    let mut counted = [0u64; 2];
    for (slot, mode) in counted.iter_mut().zip(["off", "on"]) {
        let out = std::env::temp_dir().join(format!(
            "ingero-bench-otlp-{}-{mode}.callgrind",
            std::process::id()
        ));
        let status = Command::new("valgrind")
            .args(["--tool=callgrind", "--toggle-collect=*drain_loop*"])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&exe)
            .env(ONCE_VAR, mode)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let status = match status {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            other => other.context("running valgrind")?,
        };
        ensure!(
            status.success(),
            "the drain run under callgrind failed: {status}"
        );
        let text = std::fs::read_to_string(&out).context("reading callgrind's output")?;
        let _ = std::fs::remove_file(&out);
        *slot = text
            .lines()
            .find_map(|l| l.strip_prefix("totals:"))
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .context("no totals in callgrind's output")?;
    }
    Ok(Some((counted[0], counted[1])))
}

fn main() -> Result<()> {
    if let Ok(mode) = std::env::var(ONCE_VAR) {
        return drain_once(mode == "on");
    }
    let receiver = Receiver::start()?;
    let spans = spans();
    let p = per_span(&spans, &receiver)?;

    let recs = records();
    let dir = std::env::temp_dir().join(format!("ingero-bench-otlp-{}", std::process::id()));
    let mut off = u64::MAX;
    let mut on = u64::MAX;
    let mut counts = Snapshot::default();
    for _ in 0..DRAIN_ROUNDS {
        off = off.min(drain(&recs, None, &dir)?.0);
        let (c, s) = drain(&recs, Some(&receiver.url()), &dir)?;
        if c < on {
            on = c;
            counts = s.unwrap_or_default();
        }
    }
    // query --group-by step and request_id's fold of the same recording (the last written).
    let an = Analysis::open(Some(&dir), &SelectionSpec::default())?;
    let fold = cpu(|| {
        for k in ["step", "request_id"] {
            black_box(analyze::query(&an, &QueryMode::group_by(&[k])).ok());
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    let instructions = drain_instructions()?;

    let n = RECORDS as f64;
    let at_10k = |ns: f64| ns * 10_000.0 / 1e9 * 100.0;
    println!(
        "### OTLP export (`cargo bench -p ingero-agent --bench otlp`, thread CPU, best of {ROUNDS}; the drain path best of {DRAIN_ROUNDS})\n"
    );
    println!(
        "Per span ({SPANS} step spans of 26 attributes, batches of {MAX_BATCH}, to a receiver on 127.0.0.1):\n"
    );
    println!("| stage | CPU ns per span | share of a core at 10,000 spans/s |\n|---|---|---|");
    println!(
        "| build + encode with the generated types (reference) | {:.0} | {:.2} % |",
        p.generated,
        at_10k(p.generated)
    );
    println!(
        "| encode from the spans (`wire.rs`, what is sent) | {:.0} | {:.2} % |",
        p.wire,
        at_10k(p.wire)
    );
    println!(
        "| gzip alone, flate2 (miniz_oxide) level 1 | {:.0} | {:.2} % |",
        p.flate2,
        at_10k(p.flate2)
    );
    println!(
        "| gzip alone, libdeflate level 1 (what is sent) | {:.0} | {:.2} % |",
        p.libdeflate,
        at_10k(p.libdeflate)
    );
    println!(
        "| encode + gzip + HTTP POST (the sender's whole work) | {:.0} | {:.2} % (target < 1 %) |",
        p.send,
        at_10k(p.send)
    );
    println!(
        "\nBytes per span: {:.0} protobuf, {:.0} gzipped on the wire.\n",
        p.raw, p.gzipped
    );
    println!(
        "Drain path ({RECORDS} records of the drain benchmark's mix, a step label every {STEP_EVERY} and a request span every {REQUEST_EVERY}, recorded):\n"
    );
    println!("| | CPU ns per event | ratio |\n|---|---|---|");
    println!(
        "| drain thread, export off (baseline) | {:.1} | 1.00 |",
        off as f64 / n
    );
    println!(
        "| drain thread, export on | {:.1} | {:.3} |",
        on as f64 / n,
        on as f64 / off.max(1) as f64
    );
    println!(
        "| live engine thread (export on) | {:.1} | {:.2} of the drain thread |",
        counts.engine_cpu_ns as f64 / n,
        counts.engine_cpu_ns as f64 / off.max(1) as f64
    );
    println!(
        "| `query --group-by step` + `request_id` fold of the recording | {:.1} | |",
        fold as f64 / n
    );
    match instructions {
        Some((off, on)) => println!(
            "\nDrain thread instructions (callgrind, `drain_loop`, one run each): export off {:.1} per event, on {:.1}: ratio {:.4}.",
            off as f64 / n,
            on as f64 / n,
            on as f64 / off.max(1) as f64
        ),
        None => println!("\nDrain thread instructions: not counted (no valgrind)."),
    }
    println!(
        "\nExport on: {} spans sent ({} dropped, {} incomplete), sender thread {:.0} ns CPU per span.",
        counts.spans_sent,
        counts.dropped_total(),
        counts.spans_incomplete,
        counts.sender_cpu_ns as f64 / counts.spans_sent.max(1) as f64
    );
    Ok(())
}
