//! The direct annotation reading against the general path (`resolve_args`, then
//! `instants::annotation`), on the writer's layout and on arguments it never writes:
//! repeated keys, values of the wrong type, inline and unknown keys, numbers as strings.

use std::sync::Arc;

use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::proto::{DebugAnnotation, TrackEvent};
use crate::read::decoder::instants::annotation;
use crate::read::decoder::sequence::{KeyEntry, StrEntry};
use crate::read::decoder::views::resolve_args_into;

/// Interned keys: iid 1.. in this order (`labels.step` and `labels.phase` among them).
const KEYS: &[&str] = &[
    "labels.step",
    "labels.phase",
    "provenance.uid",
    "provenance.pid",
    "provenance.gid",
    "received_ns",
    "realtime_ns",
    "end_realtime_ns",
    "stamped_by_agent",
    "scope.start_time",
    "cpu",
    "size",
];
/// Interned string values: iid 1.. (numbers among them).
const STRINGS: &[&str] = &["41", "train", "0x1f", "", "eval"];

fn seq() -> SeqState {
    let mut seq = SeqState::default();
    for (i, k) in KEYS.iter().enumerate() {
        let text: Arc<str> = (*k).into();
        let slot = ArgKey::from_text(&text);
        seq.debug_names
            .insert(i as u64 + 1, KeyEntry { text, slot });
    }
    let mut launches = Vec::new();
    for (i, s) in STRINGS.iter().enumerate() {
        seq.strings
            .insert(i as u64 + 1, StrEntry::new((*s).into(), &mut launches));
    }
    seq
}

#[test]
fn the_fixed_keys_are_the_vocabulary_s() {
    for k in &KEYS[2..11] {
        assert!(ArgKey::from_text(k).is_some(), "{k}");
    }
}

/// One argument: a key (interned, inline or unknown) and a value of any type.
fn arg() -> impl Strategy<Value = DebugAnnotation> {
    let key = prop_oneof![
        (1..=KEYS.len() as u64 + 1).prop_map(|iid| (Some(iid), None)),
        prop::sample::select(vec![
            "labels.step",
            "labels.x",
            "provenance.pid",
            "received_ns",
            "stamped_by_agent",
            "other",
            "",
        ])
        .prop_map(|n| (None, Some(n.to_owned()))),
        Just((None, None)),
    ];
    let value = prop_oneof![
        any::<u64>().prop_map(|v| DebugAnnotation {
            uint_value: Some(v % 1000),
            ..Default::default()
        }),
        any::<i64>().prop_map(|v| DebugAnnotation {
            int_value: Some(v % 1000),
            ..Default::default()
        }),
        any::<bool>().prop_map(|v| DebugAnnotation {
            bool_value: Some(v),
            ..Default::default()
        }),
        Just(DebugAnnotation {
            double_value: Some(1.5),
            ..Default::default()
        }),
        (1..=STRINGS.len() as u64 + 1).prop_map(|iid| DebugAnnotation {
            string_value_iid: Some(iid),
            ..Default::default()
        }),
        prop::sample::select(vec!["7", "0x20", "step-3", "é", ""]).prop_map(|s| DebugAnnotation {
            string_value: Some(s.to_owned()),
            ..Default::default()
        }),
    ];
    (key, value).prop_map(|((name_iid, name), v)| DebugAnnotation {
        name_iid,
        name,
        ..v
    })
}

/// The general path's record for the same arguments.
fn general(seq: &SeqState, scope: Option<u32>, end: Option<u64>, raw: &[u8]) -> AnnotationRecord {
    let mut args = Vec::new();
    resolve_args_into(seq, raw, &mut args).expect("args");
    annotation(scope, 1_000, end, &args)
}

fn check(args: Vec<DebugAnnotation>, scope: Option<u32>, end: Option<u64>) {
    let raw = TrackEvent {
        debug_annotations: args.clone(),
        ..Default::default()
    }
    .encode_to_vec();
    let seq = seq();
    let placement = args.iter().any(|a| a.name_iid == Some(11));
    match annotation_direct(&seq, scope, 1_000, end, &raw).expect("scan") {
        Some((direct, _)) => {
            assert!(!placement, "a cpu argument goes to the general path");
            assert_eq!(direct, general(&seq, scope, end, &raw), "{args:?}");
        }
        None => assert!(placement, "only a cpu argument is left to the general path"),
    }
}

#[test]
fn the_writer_s_layout_reads_as_the_general_path_does() {
    let u = |iid: u64, v: u64| DebugAnnotation {
        name_iid: Some(iid),
        uint_value: Some(v),
        ..Default::default()
    };
    let args = vec![
        DebugAnnotation {
            name_iid: Some(1),
            string_value: Some("41".into()),
            ..Default::default()
        },
        DebugAnnotation {
            name: Some("labels.request_id".into()),
            string_value: Some("r-7".into()),
            ..Default::default()
        },
        u(3, 1000),
        u(4, 4242),
        u(5, 100),
        u(6, 5_000),
        u(7, 1_700_000_000_000_000_000),
        u(8, 1_700_000_000_000_500_000),
        DebugAnnotation {
            name_iid: Some(9),
            bool_value: Some(true),
            ..Default::default()
        },
        u(10, 77),
    ];
    let raw = TrackEvent {
        debug_annotations: args.clone(),
        ..Default::default()
    }
    .encode_to_vec();
    let seq = seq();
    let (direct, start) = annotation_direct(&seq, Some(4242), 1_000, Some(2_000), &raw)
        .expect("scan")
        .expect("direct");
    assert_eq!(start, Some(77));
    assert_eq!(
        direct.labels,
        [
            ("step".into(), "41".into()),
            ("request_id".into(), "r-7".into())
        ]
    );
    assert_eq!(
        (
            direct.provenance_uid,
            direct.provenance_pid,
            direct.stamped_by_agent
        ),
        (1000, Some(4242), true)
    );
    assert_eq!(direct, general(&seq, Some(4242), Some(2_000), &raw));
    check(args, None, None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn any_arguments_read_as_the_general_path_does(
        args in prop::collection::vec(arg(), 0..14),
        scope in prop::option::of(1u32..5),
        end in prop::option::of(1_000u64..3_000),
    ) {
        check(args, scope, end);
    }
}
