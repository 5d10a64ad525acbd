//! The engine on hand-made batches: a group is sent once it ended and the stream passed it,
//! with the fold's numbers; a group whose events the engine did not all see is marked
//! incomplete and counted (history evicted, a gap in the hand-off, a lost batch).

use std::sync::Arc;

use ingero_ebpf::CudaOp;
use ingero_trace::model::{CudaArgs, TimelineRecord};
use ingero_trace::synth::{cuda, task};
use ingero_trace::write::{EdgeKind, StateEdge};

use super::engine::{Engine, EngineConfig, SessionFacts};
use super::feed::FeedBatch;
use crate::export::otlp::counters::ExportCounters;
use crate::export::otlp::span::{AttrValue, SpanData};

const P: u32 = 77;

fn edge(ts: u64, value: Option<&str>) -> StateEdge {
    StateEdge {
        scope: Some(P),
        key: "step".into(),
        ts_ns: ts,
        kind: match value {
            Some(v) => EdgeKind::Begin {
                value: v.into(),
                continued: false,
            },
            None => EdgeKind::End,
        },
    }
}

fn calls(from: u64, n: u64) -> Vec<(u64, TimelineRecord)> {
    let sync = CudaArgs::Sync {
        stream: None,
        event: None,
    };
    (0..n)
        .map(|i| {
            (
                from + i,
                cuda(
                    task(P, P, "t"),
                    from + i * 10,
                    5,
                    CudaOp::StreamSynchronize,
                    0,
                    sync.clone(),
                ),
            )
        })
        .collect()
}

fn engine(history_bytes: usize) -> (Engine, Arc<ExportCounters>) {
    let counters = Arc::new(ExportCounters::default());
    let cfg = EngineConfig {
        history_bytes,
        ..EngineConfig::default()
    };
    (
        Engine::new(cfg, SessionFacts::default(), counters.clone()),
        counters,
    )
}

/// Step 1 over [1000, 2000) with 50 calls, step 2 from 2000 on; the stream written to 5000.
fn steps(e: &mut Engine, gaps: Vec<(u64, u64)>) -> Vec<SpanData> {
    let tap = ingero_trace::write::Tap {
        edges: vec![
            edge(1000, Some("1")),
            edge(2000, None),
            edge(2000, Some("2")),
        ],
        ..Default::default()
    };
    let mut records = calls(1000, 50);
    records.extend(calls(2500, 5));
    let _ = e.apply(FeedBatch {
        records,
        tap,
        watermark: 5000,
        gaps,
        ..FeedBatch::default()
    });
    let mut out = Vec::new();
    assert!(e.due());
    e.tick(&mut |s| out.push(s));
    out
}

fn int(s: &SpanData, k: &str) -> Option<i64> {
    match s.attr(k) {
        Some(AttrValue::Int(i)) => Some(*i),
        _ => None,
    }
}

#[test]
fn an_ended_group_is_sent_once_with_its_numbers() {
    let (mut e, counters) = engine(1 << 20);
    let out = steps(&mut e, Vec::new());
    assert_eq!(out.len(), 1, "step 2 is still open");
    assert_eq!(int(&out[0], "ingero.cuda_calls"), Some(50));
    assert_eq!(int(&out[0], "ingero.api_time_ns"), Some(250));
    assert!(out[0].attr("ingero.incomplete").is_none());
    let mut again = Vec::new();
    e.tick(&mut |s| again.push(s));
    assert!(again.is_empty(), "sent once");
    // The end closes step 2.
    let tap = ingero_trace::write::Tap {
        edges: vec![edge(6000, None)],
        ..Default::default()
    };
    let _ = e.apply(FeedBatch {
        tap,
        watermark: u64::MAX,
        last: true,
        ..FeedBatch::default()
    });
    e.tick(&mut |s| again.push(s));
    assert_eq!(again.len(), 1);
    assert_eq!(int(&again[0], "ingero.cuda_calls"), Some(5));
    assert_eq!(counters.snapshot().spans_incomplete, 0);
}

#[test]
fn a_group_older_than_the_history_is_marked_incomplete() {
    // Room for about ten records: the first ones of step 1 are evicted.
    let one = size_of::<super::history::HistRecord>();
    let (mut e, counters) = engine(10 * one);
    let out = steps(&mut e, Vec::new());
    assert_eq!(
        out[0].attr("ingero.incomplete"),
        Some(&AttrValue::Bool(true))
    );
    assert!(int(&out[0], "ingero.cuda_calls").unwrap_or(0) < 50);
    let s = counters.snapshot();
    assert_eq!(s.spans_incomplete, 1);
    assert!(s.events_evicted >= 40, "{s:?}");
}

#[test]
fn a_gap_in_the_hand_off_or_a_lost_batch_marks_the_groups_it_touched() {
    let (mut e, _) = engine(1 << 20);
    let out = steps(&mut e, vec![(1200, 1300)]);
    assert_eq!(
        out[0].attr("ingero.incomplete"),
        Some(&AttrValue::Bool(true))
    );
    let (mut e, _) = engine(1 << 20);
    e.desynced = true;
    let out = steps(&mut e, Vec::new());
    assert_eq!(
        out[0].attr("ingero.incomplete"),
        Some(&AttrValue::Bool(true))
    );
}
