//! Each planted incident produces its finding (and the clean trace none), asserted on the JSON
//! the commands print.

use ingero_ebpf::CudaOp;
use ingero_trace::model::{CudaArgs, TimelineRecord};
use serde_json::Value;

use super::fixtures::{self, MS, T0, TRAINER, US};
use crate::analyze::{self, QueryMode, SelectionSpec};

fn findings_of<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["kind"] == kind).collect())
        .unwrap_or_default()
}

#[test]
fn preemption_storm_in_step_42_is_found_and_named() {
    let path = fixtures::write("storm", fixtures::training());
    let an = fixtures::open(&path, &SelectionSpec::default());

    let q = analyze::query(&an, &QueryMode::group_by(&["step"]))
        .expect("query")
        .json()
        .value();
    let rows = q.as_array().expect("one object per step");
    assert_eq!(rows.len(), 10, "steps 40..=49 (50 has no events)");
    for row in rows {
        for key in [
            "labels",
            "duration_ns",
            "cuda_calls",
            "api_time_ns",
            "sync_time_ns",
            "off_cpu_ns",
        ] {
            assert!(row.get(key).is_some(), "{key} missing in {row}");
        }
    }
    let by_step = |s: &str| {
        rows.iter()
            .find(|r| r["labels"]["step"] == s)
            .unwrap_or_else(|| panic!("step {s} present"))
    };
    let s42 = by_step("42");
    let s41 = by_step("41");
    assert_eq!(s42["duration_ns"], 400 * MS);
    assert_eq!(s41["duration_ns"], 100 * MS);
    assert_eq!(s42["cuda_calls"], 52);
    assert_eq!(s42["launches"], 50);
    assert_eq!(s42["memcpy_bytes"]["h2d"], 1 << 20);
    assert_eq!(s42["sync_time_ns"], 45 * MS);
    assert_eq!(s42["preempted_ns"], 50 * (250_000 + 6 * MS));
    assert_eq!(s42["blocked_ns"], 0);
    assert_eq!(s42["preempted_by"][0]["name"], "stress-ng");
    assert_eq!(s41["off_cpu_ns"], 0, "the storm is in step 42 only");
    assert_eq!(s42["slowest_op"]["op"], "cudaStreamSynchronize");

    let e = analyze::explain(&an, None).expect("explain").json().value();
    let tail = findings_of(&e, "tail_latency");
    assert_eq!(tail.len(), 1, "{e:#}");
    let tail = tail[0];
    // Its impact is the slow calls' excess, a small part of the recording.
    assert_eq!(tail["severity"], "LOW");
    assert!(
        tail["summary"]
            .as_str()
            .unwrap_or("")
            .starts_with("cudaLaunchKernel")
    );
    let cause = tail["root_cause"].as_str().unwrap_or("");
    assert!(
        cause.contains("preemption") && cause.contains("stress-ng (100%)"),
        "{cause}"
    );
    assert!(tail["evidence"].as_array().is_some_and(|a| !a.is_empty()));
    let ev = &tail["evidence"][0];
    assert!(
        ev["ts_ns"].as_u64().unwrap_or(0) >= T0 + 200 * MS,
        "slow calls lie in step 42"
    );
    assert!(ev["ts_ns"].as_u64().unwrap_or(0) < T0 + 600 * MS);
    assert_eq!(ev["duration_ns"], 300_000);
    assert!(ev["wall"].is_string(), "wall clock from the snapshot");

    let slow = findings_of(&e, "slow_group");
    assert_eq!(slow.len(), 1, "only step 42 is slow: {e:#}");
    let summary = slow[0]["summary"].as_str().unwrap_or("");
    assert!(
        summary.starts_with("step=42 took 400.00ms, 4.0x the median 100.00ms"),
        "{summary}"
    );
    assert_eq!(slow[0]["severity"], "HIGH");
    assert_eq!(slow[0]["impact_ns"], 300 * MS);
    assert_eq!(slow[0]["causes"][0]["cause"], "preempted");
    assert_eq!(slow[0]["causes"][0]["by"][0]["comm"], "stress-ng");
    let cause = slow[0]["root_cause"].as_str().unwrap_or("");
    assert!(
        cause.contains("preempted") && cause.contains("stress-ng"),
        "{cause}"
    );
    assert_eq!(
        e["findings"][0]["kind"], "slow_group",
        "the largest impact first"
    );
    assert!(findings_of(&e, "memory_leak").is_empty());
    // Most severe first.
    let sev: Vec<&str> = e["findings"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f["severity"].as_str()).collect())
        .unwrap_or_default();
    let rank = |s: &str| ["HIGH", "MEDIUM", "LOW"].iter().position(|x| *x == s);
    assert!(sev.windows(2).all(|w| rank(w[0]) <= rank(w[1])), "{sev:?}");
}

