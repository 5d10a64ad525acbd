//! The rules of `explain` on small synthetic loops, one planted cause each (the recorded
//! corpus in tests/explain/ checks the same through the real agent): which finding comes
//! first, its group, its causes in nanoseconds and its culprit; and a healthy loop with
//! noise gives nothing above LOW.

use ingero_ebpf::{CudaOp, OffCpuReason};
use serde_json::Value;

use super::fixtures::{self, MS, T0, TRAINER, US, launch, off_cpu, span, step, sync};
use crate::analyze::findings::{CAUSE_KINDS, CauseKind};
use crate::analyze::{self, SelectionSpec};
use ingero_trace::model::{CudaArgs, MemcpyKind, Task, TimelineRecord};
use ingero_trace::synth::{cuda, task};

/// Steps of a GPU-bound loop: a few launches, then a blocking synchronisation (the thread
/// sleeps inside it, as with `cudaDeviceScheduleBlockingSync`); step lengths vary by a few
/// percent. `extra(step, t, at, out)` adds a step's planted work at `at` and returns how long
/// it takes.
fn gpu_loop(
    steps: u64,
    mut extra: impl FnMut(u64, Task, u64, &mut Vec<TimelineRecord>) -> u64,
) -> Vec<TimelineRecord> {
    let t = task(TRAINER, TRAINER, "trainer");
    let mut v = Vec::new();
    let mut ts = T0;
    for s in 0..steps {
        v.push(step(TRAINER, ts, &s.to_string()));
        let mut at = ts + 100 * US;
        for _ in 0..10 {
            v.push(launch(t, at, 20 * US));
            at += 50 * US;
        }
        at += extra(s, t, at, &mut v);
        // 38 to 42 ms of GPU work, waited for asleep.
        let wait = 38 * MS + (s * 7919 % 5) * MS;
        v.push(sync(t, at, wait));
        v.push(off_cpu(
            t,
            at + 5 * US,
            wait - 10 * US,
            OffCpuReason::Blocked,
            "swapper/1",
        ));
        ts = at + wait + 200 * US;
    }
    v.push(step(TRAINER, ts, &steps.to_string()));
    v
}

fn explain(name: &str, records: Vec<TimelineRecord>) -> Value {
    let path = fixtures::write(name, records);
    let an = fixtures::open(&path, &SelectionSpec::default());
    analyze::explain(&an, None).expect("explain").json().value()
}

fn findings(e: &Value) -> &Vec<Value> {
    e["findings"].as_array().expect("findings")
}

fn above_low(e: &Value) -> Vec<&Value> {
    findings(e)
        .iter()
        .filter(|f| f["severity"] != "LOW")
        .collect()
}

fn copy(t: Task, ts: u64, dur: u64, stream: Option<u64>) -> TimelineRecord {
    cuda(
        t,
        ts,
        dur,
        if stream.is_some() {
            CudaOp::MemcpyAsync
        } else {
            CudaOp::Memcpy
        },
        0,
        CudaArgs::Memcpy {
            count: 8 << 20,
            kind: MemcpyKind::DeviceToHost,
            stream,
            width_height: None,
            host_ptr: Some(0x7e00_0000_0000),
        },
    )
}

fn alloc(t: Task, ts: u64, dur: u64) -> TimelineRecord {
    cuda(
        t,
        ts,
        dur,
        CudaOp::Malloc,
        0,
        CudaArgs::Alloc {
            size: 1 << 20,
            ptr: Some(0x7000_0000_0000 + ts),
            stream: None,
        },
    )
}

#[test]
fn a_healthy_loop_has_nothing_above_low() {
    let e = explain("rules-healthy", gpu_loop(30, |_, _, _, _| 0));
    assert!(above_low(&e).is_empty(), "{e:#}");
    assert!(
        findings(&e).iter().all(|f| f["kind"] != "slow_group"),
        "{e:#}"
    );
}

