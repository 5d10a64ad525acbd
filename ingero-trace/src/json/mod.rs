//! The one JSON form of an event: what `ingero trace --json` prints live and what `ingero query
//! --events --json` prints from a recording, key for key (docs/json-schema.md).
//!
//! Every event has the same top-level keys: `type`, `op`, `ts_ns`, `duration_ns`, `pid`,
//! `tid`, `comm`, `cgroup_id`, `cpu`, `ret` (null where it does not apply) and `args`; an
//! annotation has its own shape (`type: "annotation"`). Pointers and handles are hex strings,
//! because 64-bit values do not survive JSON numbers in every reader. A recorded event's line
//! may add `labels` (the labels in force), after every other key.
//!
//! Lines are serialised straight from borrowed views ([`Line`]) of a live [`Event`] or a
//! recorded [`ReadRecord`] (no intermediate `serde_json::Value`), because the live output sits
//! on the agent's drain path.

mod annotation;
mod driver;
mod event;
mod nvtx;

use std::io::{self, Write};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::model::{
    AnnotationRecord, DriverMessage, Event, NvtxRecord, ReadRecord, TimelineRecord,
};
pub use event::EventView;

/// One line: an event or an annotation, with the labels in force when a reader knows them.
pub enum Line<'a> {
    /// A CUDA call, off-CPU interval or lifecycle event (`type`: `cuda`, `sched`, `process`).
    Event(EventView<'a>),
    /// An annotation, in its own shape (`type`: `annotation`).
    Annotation(&'a AnnotationRecord),
    /// An NVTX range or mark, in its own shape (`type`: `nvtx`).
    Nvtx(&'a NvtxRecord),
    /// An NVIDIA driver message, in its own shape (`type`: `driver`).
    Driver(&'a DriverMessage),
}

impl<'a> Line<'a> {
    /// A live event.
    pub fn of_event(e: &'a Event) -> Line<'a> {
        Line::Event(EventView::of_event(e))
    }

    /// A record of the live timeline (what the agent writes).
    pub fn of_timeline(r: &'a TimelineRecord) -> Line<'a> {
        match r {
            TimelineRecord::Event(e) => Line::of_event(e),
            TimelineRecord::Annotation(a) => Line::Annotation(a),
            TimelineRecord::Nvtx(n) => Line::Nvtx(n),
            TimelineRecord::Driver(d) => Line::Driver(d),
        }
    }

    /// A recorded event or annotation; `None` for the records that are not events (session,
    /// statistics, counters, label states).
    pub fn of_record(r: &'a ReadRecord) -> Option<Line<'a>> {
        match r {
            ReadRecord::Annotation(a) => Some(Line::Annotation(a)),
            ReadRecord::Nvtx(n) => Some(Line::Nvtx(n)),
            ReadRecord::Driver(d) => Some(Line::Driver(d)),
            r => EventView::of_record(r).map(Line::Event),
        }
    }
}

/// A [`Line`] with the labels in force (`query --events`): added as `labels` to an event; an
/// annotation's line already carries its own labels under that key.
pub struct Labeled<'a> {
    /// The event or annotation.
    pub line: Line<'a>,
    /// The labels in force at an event (key to value), written as its `labels`; `None`
    /// writes none. An annotation's line carries its own labels and ignores these.
    pub labels: Option<&'a Map<String, Value>>,
}

impl Line<'_> {
    /// Serialises the line as one map, with `labels` after an event's keys (an annotation
    /// writes its own): the one body of [`Line`]'s and [`Labeled`]'s forms, so a plain line is
    /// a labelled one without labels, key for key.
    fn serialize_labeled<S: Serializer>(
        &self,
        labels: Option<&Map<String, Value>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self {
            Line::Event(e) => {
                e.entries(&mut map)?;
                if let Some(labels) = labels {
                    map.serialize_entry("labels", labels)?;
                }
            }
            Line::Annotation(a) => annotation::entries(a, &mut map)?,
            // A machine-wide message: no labels are in force for it.
            Line::Driver(d) => driver::entries(d, &mut map)?,
            Line::Nvtx(n) => {
                nvtx::entries(n, &mut map)?;
                if let Some(labels) = labels {
                    map.serialize_entry("labels", labels)?;
                }
            }
        }
        map.end()
    }
}

impl Serialize for Labeled<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.line.serialize_labeled(self.labels, s)
    }
}

impl Serialize for Line<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_labeled(None, s)
    }
}

/// Writes `line` as one JSON line.
pub fn write_line(out: &mut dyn Write, line: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
}

/// A 64-bit value shown as `"0x…"`, formatted without allocating.
struct Hex(u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 18];
        let mut cursor = io::Cursor::new(&mut buf[..]);
        let _ = write!(cursor, "{:#x}", self.0);
        let len = cursor.position() as usize;
        s.serialize_str(std::str::from_utf8(&buf[..len]).unwrap_or("0x?"))
    }
}

#[cfg(test)]
mod tests;
