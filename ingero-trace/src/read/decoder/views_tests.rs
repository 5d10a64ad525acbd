//! The argument reader's shortcut for the writer's layout against the field-by-field reader.

use proptest::prelude::*;
use prost::Message;

use super::*;

fn any_arg() -> impl Strategy<Value = DebugAnnotation> {
    (
        prop::option::of(any::<u64>()),
        prop::option::of("[a-z.]{0,6}"),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<i64>()),
        prop::option::of(any::<u64>()),
        prop::option::of("[a-z0-9é]{0,12}"),
        prop::option::of(any::<u64>()),
    )
        .prop_map(|(name_iid, name, b, u, i, p, s, siid)| DebugAnnotation {
            name_iid,
            name,
            bool_value: b,
            uint_value: u,
            int_value: i,
            pointer_value: p,
            string_value: s,
            string_value_iid: siid,
            ..Default::default()
        })
}

/// The writer's layouts: an interned key and one value.
fn writer_arg() -> impl Strategy<Value = DebugAnnotation> {
    let one = |iid: u64| DebugAnnotation {
        name_iid: Some(iid),
        ..Default::default()
    };
    (any::<u64>(), 0..6u8, any::<u64>(), "[a-z0-9é]{0,40}").prop_map(move |(iid, which, v, s)| {
        let a = one(iid);
        match which {
            0 => DebugAnnotation {
                uint_value: Some(v),
                ..a
            },
            1 => DebugAnnotation {
                bool_value: Some(v % 2 == 1),
                ..a
            },
            2 => DebugAnnotation {
                int_value: Some(v as i64),
                ..a
            },
            3 => DebugAnnotation {
                pointer_value: Some(v),
                ..a
            },
            4 => DebugAnnotation {
                string_value_iid: Some(v),
                ..a
            },
            _ => DebugAnnotation {
                string_value: Some(s),
                ..a
            },
        }
    })
}

fn same(b: &[u8]) -> Result<(), TestCaseError> {
    if let Some(pair) = raw_arg_pair(b) {
        let fields = raw_arg_fields(b);
        prop_assert!(fields.is_ok(), "the shortcut read malformed bytes");
        prop_assert_eq!(Some(pair), fields.ok());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    #[test]
    fn the_writer_s_layout_takes_the_shortcut_and_reads_the_same(a in writer_arg()) {
        let b = a.encode_to_vec();
        prop_assert!(raw_arg_pair(&b).is_some(), "{a:?}");
        same(&b)?;
    }

    #[test]
    fn any_argument_reads_the_same(a in any_arg()) {
        same(&a.encode_to_vec())?;
    }

    #[test]
    fn any_bytes_read_the_same(b in prop::collection::vec(any::<u8>(), 0..24)) {
        same(&b)?;
    }

    #[test]
    fn cut_arguments_read_the_same(a in writer_arg(), cut in 0usize..64) {
        let b = a.encode_to_vec();
        same(&b[..cut.min(b.len())])?;
    }
}
