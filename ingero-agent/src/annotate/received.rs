//! `ReceivedAnnotation`: an accepted annotation as it leaves the ingest
//! server for the timeline, with its scope, trace-clock times and the
//! writer's credentials.

use ingero_trace::json::Line;
use serde_json::Value;

use ingero_trace::clock::ClockConverter;
use ingero_trace::model::{AnnotationRecord, Scope, TimelineRecord};

/// Who wrote the line: SO_PEERCRED of the connection, read once when it
/// was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Effective uid of the writer.
    pub uid: u32,
    /// Effective gid of the writer.
    pub gid: u32,
    /// Pid of the writer in the agent's pid namespace (`None` if the kernel
    /// could not say, e.g. from another namespace).
    pub pid: Option<u32>,
}

/// When the annotation applies, on the trace clock (CLOCK_MONOTONIC ns),
/// with the original REALTIME values kept for display and debugging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationTime {
    /// From `ts_ns` until the same key is set again in the same scope.
    Instant {
        /// Trace-clock time.
        ts_ns: u64,
        /// Unix ns as sent by the client, or the agent's receive time.
        realtime_ns: u64,
        /// True when the client sent no `ts` and the agent stamped it.
        stamped_by_agent: bool,
    },
    /// Exactly `[start_ns, end_ns]`.
    Span {
        /// Trace-clock start.
        start_ns: u64,
        /// Trace-clock end (`>= start_ns`).
        end_ns: u64,
        /// Unix ns as sent.
        start_realtime_ns: u64,
        /// Unix ns as sent.
        end_realtime_ns: u64,
    },
}

impl AnnotationTime {
    /// A line's time on the trace clock: its span, else its own `ts`, else the moment the agent
    /// received it (`received_ns` on CLOCK_MONOTONIC, `now_realtime_ns` on CLOCK_REALTIME).
    pub fn resolve(
        span: Option<(u64, u64)>,
        ts: Option<u64>,
        clock: &ClockConverter,
        received_ns: u64,
        now_realtime_ns: u64,
    ) -> AnnotationTime {
        match (span, ts) {
            (Some((s, e)), _) => AnnotationTime::Span {
                start_ns: clock.realtime_to_monotonic(s),
                end_ns: clock.realtime_to_monotonic(e),
                start_realtime_ns: s,
                end_realtime_ns: e,
            },
            (None, Some(ts)) => AnnotationTime::Instant {
                ts_ns: clock.realtime_to_monotonic(ts),
                realtime_ns: ts,
                stamped_by_agent: false,
            },
            (None, None) => AnnotationTime::Instant {
                ts_ns: received_ns,
                realtime_ns: now_realtime_ns,
                stamped_by_agent: true,
            },
        }
    }
}

/// One accepted annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedAnnotation {
    /// Labels in the order the client sent them; an empty value clears the
    /// key.
    pub labels: Vec<(String, String)>,
    /// `None`: trace-wide.
    pub scope: Option<Scope>,
    /// Instant or span, on the trace clock.
    pub time: AnnotationTime,
    /// The writer's credentials.
    pub provenance: Peer,
    /// When the agent received the line (trace clock).
    pub received_ns: u64,
}

impl ReceivedAnnotation {
    /// The `--json` form as a value to look into: the recording's line for the same annotation
    /// ([`ingero_trace::json`]): `"type":"annotation"`, the labels, the scope pid (`null`
    /// when trace-wide) and start time, the trace-clock times (`ts_ns`, or `span_start_ns`
    /// and `span_end_ns`) with their REALTIME originals, and the provenance. The agent itself
    /// writes that line straight from the [`AnnotationRecord`], without this tree.
    pub fn to_json(&self) -> Value {
        let record = AnnotationRecord::from(self);
        serde_json::to_value(Line::Annotation(&record)).unwrap_or(Value::Null)
    }
}

impl From<&ReceivedAnnotation> for AnnotationRecord {
    fn from(a: &ReceivedAnnotation) -> Self {
        a.clone().into()
    }
}

