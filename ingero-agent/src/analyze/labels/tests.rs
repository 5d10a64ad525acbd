//! The label index's tests: lookups by scope and time, contexts, values held until an end,
//! spans that overlap; intervals ordered by their places in the recording, and an index
//! restricted to a window the same whatever superset it was built from.

use super::test_records::{span, state};
use super::*;
use ingero_trace::model::ReadRecord;

#[test]
fn values_of_lists_every_value_in_scope_and_range() {
    let mut idx = LabelIndex::default();
    idx.add_state(&state(Some(7), "step", "1", 0, 10));
    idx.add_state(&state(Some(7), "step", "2", 10, 20));
    idx.add_state(&state(Some(8), "step", "9", 0, 20));
    idx.add_state(&state(None, "step", "5", 30, 40));
    idx.seal();
    let names = |ids: Vec<ValueId>| {
        ids.into_iter()
            .map(|v| idx.value(v).to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(idx.values_of("step", &[7], (0, 100))),
        ["1", "2", "5"]
    );
    assert_eq!(names(idx.values_of("step", &[], (15, 25))), ["2", "9"]);
    assert!(idx.values_of("phase", &[], (0, 100)).is_empty());
}

#[test]
fn context_names_the_other_labels_in_force_preferring_the_process_scope() {
    let mut idx = LabelIndex::default();
    idx.add_state(&state(Some(7), "phase", "train", 0, 100));
    idx.add_state(&state(None, "phase", "val", 0, 100));
    idx.add_state(&state(Some(7), "step", "3", 10, 20));
    idx.add_span(&span(None, "r-1", 5, 50));
    idx.seal();
    let ctx = idx.context_at(10, &["step".to_string()]);
    assert_eq!(ctx, vec![("phase", "train"), ("request_id", "r-1")]);
    assert!(
        idx.context_at(200, &[]).is_empty(),
        "nothing holds after the intervals"
    );
}

#[test]
fn states_prefer_the_process_scope_and_spans_overlap() {
    let mut ix = LabelIndex::default();
    ix.add_state(&state(Some(7), "step", "1", 10, 20));
    ix.add_state(&state(Some(7), "step", "2", 20, 30));
    ix.add_state(&state(None, "step", "g", 0, 100));
    ix.add_span(&span(Some(7), "a", 5, 50));
    ix.add_span(&span(None, "b", 25, 26));
    ix.add_span(&span(Some(8), "c", 0, 100));
    ix.seal();
    let step = ix.key("step").expect("step indexed");
    let names = |ids: &[ValueId]| {
        ids.iter()
            .map(|i| ix.value(*i).to_owned())
            .collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    step.values_at(7, 20, &mut out);
    assert_eq!(names(&out), ["2"]);
    out.clear();
    step.values_at(7, 35, &mut out);
    assert_eq!(names(&out), ["g"], "trace-wide where the process has none");
    out.clear();
    step.values_at(9, 15, &mut out);
    assert_eq!(names(&out), ["g"]);
    let req = ix.key("request_id").expect("request_id indexed");
    out.clear();
    req.values_at(7, 25, &mut out);
    let mut got = names(&out);
    got.sort();
    assert_eq!(got, ["a", "b"], "overlapping spans both count");
    out.clear();
    req.values_at(7, 60, &mut out);
    assert!(out.is_empty());
    assert!(ix.is_span_key("request_id") && !ix.is_span_key("step"));
    let a = ix.value_id("a").expect("a interned");
    assert_eq!(ix.intervals_of("request_id", a), vec![(5, 50)]);
    let by_value = ix.intervals_by_value("request_id");
    assert_eq!(by_value.len(), 3);
    for (v, iv) in &by_value {
        assert_eq!(iv, &ix.intervals_of("request_id", *v));
    }
    assert!(ix.intervals_by_value("nope").is_empty());
}

#[test]
fn spans_overlap_only_when_one_event_can_lie_in_two() {
    let with = |spans: &[(Option<u32>, u64, u64)]| {
        let mut ix = LabelIndex::default();
        for (i, (scope, a, b)) in spans.iter().enumerate() {
            ix.add_span(&span(*scope, &i.to_string(), *a, *b));
        }
        ix.seal();
        ix.spans_overlap("request_id")
    };
    assert!(!with(&[(Some(7), 0, 10), (Some(7), 10, 20)]), "touching");
    assert!(with(&[(Some(7), 0, 10), (Some(7), 5, 20)]));
    assert!(with(&[(None, 0, 100), (None, 20, 30)]), "nested");
    assert!(
        !with(&[(Some(7), 0, 10), (Some(8), 5, 20)]),
        "two processes"
    );
    assert!(
        with(&[(Some(7), 0, 10), (None, 5, 20)]),
        "own and trace-wide"
    );
    assert!(!with(&[]));
}

#[test]
fn values_hold_until_the_returned_end() {
    let mut ix = LabelIndex::default();
    ix.add_state(&state(Some(7), "k", "1", 10, 20));
    ix.add_state(&state(Some(7), "k", "2", 20, 30));
    ix.add_state(&state(Some(7), "k", "z", 40, 40));
    ix.add_state(&state(None, "k", "g", 0, 60));
    ix.add_state(&state(None, "k", "h", 70, 80));
    let mut spans = span(Some(7), "a", 5, 50);
    spans.labels[0].0 = "k".into();
    ix.add_span(&spans);
    for (scope, v, a, b) in [
        (None, "b", 25, 26),
        (None, "c", 25, 25),
        (Some(8), "d", 0, 90),
    ] {
        let mut s = span(scope, v, a, b);
        s.labels[0].0 = "k".into();
        ix.add_span(&s);
    }
    ix.seal();
    let k = ix.key("k").expect("k indexed");
    for pid in [7, 8, 9] {
        for t in 0..100 {
            let mut at_t = Vec::new();
            let end = k.values_until(pid, t, &mut at_t);
            assert!(end > t, "pid {pid} t {t}: the answer holds at t itself");
            for later in t..end.min(110) {
                let mut got = Vec::new();
                k.values_at(pid, later, &mut got);
                assert_eq!(got, at_t, "pid {pid}: the answer at {t} held until {end}");
            }
        }
    }
}

/// The label records of a small recording, each with its place in it.
fn placed() -> Vec<(ReadRecord, u64)> {
    vec![
        (
            ReadRecord::LabelState(state(None, "phase", "train", 0, 50)),
            10,
        ),
        // Three changes at one instant, 50: the last one written holds there.
        (
            ReadRecord::LabelState(state(None, "phase", "eval", 50, 50)),
            20,
        ),
        (
            ReadRecord::LabelState(state(None, "phase", "test", 50, 50)),
            30,
        ),
        (
            ReadRecord::LabelState(state(None, "phase", "idle", 50, 50)),
            40,
        ),
        (
            ReadRecord::LabelState(state(Some(7), "step", "1", 0, 20)),
            50,
        ),
        (
            ReadRecord::LabelState(state(Some(7), "step", "2", 20, 40)),
            60,
        ),
        (
            ReadRecord::LabelState(state(Some(7), "step", "3", 40, 90)),
            70,
        ),
        (ReadRecord::Annotation(span(Some(7), "r-1", 5, 15)), 80),
        (ReadRecord::Annotation(span(None, "r-2", 30, 60)), 90),
        (ReadRecord::Annotation(span(None, "r-3", 80, 85)), 100),
    ]
}

/// What `ix` says at `t` for process 7: its values by key.
fn at(ix: &LabelIndex, t: u64) -> Vec<(String, Vec<String>)> {
    ix.key_names()
        .map(|name| {
            let mut out = Vec::new();
            if let Some(k) = ix.key(name) {
                k.values_at(7, t, &mut out);
            }
            let values = out.iter().map(|v| ix.value(*v).to_owned()).collect();
            (name.to_owned(), values)
        })
        .collect()
}

#[test]
fn records_with_the_same_interval_keep_their_places_in_the_recording() {
    let mut forward = LabelIndex::default();
    let mut backward = LabelIndex::default();
    for (rec, place) in placed() {
        forward.add_at(&rec, place);
    }
    for (rec, place) in placed().into_iter().rev() {
        backward.add_at(&rec, place);
    }
    forward.seal();
    backward.seal();
    for t in [0, 25, 50, 51] {
        assert_eq!(at(&forward, t), at(&backward, t), "at {t}");
    }
    let phase = |ix: &LabelIndex| at(ix, 50)[0].1.clone();
    assert_eq!(phase(&forward), ["idle"], "the last change written at 50");
}

#[test]
fn an_index_restricted_to_a_window_is_the_same_whatever_it_was_built_from() {
    let mut all = LabelIndex::default();
    for (rec, place) in placed() {
        all.add_at(&rec, place);
    }
    // Built from the records overlapping [25, 55] only, in another order.
    let mut part = LabelIndex::default();
    for (rec, place) in placed().into_iter().rev() {
        let (a, b) = rec.interval();
        if a <= 55 && b >= 25 {
            part.add_at(&rec, place);
        }
    }
    let (x, y) = (all.restricted_to(25, 55), part.restricted_to(25, 55));
    assert_eq!(x.values, y.values, "the same value ids");
    for t in 25..=55 {
        assert_eq!(at(&x, t), at(&y, t), "at {t}");
    }
    // Only what overlaps the window is kept: no `r-1` (5..15) nor `r-3` (80..85).
    assert_eq!(x.value_id("r-1"), None);
    assert_eq!(x.value_id("r-3"), None);
    assert_eq!(
        x.intervals_of("request_id", x.value_id("r-2").expect("r-2")),
        [(30, 60)]
    );
    assert_eq!(at(&x, 50)[0].1, ["idle"], "the last change written at 50");
    // A key with nothing in the window is gone.
    let early = all.restricted_to(0, 4);
    assert!(early.key("request_id").is_none());
    assert!(early.key("step").is_some());
    assert_eq!(all.earliest_overlapping(25, 55), Some(0));
    assert_eq!(all.earliest_overlapping(81, 82), Some(40));
    assert_eq!(all.earliest_overlapping(91, 99), None);
}
