//! NVTX ranges and marks written and read back equal: nested push/pop ranges arriving inner
//! first (at their pop), in two domains on one thread; start/end ranges that overlap (two
//! lanes) and end on another thread; marks; every optional field and payload type; a cut
//! message and a range left open. Also the tracks they go on and the JSON line.

use super::tests::{config, read_all, tmp_dir, write_all};
use crate::json::{Line, write_line};
use crate::model::{NvtxKind, NvtxPayload, NvtxRecord, ReadRecord, TimelineRecord};
use crate::synth::{SCENARIO_PID as P, SCENARIO_T0 as T0};

const US: u64 = 1_000;

fn range(kind: NvtxKind, tid: u32, ts: u64, end: u64, msg: &str) -> NvtxRecord {
    let mut r = NvtxRecord::new(kind, P, tid, ts, end);
    r.message = msg.to_owned();
    r
}

fn records() -> Vec<NvtxRecord> {
    let t = P + 1;
    // Pops come inner first: `forward` (depth 1) is complete before `step` (depth 0).
    let mut inner = range(NvtxKind::PushPop, t, T0 + 20 * US, T0 + 40 * US, "forward");
    inner.depth = 1;
    inner.color = Some(0xff00_ff00);
    inner.payload = Some(NvtxPayload::F64(0.25));
    let mut outer = range(NvtxKind::PushPop, t, T0 + 10 * US, T0 + 90 * US, "step");
    outer.payload = Some(NvtxPayload::U64(812));
    outer.category = 3;
    outer.category_name = Some("train".into());
    let mut other_domain = range(
        NvtxKind::PushPop,
        t,
        T0 + 30 * US,
        T0 + 95 * US,
        "allreduce",
    );
    other_domain.domain = Some("NCCL".into());
    other_domain.payload = Some(NvtxPayload::I64(-7));
    let mut cross = range(
        NvtxKind::StartEnd,
        t,
        T0 + 15 * US,
        T0 + 60 * US,
        "load batch",
    );
    cross.end_tid = Some(t + 1);
    let overlapping = range(
        NvtxKind::StartEnd,
        t + 1,
        T0 + 50 * US,
        T0 + 70 * US,
        "prefetch",
    );
    let mut mark = range(NvtxKind::Mark, t, T0 + 55 * US, T0 + 55 * US, "checkpoint");
    mark.domain = Some("NCCL".into());
    let mut cut = range(
        NvtxKind::PushPop,
        t + 1,
        T0 + 80 * US,
        T0 + 99 * US,
        "long…",
    );
    cut.truncated = true;
    cut.unclosed = true;
    vec![inner, outer, cross, other_domain, overlapping, mark, cut]
}

#[test]
fn nvtx_ranges_and_marks_read_back_equal() {
    let dir = tmp_dir("nvtx");
    let written = records();
    // In arrival order: ordered by start, but `step` after `forward` (late: the merger
    // releases a range when it is complete).
    let timeline: Vec<TimelineRecord> = written.iter().cloned().map(TimelineRecord::Nvtx).collect();
    let (files, _) = write_all(config(Some(dir.join("n.pftrace")), None), &timeline);
    let mut read: Vec<NvtxRecord> = read_all(files)
        .into_iter()
        .filter_map(|r| match r {
            ReadRecord::Nvtx(n) => Some(n),
            _ => None,
        })
        .collect();
    let mut want = written;
    let key = |n: &NvtxRecord| (n.ts_ns, n.tid, n.message.clone());
    read.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(read, want);
}

#[test]
fn nvtx_line_has_its_own_type() {
    let r = &records()[0];
    let mut out = Vec::new();
    write_line(&mut out, &Line::Nvtx(r)).expect("line");
    let v: serde_json::Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(v["type"], "nvtx");
    assert_eq!(v["kind"], "push_pop");
    assert_eq!(v["message"], "forward");
    assert_eq!(v["depth"], 1);
    assert_eq!(v["duration_ns"], 20 * US);
    assert_eq!(v["color"], "0xff00ff00");
    assert_eq!(v["payload"], 0.25);
    assert_eq!(v["domain"], serde_json::Value::Null);
}
