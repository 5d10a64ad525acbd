//! Grouping without CUDA calls and the overlap caveat: a Lightning-style run on the CPU (step
//! and phase labels, no CUDA call) still lists every step, and every step and phase that held
//! together, with its duration; step spans that follow one another carry no request-overlap
//! caveat, while overlapping request spans do.

use serde_json::Value;

use super::fixtures::{self, MS, T0, sync};
use crate::analyze::groups::GroupSpec;
use crate::analyze::{self, OVERLAP_CAVEAT, QueryMode, SelectionSpec};
use ingero_trace::model::{AnnotationRecord, Scope, TimelineRecord};
use ingero_trace::synth::task;

const PID: u32 = 6_200_000;

/// `labels` from `ts` on (an instant label when `end` is `None`, else a span), in `PID`'s
/// scope or trace-wide.
fn label(scoped: bool, ts: u64, end: Option<u64>, labels: &[(&str, &str)]) -> TimelineRecord {
    TimelineRecord::Annotation(AnnotationRecord {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        scope: scoped.then_some(Scope {
            pid: PID,
            start_time: 1,
        }),
        ts_ns: ts,
        end_ns: end,
        provenance_uid: 1000,
        provenance_pid: Some(PID),
        ..Default::default()
    })
}

/// Steps 0..=3 of 100 ms in the process's scope; the trace-wide phase is `train` up to the
/// middle of step 1, then `val`. Nothing else: the run made no CUDA call. Step 4 and phase
/// `done`, set as the recording ends, hold for no time.
fn cpu_run() -> Vec<TimelineRecord> {
    let mut v: Vec<TimelineRecord> = (0..4u64)
        .map(|s| label(true, T0 + s * 100 * MS, None, &[("step", &s.to_string())]))
        .collect();
    v.push(label(false, T0, None, &[("phase", "train")]));
    v.push(label(false, T0 + 150 * MS, None, &[("phase", "val")]));
    v.push(label(true, T0 + 400 * MS, None, &[("step", "4")]));
    v.push(label(false, T0 + 400 * MS, None, &[("phase", "done")]));
    v
}

/// The rows of a query as (labels of the grouped keys, pid, duration, CUDA calls).
fn rows(q: &Value, keys: &[&str]) -> Vec<(Vec<String>, Option<u64>, u64, u64)> {
    q.as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let labels = keys
                        .iter()
                        .map(|k| r["labels"][*k].as_str().unwrap_or("?").to_owned())
                        .collect();
                    let dur = r["duration_ns"].as_u64().unwrap_or(0);
                    let calls = r["cuda_calls"].as_u64().unwrap_or(u64::MAX);
                    (labels, r["pid"].as_u64(), dur, calls)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn groups_without_cuda_calls_are_listed_for_one_key_and_several() {
    let path = fixtures::write("cpu-run", cpu_run());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let query = |mode: QueryMode| analyze::query(&an, &mode).expect("query").json().value();
    let pid = Some(u64::from(PID));

    let steps = rows(&query(QueryMode::group_by(&["step"])), &["step"]);
    let expected: Vec<_> = ["0", "1", "2", "3"]
        .iter()
        .map(|s| (strings(&[s]), pid, 100 * MS, 0))
        .collect();
    assert_eq!(steps, expected, "every step, its own process's");

    let keys = ["step", "phase"];
    let expected = vec![
        (strings(&["0", "train"]), pid, 100 * MS, 0),
        (strings(&["1", "train"]), pid, 50 * MS, 0),
        (strings(&["1", "val"]), pid, 50 * MS, 0),
        (strings(&["2", "val"]), pid, 100 * MS, 0),
        (strings(&["3", "val"]), pid, 100 * MS, 0),
    ];
    assert_eq!(
        rows(&query(QueryMode::group_by(&keys)), &keys),
        expected,
        "every step and phase that held together, for the time they did"
    );
    let merged = QueryMode::GroupBy(GroupSpec::merged(strings(&keys)));
    let merged_rows = rows(&query(merged), &keys);
    let without_pid: Vec<_> = expected
        .into_iter()
        .map(|(l, _, d, c)| (l, None, d, c))
        .collect();
    assert_eq!(
        merged_rows, without_pid,
        "processes merged: the same, no pid"
    );

    let text = analyze::query(&an, &QueryMode::group_by(&keys))
        .expect("query")
        .text(an.origin());
    assert!(!text.contains("no matching events"), "{text}");
    assert!(
        text.contains("step=1,phase=val") || text.contains("phase=val,step=1"),
        "{text}"
    );
}

/// Steps 0..=4 as spans one after the other (Lightning's step spans), each with a 10 ms
/// synchronisation; step 3 takes 400 ms, 350 ms of it waiting.
fn step_spans() -> Vec<TimelineRecord> {
    let t = task(PID, PID, "python");
    let mut v = Vec::new();
    let mut at = T0;
    for s in 0..5u64 {
        let wait = if s == 3 { 350 * MS } else { 10 * MS };
        let len = if s == 3 { 400 * MS } else { 100 * MS };
        v.push(label(true, at, Some(at + len), &[("step", &s.to_string())]));
        v.push(sync(t, at + 10 * MS, wait));
        at += len;
    }
    v
}

#[test]
fn the_request_overlap_caveat_is_only_for_overlapping_spans() {
    let path = fixtures::write("step-spans", step_spans());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let q = analyze::query(&an, &QueryMode::group_by(&["step"])).expect("query");
    let json = q.json().value();
    let steps = json.as_array().expect("rows");
    assert_eq!(steps.len(), 5, "{json:#}");
    assert!(steps.iter().all(|r| r.get("caveat").is_none()), "{json:#}");
    assert!(!q.text(an.origin()).contains("note:"));

    let e = analyze::explain(&an, None).expect("explain").json().value();
    let slow: Vec<&Value> = e["findings"]
        .as_array()
        .map(|f| f.iter().filter(|f| f["kind"] == "slow_group").collect())
        .unwrap_or_default();
    assert_eq!(slow.len(), 1, "{e:#}");
    assert!(
        slow[0]["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("step=3")),
        "{e:#}"
    );
    let cause = slow[0]["root_cause"].as_str().unwrap_or("");
    assert!(cause.contains("in synchronisation"), "{cause}");
    assert!(
        !cause.contains(OVERLAP_CAVEAT),
        "steps do not overlap: {cause}"
    );

    // Requests served at once overlap: their slow request says so.
    let path = fixtures::write("step-spans-serving", fixtures::serving());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain").json().value();
    let slow: Vec<&Value> = e["findings"]
        .as_array()
        .map(|f| f.iter().filter(|f| f["kind"] == "unusual_group").collect())
        .unwrap_or_default();
    assert!(!slow.is_empty(), "{e:#}");
    assert!(
        slow.iter().all(|f| f["root_cause"]
            .as_str()
            .is_some_and(|c| c.ends_with(OVERLAP_CAVEAT))),
        "{e:#}"
    );
    let rows = analyze::query(&an, &QueryMode::group_by(&["request_id"]))
        .expect("query")
        .json()
        .value();
    assert!(
        rows.as_array()
            .is_some_and(|r| !r.is_empty() && r.iter().all(|r| r["caveat"] == OVERLAP_CAVEAT)),
        "{rows:#}"
    );
}