#[test]
fn a_blocked_step_is_first_with_its_blocked_time_and_not_the_sync_wait() {
    let e = explain(
        "rules-blocked",
        gpu_loop(30, |s, t, at, v| {
            if s != 7 {
                return 0;
            }
            v.push(off_cpu(t, at, 200 * MS, OffCpuReason::Blocked, "swapper/1"));
            200 * MS + 10 * US
        }),
    );
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "slow_group", "{e:#}");
    assert_eq!(top["labels"]["step"], "7");
    assert_eq!(top["severity"], "HIGH");
    let cause = &top["causes"][0];
    assert_eq!(cause["cause"], "blocked", "{top:#}");
    let ns = cause["ns"].as_u64().unwrap_or(0);
    assert!((190 * MS..=210 * MS).contains(&ns), "{ns}");
    assert_eq!(top["causes"].as_array().map(Vec::len), Some(1), "{top:#}");
    let impact = top["impact_ns"].as_u64().unwrap_or(0);
    assert!((195 * MS..=215 * MS).contains(&impact), "{impact}");
    assert!(
        top["id"]
            .as_str()
            .is_some_and(|i| i.starts_with("slow_group-"))
    );
    assert!(top["window"]["end_ns"].as_u64() > top["window"]["start_ns"].as_u64());
}

#[test]
fn a_preempted_step_names_the_culprit() {
    let e = explain(
        "rules-preempted",
        gpu_loop(30, |s, t, at, v| {
            if s != 4 {
                return 0;
            }
            for k in 0..20 {
                v.push(off_cpu(
                    t,
                    at + k * 6 * MS,
                    5 * MS,
                    OffCpuReason::Preempted,
                    "cpu_hog",
                ));
            }
            120 * MS
        }),
    );
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "slow_group", "{e:#}");
    assert_eq!(top["labels"]["step"], "4");
    let cause = &top["causes"][0];
    assert_eq!(cause["cause"], "preempted", "{top:#}");
    assert_eq!(cause["by"][0]["comm"], "cpu_hog");
    assert_eq!(cause["by"][0]["tid"], 7777);
    assert!(cause["ns"].as_u64().unwrap_or(0) >= 90 * MS, "{cause:#}");
}

#[test]
fn synchronous_copies_in_every_step_are_one_finding() {
    let e = explain(
        "rules-sync-memcpy",
        gpu_loop(30, |_, t, at, v| {
            v.push(copy(t, at, 6 * MS, None));
            v.push(copy(t, at + 6 * MS, 100 * US, Some(0x10)));
            6 * MS + 200 * US
        }),
    );
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "sync_memcpy", "{e:#}");
    assert_eq!(top["causes"][0]["cause"], "memcpy");
    assert_eq!(top["impact_ns"], 30 * 6 * MS, "only the synchronous copies");
    assert!(
        top["summary"]
            .as_str()
            .is_some_and(|s| s.contains("1 per step"))
    );
    assert!(top.get("labels").is_none(), "about the loop, not one step");
}

#[test]
fn many_synchronisations_per_step_are_sync_in_loop() {
    let e = explain(
        "rules-sync-storm",
        gpu_loop(30, |_, t, at, v| {
            for k in 0..30 {
                v.push(sync(t, at + k * 400 * US, 300 * US));
            }
            12 * MS
        }),
    );
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "sync_in_loop", "{e:#}");
    assert_eq!(top["causes"][0]["cause"], "sync");
    assert!(
        top["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("31 synchronisations per step"))
    );
}

#[test]
fn allocations_in_every_step_are_churn() {
    let e = explain(
        "rules-churn",
        gpu_loop(30, |_, t, at, v| {
            for k in 0..20 {
                v.push(alloc(t, at + k * 500 * US, 400 * US));
            }
            10 * MS
        }),
    );
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "alloc_churn", "{e:#}");
    assert_eq!(top["causes"][0]["cause"], "alloc");
    assert_eq!(top["impact_ns"], 30 * 20 * 400 * US);
}

