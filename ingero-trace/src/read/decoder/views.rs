//! In-place views of the `TrackEvent` and `DebugAnnotation` messages (no owned copies: the
//! general path's share of the reader's time), and their names and values resolved against a
//! sequence's interned tables.

use std::sync::Arc;

use super::sequence::SeqState;
use super::values::Val;
use crate::proto::scan::{self, Cur, Wire, text};
use crate::proto::varint;
use crate::proto::{DebugAnnotation, TrackEvent};

/// A debug annotation's value as found on the wire.
#[derive(Clone, Copy)]
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(super) enum RawVal<'a> {
    U(u64),
    I(i64),
    B(bool),
    F(f64),
    StrIid(u64),
    Str(&'a [u8]),
}

#[cfg_attr(test, derive(Debug, PartialEq))]
pub(super) struct RawArg<'a> {
    pub(super) name_iid: Option<u64>,
    pub(super) name: Option<&'a [u8]>,
    pub(super) val: RawVal<'a>,
}

/// `DebugAnnotation` fields, with the writer's precedence when several values are set.
#[inline]
fn raw_arg(b: &[u8]) -> scan::Result<RawArg<'_>> {
    match raw_arg_pair(b) {
        Some(a) => Ok(a),
        None => raw_arg_fields(b),
    }
}

/// The writer's layout of an argument, an interned key then one value and nothing else, read
/// without the field loop (label packets carry ten or so of them); `None`: any other layout,
/// for [`raw_arg_fields`], the reference (and the one that reports malformed bytes).
#[inline(always)]
fn raw_arg_pair(b: &[u8]) -> Option<RawArg<'_>> {
    // Field keys: (number << 3) | wire type.
    const NAME_IID: u8 = 1 << 3;
    const BOOL: u64 = 2 << 3;
    const UINT: u64 = 3 << 3;
    const INT: u64 = 4 << 3;
    const STRING: u64 = (6 << 3) | 2;
    const POINTER: u64 = 7 << 3;
    const STRING_IID: u64 = 17 << 3;
    let [NAME_IID, rest @ ..] = b else {
        return None;
    };
    let (iid, rest) = varint::take(rest)?;
    let (key, rest) = varint::take(rest)?;
    let (val, rest) = match key {
        UINT | POINTER => {
            let (v, rest) = varint::take(rest)?;
            (RawVal::U(v), rest)
        }
        BOOL => {
            let (v, rest) = varint::take(rest)?;
            (RawVal::B(v != 0), rest)
        }
        INT => {
            let (v, rest) = varint::take(rest)?;
            (RawVal::I(v as i64), rest)
        }
        STRING_IID => {
            let (v, rest) = varint::take(rest)?;
            (RawVal::StrIid(v), rest)
        }
        STRING => {
            let (n, rest) = varint::take(rest)?;
            let n = usize::try_from(n).ok()?;
            (RawVal::Str(rest.get(..n)?), rest.get(n..)?)
        }
        _ => return None,
    };
    rest.is_empty().then_some(RawArg {
        name_iid: Some(iid),
        name: None,
        val,
    })
}

/// [`raw_arg`] field by field: any layout.
fn raw_arg_fields(b: &[u8]) -> scan::Result<RawArg<'_>> {
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

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
