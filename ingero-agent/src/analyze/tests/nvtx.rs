//! NVTX ranges as span labels: `query --group-by nvtx` gives a row per range name with the
//! CUDA calls inside it (nested ranges count for every level, the calls of the process's
//! other threads count too), the ranges' count and durations, and the NVTX caveat.

use serde_json::Value;

use super::fixtures::{self, MS, T0, TRAINER, US, launch, sync};
use crate::analyze::{self, QueryMode, SelectionSpec};
use ingero_trace::model::{NvtxKind, NvtxRecord, TimelineRecord};
use ingero_trace::synth::task;

fn range(kind: NvtxKind, tid: u32, ts: u64, end: u64, msg: &str, depth: u32) -> TimelineRecord {
    let mut r = NvtxRecord::new(kind, TRAINER, tid, ts, end);
    r.message = msg.to_owned();
    r.depth = depth;
    TimelineRecord::Nvtx(r)
}

/// Three steps: `step` (10 ms) holding `forward` (4 launches) and `backward` (6 launches, on
/// the autograd thread), then a sync in `step` alone; a mark; a start/end `prefetch`.
fn recording() -> Vec<TimelineRecord> {
    let main = task(TRAINER, TRAINER, "python");
    let autograd = task(TRAINER, TRAINER + 1, "pt_autograd_0");
    let mut v = Vec::new();
    for s in 0..3u64 {
        let t = T0 + s * 20 * MS;
        v.push(range(NvtxKind::PushPop, TRAINER, t, t + 10 * MS, "step", 0));
        v.push(range(
            NvtxKind::PushPop,
            TRAINER,
            t + MS,
            t + 3 * MS,
            "forward",
            1,
        ));
        for k in 0..4 {
            v.push(launch(main, t + MS + 100 * US + k * 100 * US, 10 * US));
        }
        v.push(range(
            NvtxKind::PushPop,
            TRAINER,
            t + 4 * MS,
            t + 8 * MS,
            "backward",
            1,
        ));
        for k in 0..6 {
            v.push(launch(
                autograd,
                t + 4 * MS + 100 * US + k * 100 * US,
                10 * US,
            ));
        }
        v.push(sync(main, t + 9 * MS, 500 * US));
    }
    v.push(range(
        NvtxKind::Mark,
        TRAINER,
        T0 + 30 * MS,
        T0 + 30 * MS,
        "checkpoint",
        0,
    ));
    v.push(range(
        NvtxKind::StartEnd,
        TRAINER,
        T0 + 45 * MS,
        T0 + 55 * MS,
        "prefetch",
        0,
    ));
    v.sort_by_key(TimelineRecord::ts_ns);
    v
}

#[test]
fn group_by_nvtx_counts_the_calls_of_every_level() {
    let path = fixtures::write("nvtx-groups", recording());
    let an = fixtures::open(&path, &SelectionSpec::default());
    let q = analyze::query(&an, &QueryMode::group_by(&["nvtx"])).expect("query");
    let rows = q.json().value();
    let row = |name: &str| -> &Value {
        rows.as_array()
            .and_then(|a| a.iter().find(|r| r["labels"]["nvtx"] == name))
            .unwrap_or_else(|| panic!("no row for {name}: {rows:#}"))
    };
    assert_eq!(
        row("step")["cuda_calls"],
        3 * (4 + 6 + 1),
        "every level counts"
    );
    assert_eq!(row("forward")["cuda_calls"], 3 * 4);
    assert_eq!(
        row("backward")["cuda_calls"],
        3 * 6,
        "the autograd thread's launches"
    );
    assert_eq!(row("backward")["launches"], 18);
    assert_eq!(
        row("prefetch")["cuda_calls"],
        1,
        "start/end ranges are spans too: the sync"
    );
    assert_eq!(row("step")["ranges"]["count"], 3);
    assert_eq!(row("step")["ranges"]["p50_ns"], 10 * MS);
    assert_eq!(row("forward")["ranges"]["max_ns"], 2 * MS);
    assert_eq!(row("step")["duration_ns"], 30 * MS);
    assert!(
        rows.as_array()
            .is_some_and(|a| a.iter().all(|r| r["labels"]["nvtx"] != "checkpoint")),
        "marks are no groups"
    );
    let text = q.text(an.origin());
    assert!(text.contains("NVTX ranges nest"), "{text}");
    assert!(text.contains("ranges"), "{text}");
}

/// Steps with `forward` and `backward` ranges; in step 5 `backward` sleeps 200 ms more.
#[test]
fn a_slow_step_names_the_range_that_grew() {
    use super::fixtures::{off_cpu, step};
    use ingero_ebpf::OffCpuReason;
    let main = task(TRAINER, TRAINER, "python");
    let mut v = Vec::new();
    let mut t = T0;
    for s in 0..20u64 {
        v.push(step(TRAINER, t, &s.to_string()));
        let slow = if s == 5 { 200 * MS } else { 0 };
        v.push(range(
            NvtxKind::PushPop,
            TRAINER,
            t + MS,
            t + 10 * MS,
            "forward",
            0,
        ));
        v.push(launch(main, t + 2 * MS, 10 * US));
        v.push(range(
            NvtxKind::PushPop,
            TRAINER,
            t + 11 * MS,
            t + 20 * MS + slow,
            "backward",
            0,
        ));
        if slow > 0 {
            v.push(off_cpu(
                main,
                t + 12 * MS,
                slow,
                OffCpuReason::Blocked,
                "swapper/0",
            ));
        }
        v.push(sync(main, t + 12 * MS + slow, 5 * MS));
        t += 22 * MS + slow;
    }
    v.push(step(TRAINER, t, "20"));
    v.sort_by_key(TimelineRecord::ts_ns);
    let path = fixtures::write("nvtx-place", v);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain").json().value();
    let top = &e["findings"][0];
    assert_eq!(top["kind"], "slow_group", "{e:#}");
    assert_eq!(top["labels"]["step"], "5");
    let cause = top["root_cause"].as_str().unwrap_or("");
    assert!(
        cause.contains("the NVTX range `backward` took +200.00ms more than in the median step"),
        "{cause}"
    );
}
