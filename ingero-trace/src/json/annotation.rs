//! An annotation's line: its labels, scope, receive time, provenance and time (an instant's
//! trace-clock and CLOCK_REALTIME stamps and who stamped it, or a span's).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::model::AnnotationRecord;

/// Labels as an object, in the client's order.
struct Labels<'a>(&'a [(String, String)]);

impl Serialize for Labels<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Who wrote the line (SO_PEERCRED).
#[derive(Serialize)]
struct Provenance {
    uid: u32,
    gid: u32,
    pid: Option<u32>,
}

pub(super) fn entries<M: SerializeMap>(a: &AnnotationRecord, map: &mut M) -> Result<(), M::Error> {
    map.serialize_entry("type", "annotation")?;
    map.serialize_entry("labels", &Labels(&a.labels))?;
    map.serialize_entry("pid", &a.scope.map(|s| s.pid))?;
    map.serialize_entry("received_ns", &a.received_ns)?;
    map.serialize_entry(
        "provenance",
        &Provenance {
            uid: a.provenance_uid,
            gid: a.provenance_gid,
            pid: a.provenance_pid,
        },
    )?;
    if let Some(scope) = a.scope {
        map.serialize_entry("start_time", &scope.start_time)?;
    }
    match a.end_ns {
        None => {
            map.serialize_entry("ts_ns", &a.ts_ns)?;
            map.serialize_entry("ts_realtime_ns", &a.realtime_ns)?;
            let source = if a.stamped_by_agent {
                "agent"
            } else {
                "client"
            };
            map.serialize_entry("ts_source", source)?;
        }
        Some(end) => {
            map.serialize_entry("span_start_ns", &a.ts_ns)?;
            map.serialize_entry("span_end_ns", &end)?;
            map.serialize_entry("span_start_realtime_ns", &a.realtime_ns)?;
            map.serialize_entry("span_end_realtime_ns", &a.end_realtime_ns.unwrap_or(0))?;
        }
    }
    Ok(())
}