#[test]
fn label_and_time_filters_select_step_42() {
    let path = fixtures::write("filters", fixtures::training());
    let spec = SelectionSpec {
        labels: vec!["step=42".into()],
        ops: vec!["LaunchKernel".into()],
        pids: vec![TRAINER],
        ..Default::default()
    };
    let an = fixtures::open(&path, &spec);
    let q = analyze::query(&an, &QueryMode::Ops)
        .expect("query")
        .json()
        .value();
    assert_eq!(q[0]["op"], "cudaLaunchKernel");
    assert_eq!(q[0]["count"], 50);
    assert!(q.as_array().is_some_and(|a| a.len() == 1));
    // The last 150 ms of the recording: steps 48 (part) and 49.
    let an = fixtures::open(
        &path,
        &SelectionSpec {
            since: Some("150ms".into()),
            ..Default::default()
        },
    );
    let q = analyze::query(&an, &QueryMode::group_by(&["step"]))
        .expect("query")
        .json()
        .value();
    let steps: Vec<&str> = q
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["labels"]["step"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(steps, ["48", "49"]);
    let mut out = Vec::new();
    let an = fixtures::open(
        &path,
        &SelectionSpec {
            labels: vec!["step=42".into()],
            ..Default::default()
        },
    );
    let n = analyze::events::write(&an, analyze::EventFormat::Json, &mut out).expect("events");
    let text = String::from_utf8_lossy(&out);
    assert_eq!(n as usize, text.lines().count());
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("ndjson"))
        .collect();
    let count = |ty: &str| lines.iter().filter(|l| l["type"] == ty).count();
    assert_eq!(
        (count("cuda"), count("sched"), count("annotation")),
        (52, 100, 1),
        "52 calls, 100 off-CPU intervals and the annotation that began step 42"
    );
    let first_event = lines.iter().find(|l| l["type"] == "cuda").expect("a call");
    assert_eq!(first_event["labels"]["step"], "42");
    assert_eq!(first_event["comm"], "trainer");
}

