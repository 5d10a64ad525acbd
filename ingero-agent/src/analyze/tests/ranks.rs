//! Ranks of a data-parallel job: the agent's rank labels, steps grouped per process by
//! default (`--merge-processes` merges them), the `rank` and `pid` keys, and the straggler
//! rule with and without the fast ranks waiting for the slow one.
//!
//! The fixture: `RANKS` processes with the agent's process-scoped rank annotation, ten steps
//! of 50 launches and a synchronisation. A straggling rank sleeps (blocked off-CPU) inside its
//! step; in a synchronous job the others' synchronisation waits for it (and they sleep in
//! it, as a thread waiting on the device does), otherwise their steps just end sooner.

use ingero_ebpf::OffCpuReason;
use serde_json::Value;

use super::fixtures::{self, MS, T0, US, launch, off_cpu, sync};
use crate::analyze::groups::GroupSpec;
use crate::analyze::{self, QueryMode, SelectionSpec};
use ingero_trace::model::{AnnotationRecord, Scope, TimelineRecord};
use ingero_trace::synth::task;

const RANKS: u32 = 4;
const PID0: u32 = 6_100_000;
const AGENT: u32 = 99;
const STEPS: u32 = 10;
/// How long the straggler sleeps in its step.
const SLEEP: u64 = 240 * MS;

/// How the straggler's peers behave.
#[derive(Clone, Copy, PartialEq)]
enum Peers {
    /// They wait in their synchronisation for the straggler.
    Wait,
    /// Their steps end without it (no synchronisation between ranks).
    DontWait,
}

fn annotation(pid: Option<u32>, ts: u64, labels: &[(&str, String)], agent: bool) -> TimelineRecord {
    TimelineRecord::Annotation(AnnotationRecord {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        scope: pid.map(|pid| Scope { pid, start_time: 1 }),
        ts_ns: ts,
        end_ns: None,
        provenance_uid: if agent { 0 } else { 1000 },
        provenance_pid: Some(if agent { AGENT } else { pid.unwrap_or(1) }),
        stamped_by_agent: agent,
        ..Default::default()
    })
}

/// The job: `straggles` are the steps at which rank 1 sleeps; `scoped` puts each rank's step
/// labels in its own scope (else one trace-wide step label for all, as `ingero annotate`
/// without `--pid` would).
fn job(straggles: &[u32], peers: Peers, scoped: bool) -> Vec<TimelineRecord> {
    let mut v = Vec::new();
    for r in 0..RANKS {
        let pid = PID0 + r;
        v.push(annotation(
            Some(pid),
            T0 - MS,
            &[
                ("rank", r.to_string()),
                ("local_rank", r.to_string()),
                ("world_size", RANKS.to_string()),
                ("run_id", "job-1".to_owned()),
            ],
            true,
        ));
    }
    // Each rank's own clock: its steps start when its previous one ended.
    let mut at = [T0; RANKS as usize];
    let mut shared = T0;
    for s in 0..STEPS {
        let slow = straggles.contains(&s);
        let step_end = shared + 100 * MS + if slow { SLEEP } else { 0 };
        if !scoped {
            v.push(annotation(None, shared, &[("step", s.to_string())], false));
        }
        for r in 0..RANKS {
            let pid = PID0 + r;
            let t = task(pid, pid, "python");
            let ts = if scoped { at[r as usize] } else { shared };
            if scoped {
                v.push(annotation(Some(pid), ts, &[("step", s.to_string())], false));
            }
            for k in 0..50 {
                v.push(launch(t, ts + MS + k * MS, 20 * US));
            }
            let straggler = slow && r == 1;
            if straggler {
                v.push(off_cpu(
                    t,
                    ts + 52 * MS,
                    SLEEP,
                    OffCpuReason::Blocked,
                    "swapper/1",
                ));
            }
            // The GPU work takes 30 ms after the launches; the fast ranks of a synchronous
            // job also wait there for the straggler, asleep.
            let wait = if slow && !straggler && peers == Peers::Wait {
                SLEEP
            } else {
                0
            };
            let sync_at = ts + 60 * MS + if straggler { SLEEP } else { 0 };
            v.push(sync(t, sync_at, 30 * MS + wait));
            v.push(off_cpu(
                t,
                sync_at + 100 * US,
                30 * MS + wait - 200 * US,
                OffCpuReason::Blocked,
                "swapper/1",
            ));
            let own_end = sync_at + 40 * MS + wait;
            at[r as usize] = if scoped && peers == Peers::DontWait {
                own_end
            } else {
                step_end
            };
        }
        shared = step_end;
    }
    let end = at.iter().copied().max().unwrap_or(shared).max(shared);
    v.push(annotation(None, end, &[("end", "1".to_owned())], false));
    v
}