#[test]
fn a_loop_busy_on_the_cpu_between_launches_is_host_bound() {
    let t = task(TRAINER, TRAINER, "trainer");
    let mut v = Vec::new();
    let mut ts = T0;
    for s in 0..20u64 {
        v.push(step(TRAINER, ts, &s.to_string()));
        for k in 0..100 {
            v.push(launch(t, ts + k * 100 * US, 10 * US));
        }
        v.push(sync(t, ts + 10 * MS, 50 * US));
        ts += 10 * MS + 100 * US;
    }
    v.push(step(TRAINER, ts, "20"));
    let e = explain("rules-host-bound", v);
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "host_bound", "{e:#}");
    assert_eq!(top["causes"][0]["cause"], "cpu");
    assert!(
        top["summary"]
            .as_str()
            .is_some_and(|s| s.contains("100 launches per step"))
    );
}

#[test]
fn a_slow_first_call_is_a_cold_start_not_a_slow_step() {
    let e = explain(
        "rules-cold",
        gpu_loop(30, |s, t, at, v| {
            let d = if s == 0 { 80 * MS } else { 200 * US };
            v.push(alloc(t, at, d));
            d
        }),
    );
    let cold: Vec<&Value> = findings(&e)
        .iter()
        .filter(|f| f["kind"] == "cold_start")
        .collect();
    assert_eq!(cold.len(), 1, "{e:#}");
    assert_eq!(cold[0]["causes"][0]["cause"], "cold_start");
    assert!(cold[0]["impact_ns"].as_u64().unwrap_or(0) >= 79 * MS);
    assert!(
        findings(&e)
            .iter()
            .all(|f| f["kind"] != "slow_group" || f["labels"]["step"] != "0"),
        "{e:#}"
    );
}

#[test]
fn a_step_and_the_request_it_served_are_one_finding_with_both_labels() {
    let mut v = gpu_loop(30, |s, t, at, v| {
        if s != 9 {
            return 0;
        }
        v.push(off_cpu(t, at, 150 * MS, OffCpuReason::Blocked, "swapper/1"));
        150 * MS
    });
    // One request per step, spanning it (the step records carry their start times).
    let starts: Vec<u64> = v
        .iter()
        .filter_map(|r| match r {
            TimelineRecord::Annotation(a) => Some(a.ts_ns),
            _ => None,
        })
        .collect();
    for (i, w) in starts.windows(2).enumerate() {
        v.push(span(TRAINER, w[0], w[1], &format!("r-{i}")));
    }
    let e = explain("rules-step-and-request", v);
    let slow: Vec<&Value> = findings(&e)
        .iter()
        .filter(|f| f["kind"] == "slow_group")
        .collect();
    assert_eq!(slow.len(), 1, "{e:#}");
    assert_eq!(slow[0]["labels"]["step"], "9");
    assert_eq!(slow[0]["labels"]["request_id"], "r-9");
    assert!(
        !slow[0]["root_cause"]
            .as_str()
            .unwrap_or("")
            .contains("Requests overlap"),
        "requests one after the other do not overlap"
    );
}