#[test]
fn request_r17_overlaps_the_sync_burst() {
    let path = fixtures::write("serving", fixtures::serving());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let r = analyze::rank_requests(&an).expect("rank").json().value();
    assert!(
        r["caveat"]
            .as_str()
            .is_some_and(|c| c.contains("counts once for each"))
    );
    let reqs = r["requests"].as_array().expect("requests");
    assert_eq!(reqs.len(), 30);
    assert_eq!(reqs[0]["request_id"], "r-17");
    assert!(reqs[0]["api_time_ns"].as_u64().unwrap_or(0) > 9 * MS);
    assert!(reqs[0]["sync_time_ns"].as_u64().unwrap_or(0) >= 4 * 2_400_000);
    assert!(reqs[0]["blocked_ns"].as_u64().unwrap_or(0) >= 4 * 2_300_000);
    // Overlap semantics: the per-request totals exceed the whole.
    let total_api: u64 = analyze::query(&an, &QueryMode::Ops)
        .expect("ops")
        .json()
        .value()
        .as_array()
        .map(|a| a.iter().filter_map(|o| o["total_ns"].as_u64()).sum())
        .unwrap_or(0);
    let sum: u64 = reqs.iter().filter_map(|r| r["api_time_ns"].as_u64()).sum();
    assert!(sum > total_api, "{sum} vs {total_api}");

    let q = analyze::query(&an, &QueryMode::ByRequest)
        .expect("query")
        .json()
        .value();
    assert!(q["caveat"].is_string());
    assert_eq!(q["requests"][0]["request_id"], "r-17");

    let e = analyze::explain(&an, None).expect("explain").json().value();
    // Every request lasts 30 ms: r-17 is not slower, but its synchronisation is unusual.
    assert!(findings_of(&e, "slow_group").is_empty(), "{e:#}");
    let unusual = findings_of(&e, "unusual_group");
    assert_eq!(unusual.len(), 1, "{e:#}");
    assert_eq!(unusual[0]["labels"]["request_id"], "r-17");
    assert_eq!(unusual[0]["causes"][0]["cause"], "sync");
    assert_eq!(
        unusual[0]["severity"], "LOW",
        "one level under its impact's"
    );
    assert!(
        unusual[0]["root_cause"]
            .as_str()
            .is_some_and(|c| c.contains("counts once for each")),
        "request results carry the overlap caveat"
    );

    // At a moment inside r-17's own 10 ms only r-17 is active.
    let at = fixtures::open(
        &path,
        &SelectionSpec {
            at: Some("+335ms".into()),
            ..Default::default()
        },
    );
    let r = analyze::rank_requests(&at).expect("rank at").json().value();
    let ids: Vec<&str> = r["requests"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["request_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["r-17"]);
    assert!(r["at_ns"].is_u64());
}

/// Explains `records` (the [`fixtures::leaky`] workload, by whichever API it allocates) and
/// checks that `leaky` alone leaks, with what it still holds by size; the explain report and
/// the finding's summary.
fn the_one_leak(name: &str, records: Vec<TimelineRecord>) -> (Value, String) {
    let path = fixtures::write(name, records);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain").json().value();
    let leaks = findings_of(&e, "memory_leak");
    assert_eq!(leaks.len(), 1, "only `leaky` leaks: {e:#}");
    let s = leaks[0]["summary"].as_str().unwrap_or("").to_owned();
    assert!(
        s.starts_with("leaky[6000003] allocated 3.12GiB and freed 0B"),
        "{s}"
    );
    assert!(
        leaks[0]["root_cause"]
            .as_str()
            .is_some_and(|c| c.contains("still held: 50 × 64.0MiB")),
        "what is still held, by size: {:#}",
        leaks[0]
    );
    (e, s)
}

#[test]
fn memory_leaked_by_handle_is_found_as_cudamalloc_memory_is() {
    the_one_leak("leak-by-handle", fixtures::leaky_by_handle());
}

#[test]
fn leaking_process_is_found_with_its_growth_rate() {
    let (e, s) = the_one_leak("leak", fixtures::leaky());
    let leaks = findings_of(&e, "memory_leak");
    assert!(s.contains("growing 653.1MiB/s"), "{s}");
    assert_eq!(leaks[0]["severity"], "HIGH");
    assert!(leaks[0]["window"]["end_ns"].as_u64() > leaks[0]["window"]["start_ns"].as_u64());
    assert!(
        leaks[0]["evidence"]
            .as_array()
            .is_some_and(|a| a.len() >= 4)
    );
    assert!(
        findings_of(&e, "contention").is_empty(),
        "the two processes take turns, never at the same time"
    );
}

#[test]
fn failed_allocations_and_error_codes_are_grouped() {
    let t = ingero_trace::synth::task(fixtures::CLEAN, fixtures::CLEAN, "oom");
    let mut recs = fixtures::clean();
    for i in 0..3 {
        recs.push(fixtures::malloc(t, T0 + 500 * MS + i * MS, 1 << 34, 0, 2));
    }
    recs.push(fixtures::malloc(t, T0 + 600 * MS, 4096, 0, 35));
    // Another process's context breaks: every later call fails with the same code, whatever
    // the operation.
    const BROKEN: u32 = 6_000_099;
    let b = ingero_trace::synth::task(BROKEN, BROKEN, "broken");
    let failing = |i: u64, op| {
        let args = match op {
            CudaOp::Free => CudaArgs::Free {
                ptr: 0x1000,
                size: None,
                stream: None,
            },
            _ => CudaArgs::Sync {
                stream: None,
                event: None,
            },
        };
        ingero_trace::synth::cuda(b, T0 + 300 * MS + i * MS, 10 * US, op, 700, args)
    };
    let ops = [
        CudaOp::LaunchKernel,
        CudaOp::LaunchKernel,
        CudaOp::StreamSynchronize,
        CudaOp::LaunchKernel,
        CudaOp::Free,
    ];
    recs.extend(
        ops.into_iter()
            .enumerate()
            .map(|(i, op)| failing(i as u64, op)),
    );
    let path = fixtures::write("errors", recs);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain").json().value();
    let errs = findings_of(&e, "cuda_error");
    assert_eq!(errs.len(), 3, "one per code and process: {e:#}");
    let broken: Vec<_> = errs
        .iter()
        .filter(|f| {
            f["summary"]
                .as_str()
                .is_some_and(|s| s.contains("[6000099]"))
        })
        .collect();
    assert_eq!(broken.len(), 1, "one code, one finding: {e:#}");
    let f = broken[0];
    assert_eq!(f["severity"], "HIGH");
    assert_eq!(
        f["summary"],
        "cudaErrorIllegalAddress (700) 5 time(s) in broken[6000099], from cudaLaunchKernel (3), cudaFree (1), cudaStreamSynchronize (1)"
    );
    let ev = f["evidence"].as_array().expect("evidence");
    assert_eq!(ev.len(), 2, "the first and the last call");
    assert_eq!(ev[0]["ts_ns"], T0 + 300 * MS);
    assert!(
        ev[0]["what"]
            .as_str()
            .is_some_and(|w| w.starts_with("first cudaLaunchKernel")),
        "{ev:?}"
    );
    assert_eq!(ev[1]["ts_ns"], T0 + 304 * MS);
    assert!(
        ev[1]["what"]
            .as_str()
            .is_some_and(|w| w.contains("5 such calls (cudaFree)")),
        "{ev:?}"
    );
    assert!(errs.iter().any(|f| {
        f["summary"]
            .as_str()
            .is_some_and(|s| s.contains("cudaErrorMemoryAllocation (2) 3 time(s)"))
    }));
    assert!(errs.iter().any(|f| {
        f["summary"]
            .as_str()
            .is_some_and(|s| s.contains("cudaErrorInsufficientDriver (35) 1 time(s)"))
    }));
    let oom = findings_of(&e, "failed_allocation");
    assert_eq!(oom.len(), 1);
    assert_eq!(oom[0]["evidence"].as_array().map(Vec::len), Some(3));
}

#[test]
fn clean_trace_has_no_findings() {
    let path = fixtures::write("clean", fixtures::clean());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain").json().value();
    assert_eq!(e["findings"], Value::Array(Vec::new()), "{e:#}");
    assert!(e["events"].as_u64().unwrap_or(0) > 900);
}

#[test]
fn the_first_pass_skipping_chunks_learns_what_a_full_read_does() {
    let chunked = fixtures::write("first-pass-chunked", fixtures::training());
    let plain = fixtures::write_at("first-pass-plain", fixtures::training(), 0);
    let spec = SelectionSpec::default();
    let (a, b) = (
        fixtures::open(&chunked, &spec),
        fixtures::open(&plain, &spec),
    );
    let (ca, cb) = (a.index.clock, b.index.clock);
    assert_eq!(
        (ca.start_ns, ca.end_ns),
        (cb.start_ns, cb.end_ns),
        "same extent"
    );
    // Each recording measured the wall clock when it was written: equal to within the reads.
    let (oa, ob) = (
        ca.real_minus_mono.expect("wall"),
        cb.real_minus_mono.expect("wall"),
    );
    assert!((oa - ob).abs() < 1_000_000, "{oa} vs {ob}");
    assert!(
        a.index.records < b.index.records / 10,
        "the chunks were skipped: {} vs {} records",
        a.index.records,
        b.index.records
    );
    let by_step = QueryMode::group_by(&["step"]);
    let q = |an| analyze::query(an, &by_step).expect("query").json().value();
    assert_eq!(q(&a), q(&b));
    // The wall times of the evidence come from each recording's own clock reference, which
    // may differ by the microsecond (checked above): left out.
    let e = |an| without_wall(analyze::explain(an, None).expect("explain").json().value());
    assert_eq!(e(&a), e(&b));
}

/// `v` without its `wall` fields.
fn without_wall(mut v: Value) -> Value {
    match &mut v {
        Value::Object(m) => {
            m.remove("wall");
            for x in m.values_mut() {
                *x = without_wall(x.take());
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                *x = without_wall(x.take());
            }
        }
        _ => {}
    }
    v
}

#[test]
fn reports_are_the_same_with_the_helper_thread_inflating_or_without() {
    let spec = SelectionSpec::default();
    for (name, records) in [
        ("threads-training", fixtures::training()),
        ("threads-serving", fixtures::serving()),
    ] {
        let path = fixtures::write(name, records);
        let reports = |ahead: bool| {
            let mut an = fixtures::open(&path, &spec);
            an.index.inflate_ahead = ahead;
            let by_step = QueryMode::group_by(&["step"]);
            (
                analyze::query(&an, &by_step).expect("query").json().value(),
                analyze::explain(&an, None).expect("explain").json().value(),
                analyze::rank_requests(&an)
                    .expect("by request")
                    .json()
                    .value(),
            )
        };
        let alone = reports(false);
        assert!(alone.1["events"].as_u64().unwrap_or(0) > 500, "{name}");
        assert!(reports(true) == alone, "{name}");
    }
}

#[test]
fn json_text_is_the_text_of_its_tree() {
    for (name, records) in [
        ("json-training", fixtures::training()),
        ("json-serving", fixtures::serving()),
    ] {
        let path = fixtures::write(name, records);
        let an = fixtures::open(&path, &SelectionSpec::default());
        let modes = [
            QueryMode::Ops,
            QueryMode::group_by(&["step"]),
            QueryMode::ByRequest,
        ];
        for mode in &modes {
            let q = analyze::query(&an, mode).expect("query");
            assert_eq!(
                q.json().to_string(),
                q.json().value().to_string(),
                "{name} {mode:?}"
            );
        }
        let e = analyze::explain(&an, None).expect("explain");
        assert_eq!(e.json().to_string(), e.json().value().to_string(), "{name}");
        assert!(!e.json().value()["findings"].is_null(), "{name}");
        let r = analyze::rank_requests(&an).expect("rank");
        assert_eq!(r.json().to_string(), r.json().value().to_string(), "{name}");
    }
}

/// Ten 100 ms steps of the same launches; step 3 spends 300 ms more on the CPU between its
/// calls (no off-CPU time, nothing else slower) and its sync waits 20 µs longer; step 7
/// sleeps 300 ms (blocked) and its sync also waits 20 µs longer.
fn host_bound() -> Vec<TimelineRecord> {
    use fixtures::{US, launch, off_cpu, step, sync};
    use ingero_trace::synth::task;
    let t = task(TRAINER, TRAINER, "trainer");
    let mut v = Vec::new();
    let mut ts = T0;
    for s in 0..10u64 {
        v.push(step(TRAINER, ts, &s.to_string()));
        for k in 0..20 {
            v.push(launch(t, ts + MS + k * MS, 20 * US));
        }
        let slow = s == 3 || s == 7;
        let sync_at = ts + 30 * MS + if slow { 300 * MS } else { 0 };
        v.push(sync(t, sync_at, if slow { 1_020 * US } else { MS }));
        if s == 7 {
            v.push(off_cpu(
                t,
                ts + 25 * MS,
                300 * MS,
                ingero_ebpf::OffCpuReason::Blocked,
                "swapper/0",
            ));
        }
        ts += if slow { 400 * MS } else { 100 * MS };
    }
    v.push(step(TRAINER, ts, "10"));
    v
}

#[test]
fn slow_groups_name_only_the_parts_that_make_the_difference() {
    let path = fixtures::write("host-bound", host_bound());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain").json().value();
    let slow = findings_of(&e, "slow_group");
    let of = |name: &str| {
        slow.iter()
            .find(|f| f["summary"].as_str().is_some_and(|s| s.starts_with(name)))
            .unwrap_or_else(|| panic!("no slow_group for {name}: {e:#}"))
    };
    let text = |f: &Value, k: &str| f[k].to_string();

    let cpu = of("step=3 ");
    assert!(
        // 300 ms less the 20 µs the longer sync adds to its API time.
        text(cpu, "summary").contains("+299.98ms on the CPU outside CUDA calls"),
        "{cpu:#}"
    );
    assert!(
        text(cpu, "fixes").contains("profile the host side"),
        "{cpu:#}"
    );
    let slept = of("step=7 ");
    assert!(
        text(slept, "summary").contains("+299.98ms blocked off-CPU"),
        "{slept:#}"
    );
    assert!(
        text(slept, "fixes").contains("The thread slept outside CUDA"),
        "{slept:#}"
    );
    // The 20 µs of extra sync wait is no part of either explanation.
    for f in [cpu, slept] {
        for k in ["summary", "root_cause", "fixes"] {
            let t = text(f, k);
            assert!(!t.contains("synchronisation"), "{k}: {t}");
        }
        assert_eq!(f["fixes"].as_array().map(Vec::len), Some(1), "{f:#}");
    }
}

#[test]
fn group_rows_carry_the_labels_in_force_at_the_start_of_every_interval() {
    use fixtures::{US, launch, span, step};
    use ingero_trace::model::{AnnotationRecord, Scope, TimelineRecord};
    use ingero_trace::synth::task;
    let t = task(TRAINER, TRAINER, "trainer");
    let mut v = vec![TimelineRecord::Annotation(AnnotationRecord {
        labels: vec![("phase".into(), "train".into())],
        scope: Some(Scope {
            pid: TRAINER,
            start_time: 1,
        }),
        ts_ns: T0,
        end_ns: None,
        provenance_uid: 1000,
        provenance_pid: Some(TRAINER),
        ..Default::default()
    })];
    // Steps 0, 1, 2 of 100 ms; request r-1 runs in steps 0 and 2, r-2 in step 1.
    for s in 0..3u64 {
        let ts = T0 + s * 100 * MS;
        v.push(step(TRAINER, ts, &s.to_string()));
        let id = if s == 1 { "r-2" } else { "r-1" };
        v.push(span(TRAINER, ts + 10 * MS, ts + 20 * MS, id));
        v.push(launch(t, ts + 15 * MS, 20 * US));
    }
    v.push(step(TRAINER, T0 + 300 * MS, "3"));
    let path = fixtures::write("context-labels", v);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let rows = |key: &str| {
        analyze::query(&an, &QueryMode::group_by(&[key]))
            .expect("query")
            .json()
            .value()
    };
    let by_request = rows("request_id");
    let labels_of = |rows: &Value, key: &str, value: &str| {
        rows.as_array()
            .and_then(|a| a.iter().find(|r| r["labels"][key] == value))
            .map(|r| r["labels"].clone())
            .unwrap_or_else(|| panic!("no row {key}={value}: {rows:#}"))
    };
    assert_eq!(
        labels_of(&by_request, "request_id", "r-1"),
        serde_json::json!({"request_id": "r-1", "phase": "train"}),
        "r-1 ran in two steps, so it names neither"
    );
    assert_eq!(
        labels_of(&by_request, "request_id", "r-2"),
        serde_json::json!({"request_id": "r-2", "phase": "train", "step": "1"})
    );
    assert_eq!(
        labels_of(&rows("step"), "step", "1"),
        serde_json::json!({"step": "1", "phase": "train"})
    );
}