fn findings_of(v: &Value, kind: &str) -> Vec<Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["kind"] == kind).cloned().collect())
        .unwrap_or_default()
}

fn rows(name: &str, records: Vec<TimelineRecord>, mode: &QueryMode) -> Vec<Value> {
    let path = fixtures::write(name, records);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let q = analyze::query(&an, mode).expect("query").json().value();
    q.as_array().expect("rows").clone()
}

fn explain(name: &str, records: Vec<TimelineRecord>) -> Value {
    let path = fixtures::write(name, records);
    let an = fixtures::open(&path, &SelectionSpec::default());
    analyze::explain(&an, None).expect("explain").json().value()
}

#[test]
fn process_scoped_steps_are_one_row_per_process_unless_merged() {
    let by_step = rows(
        "ranks-per-process",
        job(&[], Peers::Wait, true),
        &QueryMode::group_by(&["step"]),
    );
    assert_eq!(by_step.len(), (RANKS * STEPS) as usize);
    for r in &by_step {
        let pid = r["pid"].as_u64().expect("a pid per row") as u32;
        let rank = pid - PID0;
        assert_eq!(r["rank"], rank, "{r}");
        assert_eq!(
            r["labels"]["rank"],
            rank.to_string(),
            "the rank is in force"
        );
        assert_eq!(r["labels"]["run_id"], "job-1");
        assert_eq!(r["cuda_calls"], 51);
    }
    let merged = rows(
        "ranks-merged",
        job(&[], Peers::Wait, true),
        &QueryMode::GroupBy(GroupSpec {
            keys: vec!["step".into()],
            per_process: false,
        }),
    );
    assert_eq!(merged.len(), STEPS as usize);
    for r in &merged {
        assert!(r.get("pid").is_none() && r.get("rank").is_none(), "{r}");
        assert!(
            r["labels"].get("rank").is_none(),
            "four ranks merged name no rank: {r}"
        );
        assert_eq!(r["labels"]["world_size"], "4", "what they share is kept");
        assert_eq!(r["cuda_calls"], 51 * RANKS);
    }
}

