//! In-place views of the `TrackEvent` and `DebugAnnotation` messages (no owned copies: the
//! general path's share of the reader's time), and their names and values resolved against a
//! sequence's interned tables.

use std::sync::Arc;

use super::sequence::SeqState;
use super::values::Val;
use crate::proto::scan::{self, Cur, Wire, text};
use crate::proto::{DebugAnnotation, TrackEvent};

/// A debug annotation's value as found on the wire.
#[derive(Clone, Copy)]
pub(super) enum RawVal<'a> {
    U(u64),
    I(i64),
    B(bool),
    F(f64),
    StrIid(u64),
    Str(&'a [u8]),
}

pub(super) struct RawArg<'a> {
    pub(super) name_iid: Option<u64>,
    pub(super) name: Option<&'a [u8]>,
    pub(super) val: RawVal<'a>,
}

/// `DebugAnnotation` fields, with the writer's precedence when several values are set.
fn raw_arg(b: &[u8]) -> scan::Result<RawArg<'_>> {
    let mut c = Cur::new(b);
    let (mut name_iid, mut name) = (None, None);
    let (mut u, mut i, mut p, mut bo, mut siid, mut s) = (None, None, None, None, None, None);
    let mut d = None;
    while let Some((f, w)) = c.field()? {
        match f {
            DebugAnnotation::NAME_IID => name_iid = Some(w.int()),
            DebugAnnotation::NAME => name = Some(w.bytes()),
            DebugAnnotation::BOOL_VALUE => bo = Some(w.int() != 0),
            DebugAnnotation::UINT_VALUE => u = Some(w.int()),
            DebugAnnotation::INT_VALUE => i = Some(w.int() as i64),
            DebugAnnotation::DOUBLE_VALUE => d = Some(f64::from_bits(w.int())),
            DebugAnnotation::POINTER_VALUE => p = Some(w.int()),
            DebugAnnotation::STRING_VALUE_IID => siid = Some(w.int()),
            DebugAnnotation::STRING_VALUE => s = Some(w.bytes()),
            _ => {}
        }
    }
    let val = if let Some(v) = u {
        RawVal::U(v)
    } else if let Some(v) = i {
        RawVal::I(v)
    } else if let Some(v) = p {
        RawVal::U(v)
    } else if let Some(v) = bo {
        RawVal::B(v)
    } else if let Some(v) = d {
        RawVal::F(v)
    } else if let Some(v) = siid {
        RawVal::StrIid(v)
    } else {
        RawVal::Str(s.unwrap_or(&[]))
    };
    Ok(RawArg {
        name_iid,
        name,
        val,
    })
}

/// The `TrackEvent` fields the reader uses (debug annotations are re-scanned from `raw`).
#[derive(Default)]
pub(super) struct Te<'a> {
    pub(super) ty: u64,
    pub(super) track: u64,
    pub(super) name_iid: Option<u64>,
    pub(super) name: Option<&'a [u8]>,
    pub(super) counter_value: i64,
    /// How many debug annotations it has (what their list is allocated for).
    pub(super) arg_count: usize,
    pub(super) raw: &'a [u8],
}

pub(super) fn track_event(b: &[u8]) -> scan::Result<Te<'_>> {
    let mut te = Te {
        raw: b,
        ..Default::default()
    };
    let mut c = Cur::new(b);
    while let Some((f, w)) = c.field()? {
        match f {
            TrackEvent::TYPE => te.ty = w.int(),
            TrackEvent::TRACK_UUID => te.track = w.int(),
            TrackEvent::NAME_IID => te.name_iid = Some(w.int()),
            TrackEvent::NAME => te.name = Some(w.bytes()),
            TrackEvent::COUNTER_VALUE => te.counter_value = w.int() as i64,
            TrackEvent::DEBUG_ANNOTATIONS => te.arg_count += 1,
            _ => {}
        }
    }
    Ok(te)
}

/// Calls `f` on each debug annotation of a track event.
pub(super) fn for_each_arg<'a>(
    raw: &'a [u8],
    mut f: impl FnMut(RawArg<'a>) -> bool,
) -> scan::Result<()> {
    let mut c = Cur::new(raw);
    while let Some((num, w)) = c.field()? {
        if num == TrackEvent::DEBUG_ANNOTATIONS {
            if let Wire::Len(b) = w {
                if !f(raw_arg(b)?) {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// A track event's name: interned, inline, or empty.
pub(super) fn event_name(seq: &SeqState, te: &Te<'_>) -> Arc<str> {
    match (te.name_iid, te.name) {
        (Some(iid), _) => seq
            .names
            .get(iid)
            .map_or_else(|| "".into(), |n| n.text.clone()),
        (None, Some(n)) => text(n).into(),
        (None, None) => "".into(),
    }
}

/// Every argument of a track event, names and string values resolved (the general path), in
/// a list of exactly their number.
pub(super) fn resolve_args(seq: &SeqState, te: &Te<'_>) -> scan::Result<Vec<(Arc<str>, Val)>> {
    let mut out = Vec::with_capacity(te.arg_count);
    resolve_args_into(seq, te.raw, &mut out)?;
    Ok(out)
}

/// [`resolve_args`] appended to `out` (a list the caller reuses: instants keep none).
pub(super) fn resolve_args_into(
    seq: &SeqState,
    raw: &[u8],
    out: &mut Vec<(Arc<str>, Val)>,
) -> scan::Result<()> {
    for_each_arg(raw, |d| {
        let name: Arc<str> = match (d.name_iid, d.name) {
            (Some(iid), _) => seq
                .debug_names
                .get(iid)
                .map_or_else(|| "".into(), |k| k.text.clone()),
            (None, Some(n)) => text(n).into(),
            (None, None) => "".into(),
        };
        let val = match d.val {
            RawVal::U(v) => Val::U(v),
            RawVal::I(v) => Val::I(v),
            RawVal::B(v) => Val::B(v),
            RawVal::F(v) => Val::F(v),
            RawVal::StrIid(iid) => Val::S(
                seq.strings
                    .get(iid)
                    .map_or_else(|| "".into(), |s| s.text.clone()),
            ),
            RawVal::Str(s) => Val::S(text(s).into()),
        };
        out.push((name, val));
        true
    })
}
