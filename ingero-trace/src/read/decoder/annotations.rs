//! The writer's annotations read straight into their record: an `annotation` instant on a
//! labels track, or a request span's begin on a span lane, without the general path's list
//! of resolved arguments.
//!
//! A label-dense recording (a request span per millisecond) is mostly these packets, and the
//! first pass of every `query` and `explain` decodes all of them: building the list (a shared
//! name and value per argument, then a search by name for each field) was a third of its
//! instructions (docs/benchmarks-window.md). The result is exactly the general path's
//! ([`super::instants::annotation`] over `resolve_args`): the same first-occurrence reading of
//! each fixed key and the same labels in order, which the tests check against it on odd
//! inputs too. An argument that would move the track's placement (`cpu`, `cgroup_id`) is left
//! to the general path.

use super::sequence::SeqState;
use super::values::parse_num;
use super::views::{RawVal, for_each_arg};
use crate::model::{AnnotationRecord, Scope};
use crate::proto::scan::{self, text};
use crate::vocab::{ArgKey, LABEL_PREFIX};

/// What the first occurrence of a fixed key read as a number (`Some(None)`: present, not a
/// number), as `u64_of` reads it.
type First = Option<Option<u64>>;

#[derive(Default)]
struct Fixed {
    uid: First,
    pid: First,
    gid: First,
    received: First,
    realtime: First,
    end_realtime: First,
    scope_start: First,
    /// The first `stamped_by_agent`: whether it was the boolean `true`.
    stamped: Option<bool>,
}

/// The annotation a labels-track instant (`end: None`) or a span lane's slice begin (`end:
/// Some(_)`, its end filled in later) stands for, and the scope start time it carries (a
/// span's scope is its lane's at the end: [`scoped`]); `None` when an argument is one the
/// general path must see.
pub(super) fn annotation_direct(
    seq: &SeqState,
    scope: Option<u32>,
    ts: u64,
    end: Option<u64>,
    raw: &[u8],
) -> scan::Result<Option<(AnnotationRecord, Option<u64>)>> {
    let mut labels = Vec::new();
    let mut f = Fixed::default();
    let mut general = false;
    for_each_arg(raw, |d| {
        let entry = d.name_iid.map(|iid| seq.debug_names.get(iid));
        let inline;
        let (name, slot): (&str, Option<ArgKey>) = match (entry, d.name) {
            (Some(Some(k)), _) => (&k.text, k.slot),
            (Some(None), _) | (None, None) => ("", None),
            (None, Some(n)) => {
                inline = text(n);
                (&inline, ArgKey::from_text(&inline))
            }
        };
        if let Some(key) = name.strip_prefix(LABEL_PREFIX) {
            labels.push((key.to_owned(), string_of(seq, d.val).into_owned()));
            return true;
        }
        let num = || number_of(seq, d.val);
        let first = |field: &mut First| {
            if field.is_none() {
                *field = Some(num());
            }
        };
        match slot {
            Some(ArgKey::ProvenanceUid) => first(&mut f.uid),
            Some(ArgKey::ProvenancePid) => first(&mut f.pid),
            Some(ArgKey::ProvenanceGid) => first(&mut f.gid),
            Some(ArgKey::ReceivedNs) => first(&mut f.received),
            Some(ArgKey::RealtimeNs) => first(&mut f.realtime),
            Some(ArgKey::EndRealtimeNs) => first(&mut f.end_realtime),
            Some(ArgKey::ScopeStartTime) => first(&mut f.scope_start),
            Some(ArgKey::StampedByAgent) if f.stamped.is_none() => {
                f.stamped = Some(matches!(d.val, RawVal::B(true)));
            }
            Some(ArgKey::Cpu | ArgKey::CgroupId) => {
                general = true;
                return false;
            }
            _ => {}
        }
        true
    })?;
    if general {
        return Ok(None);
    }
    let n = |field: First| field.flatten();
    let start_time = n(f.scope_start);
    let record = AnnotationRecord {
        labels,
        scope: scoped(scope, start_time),
        ts_ns: ts,
        end_ns: end,
        provenance_uid: n(f.uid).unwrap_or(0) as u32,
        provenance_pid: n(f.pid).map(|p| p as u32),
        provenance_gid: n(f.gid).unwrap_or(0) as u32,
        received_ns: n(f.received).unwrap_or(0),
        realtime_ns: n(f.realtime).unwrap_or(0),
        end_realtime_ns: n(f.end_realtime),
        stamped_by_agent: f.stamped.unwrap_or(false),
    };
    Ok(Some((record, start_time)))
}

/// An annotation's scope: its track's process and the start time it carried.
pub(super) fn scoped(scope: Option<u32>, start_time: Option<u64>) -> Option<Scope> {
    scope
        .zip(start_time)
        .map(|(pid, start_time)| Scope { pid, start_time })
}

/// A value as a label's text: a string's, `""` for anything else (`Val::as_str`).
fn string_of<'a>(seq: &'a SeqState, v: RawVal<'a>) -> std::borrow::Cow<'a, str> {
    match v {
        RawVal::StrIid(iid) => seq.strings.get(iid).map_or("", |s| &s.text).into(),
        RawVal::Str(s) => text(s),
        _ => "".into(),
    }
}

/// A value as a number, as `Val::as_u64` reads it.
fn number_of(seq: &SeqState, v: RawVal<'_>) -> Option<u64> {
    match v {
        RawVal::U(v) => Some(v),
        RawVal::I(v) => u64::try_from(v).ok(),
        RawVal::B(b) => Some(u64::from(b)),
        RawVal::F(_) => None,
        RawVal::StrIid(iid) => match seq.strings.get(iid) {
            Some(s) => s.num,
            None => parse_num(""),
        },
        RawVal::Str(s) => parse_num(&text(s)),
    }
}

#[cfg(test)]
#[path = "annotations_tests.rs"]
mod tests;