#[test]
fn rank_and_pid_are_grouping_keys() {
    let records = || job(&[], Peers::Wait, true);
    let by_rank = rows(
        "ranks-step-rank",
        records(),
        &QueryMode::group_by(&["step", "rank"]),
    );
    assert_eq!(by_rank.len(), (RANKS * STEPS) as usize);
    let mut seen: Vec<(String, u64)> = by_rank
        .iter()
        .map(|r| {
            let rank = r["rank"].as_u64().expect("rank");
            assert_eq!(r["labels"]["rank"], rank.to_string());
            (r["labels"]["step"].as_str().unwrap_or("").to_owned(), rank)
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        (RANKS * STEPS) as usize,
        "one row per step and rank"
    );
    let by_pid = rows(
        "ranks-step-pid",
        records(),
        &QueryMode::group_by(&["step", "pid"]),
    );
    assert_eq!(by_pid.len(), (RANKS * STEPS) as usize);
    for r in &by_pid {
        let pid = r["pid"].as_u64().expect("pid");
        assert_eq!(r["labels"]["pid"], pid.to_string());
        assert_eq!(r["rank"], pid - u64::from(PID0));
    }
    let by_rank_only = rows("ranks-rank", records(), &QueryMode::group_by(&["rank"]));
    assert_eq!(by_rank_only.len(), RANKS as usize);
    assert!(by_rank_only.iter().all(|r| r["cuda_calls"] == 51 * STEPS));
}

#[test]
fn trace_wide_steps_stay_merged_but_split_by_pid_on_request() {
    let records = || job(&[], Peers::Wait, false);
    let by_step = rows("ranks-wide", records(), &QueryMode::group_by(&["step"]));
    assert_eq!(
        by_step.len(),
        STEPS as usize,
        "a trace-wide label is everyone's"
    );
    assert!(by_step.iter().all(|r| r["cuda_calls"] == 51 * RANKS));
    let by_pid = rows(
        "ranks-wide-pid",
        records(),
        &QueryMode::group_by(&["step", "pid"]),
    );
    assert_eq!(by_pid.len(), (RANKS * STEPS) as usize);
    assert!(by_pid.iter().all(|r| r["rank"].is_u64()));
}

#[test]
fn the_rank_the_others_waited_for_is_the_straggler() {
    let e = explain("ranks-straggler", job(&[5], Peers::Wait, true));
    let found = findings_of(&e, "straggler");
    assert_eq!(found.len(), 1, "{e:#}");
    let f = &found[0];
    let summary = f["summary"].as_str().unwrap_or("");
    assert!(
        summary.starts_with("rank 1 was the straggler at step 5: +239.80ms blocked off-CPU"),
        "{summary}"
    );
    assert!(
        summary.contains("the other 3 ranks waited in synchronisation"),
        "{summary}"
    );
    assert_eq!(f["severity"], "MEDIUM");
    assert_eq!(f["evidence"].as_array().map(Vec::len), Some(1));
    assert!(f["fixes"][0].as_str().unwrap_or("").contains("slept"));
}

#[test]
fn without_waiting_the_slowest_rank_is_the_straggler() {
    let e = explain("ranks-outright", job(&[5], Peers::DontWait, true));
    let found = findings_of(&e, "straggler");
    assert_eq!(found.len(), 1, "{e:#}");
    let summary = found[0]["summary"].as_str().unwrap_or("");
    assert!(
        summary.starts_with("rank 1 was the straggler at step 5"),
        "{summary}"
    );
    assert!(summary.contains("took longer outright"), "{summary}");
}

#[test]
fn a_repeated_straggler_is_one_finding_and_trace_wide_steps_work_too() {
    for (name, scoped) in [("ranks-repeat", true), ("ranks-repeat-wide", false)] {
        let e = explain(name, job(&[2, 5, 7], Peers::Wait, scoped));
        let found = findings_of(&e, "straggler");
        assert_eq!(found.len(), 1, "{e:#}");
        let summary = found[0]["summary"].as_str().unwrap_or("");
        assert!(
            summary.starts_with("rank 1 was the straggler at 3 steps (2, 5, 7)"),
            "{summary}"
        );
        assert_eq!(found[0]["severity"], "HIGH");
        assert_eq!(found[0]["evidence"].as_array().map(Vec::len), Some(3));
    }
}

#[test]
fn a_healthy_job_has_no_straggler() {
    for (name, scoped) in [("ranks-healthy", true), ("ranks-healthy-wide", false)] {
        let e = explain(name, job(&[], Peers::Wait, scoped));
        assert!(findings_of(&e, "straggler").is_empty(), "{e:#}");
    }
}

/// The Lightning adapter's way: each batch is a span scoped to its process that carries both
/// `step` and `rank` (no agent-made rank label): still one row per step and rank.
#[test]
fn step_and_rank_from_an_adapters_spans_group_the_same() {
    let mut v = Vec::new();
    for r in 0..2u32 {
        let pid = PID0 + r;
        let t = task(pid, pid, "python");
        for s in 0..3u64 {
            let start = T0 + s * 100 * MS;
            v.push(TimelineRecord::Annotation(AnnotationRecord {
                labels: vec![
                    ("step".into(), s.to_string()),
                    ("rank".into(), r.to_string()),
                    ("phase".into(), "train".into()),
                ],
                scope: Some(Scope { pid, start_time: 1 }),
                ts_ns: start,
                end_ns: Some(start + 80 * MS),
                provenance_uid: 1000,
                provenance_pid: Some(pid),
                ..Default::default()
            }));
            for k in 0..5 {
                v.push(launch(t, start + MS + k * MS, 20 * US));
            }
        }
    }
    let rows = rows(
        "ranks-adapter-spans",
        v,
        &QueryMode::group_by(&["step", "rank"]),
    );
    let mut seen: Vec<(String, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["labels"]["step"].as_str().unwrap_or("").to_owned(),
                r["rank"].as_u64().expect("rank"),
                r["cuda_calls"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    seen.sort();
    let want: Vec<(String, u64, u64)> = (0..3)
        .flat_map(|s| (0..2).map(move |r| (s.to_string(), r, 5)))
        .collect();
    assert_eq!(seen, want, "{rows:?}");
}