#[test]
fn ids_are_stable_and_distinct() {
    let make = || {
        gpu_loop(30, |s, t, at, v| {
            if s == 3 || s == 20 {
                v.push(off_cpu(t, at, 100 * MS, OffCpuReason::Blocked, "swapper/1"));
                return 100 * MS;
            }
            0
        })
    };
    let a = explain("rules-ids-a", make());
    let b = explain("rules-ids-b", make());
    let ids = |e: &Value| -> Vec<String> {
        findings(e)
            .iter()
            .filter_map(|f| f["id"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(ids(&a), ids(&b));
    let mut unique = ids(&a);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids(&a).len(), "{a:#}");
    assert!(unique.len() >= 2);
}

#[test]
fn cause_names_are_the_json_names() {
    for kind in CAUSE_KINDS {
        assert_eq!(
            serde_json::to_value(kind).ok(),
            Some(Value::String(kind.name().to_owned()))
        );
        assert_eq!(CAUSE_KINDS[kind.index()], kind);
    }
    assert_eq!(CauseKind::OtherCuda.name(), "other_cuda");
}

/// Every step copies 16 MiB host to device asynchronously from `host`; with `pinned`, that
/// buffer was allocated with `cudaHostAlloc` first.
fn copies_from(pinned: bool) -> Vec<TimelineRecord> {
    let host = 0x7f00_0000_0000u64;
    let mut first = true;
    gpu_loop(30, move |_, t, at, v| {
        if first && pinned {
            v.push(cuda(
                t,
                at,
                300 * US,
                CudaOp::HostAlloc,
                0,
                CudaArgs::HostAlloc {
                    size: 64 << 20,
                    ptr: Some(host),
                },
            ));
        }
        first = false;
        // Pageable: the call blocks for the transfer; pinned: it only queues it.
        let d = if pinned { 10 * US } else { 4 * MS };
        v.push(cuda(
            t,
            at + 400 * US,
            d,
            CudaOp::MemcpyAsync,
            0,
            CudaArgs::Memcpy {
                count: 16 << 20,
                kind: MemcpyKind::HostToDevice,
                stream: Some(0x10),
                width_height: None,
                host_ptr: Some(host + 4096),
            },
        ));
        400 * US + d
    })
}

#[test]
fn async_copies_from_pageable_memory_are_found_and_pinned_ones_are_not() {
    let e = explain("rules-pageable", copies_from(false));
    let top = &findings(&e)[0];
    assert_eq!(top["kind"], "pageable_memcpy", "{e:#}");
    assert_eq!(top["impact_ns"], 30 * 4 * MS);
    assert_eq!(top["causes"][0]["cause"], "memcpy");
    assert_eq!(top["pid"], TRAINER);
    assert!(
        top["evidence"][0]["what"]
            .as_str()
            .is_some_and(|w| w.contains("step=")),
        "the worst copies say their step: {top:#}"
    );
    let e = explain("rules-pinned", copies_from(true));
    assert!(
        findings(&e).iter().all(|f| f["kind"] != "pageable_memcpy"),
        "{e:#}"
    );
    assert!(above_low(&e).is_empty(), "{e:#}");
}

/// docs/explain.schema.json names every kind and cause the code has (the recorded corpus
/// validates whole reports against it).
#[test]
fn the_json_schema_lists_the_kinds_and_causes() {
    use crate::analyze::findings::KINDS;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/explain.schema.json");
    let text = std::fs::read_to_string(&path).expect("docs/explain.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("valid JSON");
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let defs = &schema["$defs"];
    assert_eq!(
        list(&defs["finding"]["properties"]["kind"]["enum"]),
        KINDS.map(str::to_owned)
    );
    assert_eq!(
        list(&defs["cause"]["properties"]["cause"]["enum"]),
        CAUSE_KINDS.map(|k| k.name().to_owned())
    );
    // Every key a finding serialises is a property of the schema, and the required ones are
    // always there.
    let e = explain(
        "rules-schema",
        gpu_loop(30, |s, t, at, v| {
            if s != 5 {
                return 0;
            }
            v.push(off_cpu(t, at, 100 * MS, OffCpuReason::Preempted, "cpu_hog"));
            100 * MS
        }),
    );
    let props = defs["finding"]["properties"]
        .as_object()
        .expect("properties");
    let required = list(&defs["finding"]["required"]);
    for f in findings(&e) {
        let f = f.as_object().expect("object");
        for k in f.keys() {
            assert!(props.contains_key(k), "{k} not in the schema");
        }
        for k in &required {
            assert!(f.contains_key(k), "{k} missing");
        }
        assert!(KINDS.contains(&f["kind"].as_str().unwrap_or("")));
    }
    let cause_props = defs["cause"]["properties"].as_object().expect("cause");
    for c in findings(&e)[0]["causes"].as_array().expect("causes") {
        for k in c.as_object().expect("object").keys() {
            assert!(cause_props.contains_key(k), "{k} not in the schema");
        }
    }
}