/// By value, so the labels move into the record instead of being copied (the agent's path:
/// each annotation is converted once, for `--json` and the recording together).
impl From<ReceivedAnnotation> for AnnotationRecord {
    fn from(a: ReceivedAnnotation) -> Self {
        let (ts_ns, end_ns, realtime_ns, end_realtime_ns, stamped_by_agent) = match a.time {
            AnnotationTime::Instant {
                ts_ns,
                realtime_ns,
                stamped_by_agent,
            } => (ts_ns, None, realtime_ns, None, stamped_by_agent),
            AnnotationTime::Span {
                start_ns,
                end_ns,
                start_realtime_ns,
                end_realtime_ns,
            } => (
                start_ns,
                Some(end_ns.max(start_ns)),
                start_realtime_ns,
                Some(end_realtime_ns),
                false,
            ),
        };
        AnnotationRecord {
            labels: a.labels,
            scope: a.scope,
            ts_ns,
            end_ns,
            provenance_uid: a.provenance.uid,
            provenance_pid: a.provenance.pid,
            provenance_gid: a.provenance.gid,
            received_ns: a.received_ns,
            realtime_ns,
            end_realtime_ns,
            stamped_by_agent,
        }
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
    use serde_json::json;

    fn sample(time: AnnotationTime, scope: Option<Scope>) -> ReceivedAnnotation {
        ReceivedAnnotation {
            labels: vec![("step".into(), "42".into()), ("phase".into(), "bwd".into())],
            scope,
            time,
            provenance: Peer {
                uid: 1000,
                gid: 100,
                pid: Some(4321),
            },
            received_ns: 77,
        }
    }

    #[test]
    fn instant_json_shape() {
        let a = sample(
            AnnotationTime::Instant {
                ts_ns: 10,
                realtime_ns: 1_700_000_000_000_000_000,
                stamped_by_agent: false,
            },
            Some(Scope {
                pid: 1234,
                start_time: 555,
            }),
        );
        let v = a.to_json();
        assert_eq!(v["type"], "annotation");
        assert_eq!(v["labels"]["step"], "42");
        assert_eq!(v["labels"]["phase"], "bwd");
        assert_eq!(v["pid"], 1234);
        assert_eq!(v["start_time"], 555);
        assert_eq!(v["ts_ns"], 10);
        assert_eq!(v["ts_realtime_ns"], 1_700_000_000_000_000_000u64);
        assert_eq!(v["ts_source"], "client");
        assert_eq!(
            v["provenance"],
            json!({"uid": 1000, "gid": 100, "pid": 4321})
        );
        assert!(v.get("span_start_ns").is_none());
    }

    #[test]
    fn span_json_shape_and_trace_wide_scope() {
        let a = sample(
            AnnotationTime::Span {
                start_ns: 1,
                end_ns: 2,
                start_realtime_ns: 3,
                end_realtime_ns: 4,
            },
            None,
        );
        let v = a.to_json();
        assert!(v["pid"].is_null());
        assert!(v.get("start_time").is_none());
        assert_eq!(
            (v["span_start_ns"].as_u64(), v["span_end_ns"].as_u64()),
            (Some(1), Some(2))
        );
        assert_eq!(v["span_start_realtime_ns"], 3);
        assert_eq!(v["span_end_realtime_ns"], 4);
        assert!(v.get("ts_ns").is_none());
    }

    /// The agent writes an annotation's `--json` line straight from its record; before, it
    /// went through [`ReceivedAnnotation::to_json`]'s `Value`. With serde_json's
    /// `preserve_order` (which ingero-agent turns on) both give the same bytes: keys in the
    /// order written, and label keys are unique (the parser refuses duplicates), so the map
    /// merges none.
    #[test]
    fn the_direct_line_is_the_value_line_byte_for_byte() {
        let span = sample(
            AnnotationTime::Span {
                start_ns: 5,
                end_ns: 9,
                start_realtime_ns: 1_700_000_000_000_000_005,
                end_realtime_ns: 1_700_000_000_000_000_009,
            },
            Some(Scope {
                pid: 1234,
                start_time: 555,
            }),
        );
        let mut escaped = sample(
            AnnotationTime::Instant {
                ts_ns: u64::MAX,
                realtime_ns: 0,
                stamped_by_agent: true,
            },
            None,
        );
        escaped
            .labels
            .push(("zeta".into(), "\"q\" é\n\u{1}".into()));
        escaped.labels.push(("alpha".into(), String::new()));
        escaped.provenance.pid = None;
        for a in [span, escaped] {
            let mut direct = Vec::new();
            let record = AnnotationRecord::from(a.clone());
            ingero_trace::json::write_line(&mut direct, &Line::Annotation(&record))
                .expect("writing to a Vec");
            let mut via_value = serde_json::to_vec(&a.to_json()).expect("serialising a Value");
            via_value.push(b'\n');
            assert_eq!(
                String::from_utf8(direct).expect("JSON is UTF-8"),
                String::from_utf8(via_value).expect("JSON is UTF-8")
            );
        }
    }

    #[test]
    fn received_span_and_instant_convert() {
        let span = ReceivedAnnotation {
            labels: vec![("request_id".into(), "r1".into())],
            scope: Some(Scope {
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
