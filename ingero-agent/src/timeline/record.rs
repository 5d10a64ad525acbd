//! [`TimelineRecord`]: what the merger orders and the recorder writes — a probe [`Event`] or an
//! accepted annotation, on the one trace clock (CLOCK_MONOTONIC ns).
//!
//! [`AnnotationRecord`] is the timeline's own, flat form of an annotation: the recorder and the
//! reader share it, so what `read/` yields compares equal to what was written. It is built from
//! the ingest server's [`ReceivedAnnotation`] with `From`.

use crate::annotate::{AnnotationTime, ReceivedAnnotation};
use crate::decode::Event;

/// The process incarnation an annotation is scoped to (`None` on the record: trace-wide).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    pub pid: u32,
    /// Start time of the process in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

/// One annotation: labels set at an instant, or a span over `[ts_ns, end_ns]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnotationRecord {
    /// Labels in the client's order; an empty value clears the key (instants only).
    pub labels: Vec<(String, String)>,
    /// `None`: trace-wide.
    pub scope: Option<Scope>,
    /// The instant, or the span's start (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// `Some(end)`: a span `[ts_ns, end]`; `None`: an instant that sets state.
    pub end_ns: Option<u64>,
    /// Effective uid of the writer.
    pub provenance_uid: u32,
    /// Pid of the writer, when the kernel could say.
    pub provenance_pid: Option<u32>,
}

impl AnnotationRecord {
    pub fn is_span(&self) -> bool {
        self.end_ns.is_some()
    }
}

impl From<&ReceivedAnnotation> for AnnotationRecord {
    fn from(a: &ReceivedAnnotation) -> Self {
        let (ts_ns, end_ns) = match a.time {
            AnnotationTime::Instant { ts_ns, .. } => (ts_ns, None),
            AnnotationTime::Span {
                start_ns, end_ns, ..
            } => (start_ns, Some(end_ns.max(start_ns))),
        };
        AnnotationRecord {
            labels: a.labels.clone(),
            scope: a.scope.map(|s| Scope {
                pid: s.pid,
                start_time: s.start_time,
            }),
            ts_ns,
            end_ns,
            provenance_uid: a.provenance.uid,
            provenance_pid: a.provenance.pid,
        }
    }
}

/// One item on the timeline.
#[derive(Clone, Debug, PartialEq)]
pub enum TimelineRecord {
    Event(Event),
    Annotation(AnnotationRecord),
}

impl TimelineRecord {
    /// The time the record is ordered by: an event's start, an annotation's instant or span
    /// start.
    pub fn ts_ns(&self) -> u64 {
        match self {
            TimelineRecord::Event(e) => e.ts_ns(),
            TimelineRecord::Annotation(a) => a.ts_ns,
        }
    }
}

impl From<Event> for TimelineRecord {
    fn from(e: Event) -> Self {
        TimelineRecord::Event(e)
    }
}

impl From<&ReceivedAnnotation> for TimelineRecord {
    fn from(a: &ReceivedAnnotation) -> Self {
        TimelineRecord::Annotation(a.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotate::{Peer, ProcessScope};

    #[test]
    fn received_span_and_instant_convert() {
        let span = ReceivedAnnotation {
            labels: vec![("request_id".into(), "r1".into())],
            scope: Some(ProcessScope {
                pid: 7,
                start_time: 99,
            }),
            time: AnnotationTime::Span {
                start_ns: 10,
                end_ns: 20,
                start_realtime_ns: 1,
                end_realtime_ns: 2,
            },
            provenance: Peer {
                uid: 1000,
                gid: 1000,
                pid: Some(42),
            },
            received_ns: 30,
        };
        let r = AnnotationRecord::from(&span);
        assert_eq!((r.ts_ns, r.end_ns), (10, Some(20)));
        assert_eq!(
            r.scope,
            Some(Scope {
                pid: 7,
                start_time: 99
            })
        );
        assert_eq!((r.provenance_uid, r.provenance_pid), (1000, Some(42)));
        let instant = ReceivedAnnotation {
            time: AnnotationTime::Instant {
                ts_ns: 5,
                realtime_ns: 6,
                stamped_by_agent: true,
            },
            scope: None,
            ..span
        };
        let t = TimelineRecord::from(&instant);
        assert_eq!(t.ts_ns(), 5);
        let TimelineRecord::Annotation(a) = t else {
            panic!("not an annotation")
        };
        assert_eq!((a.end_ns, a.scope), (None, None));
    }
}
