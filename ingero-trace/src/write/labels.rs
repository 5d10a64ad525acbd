//! Encoding of annotations.
//!
//! - Every annotation is an instant named `annotation` on its scope's `labels` track, with
//!   each label as `labels.<key>`, its provenance (`provenance.uid`, `provenance.pid`,
//!   `provenance.gid`), when the agent received it, its realtime stamps and its scope's start
//!   time: the exact record, for the reader.
//! - An instant also moves label state: per (scope, key) a track whose slices `key=value`
//!   last until the value changes, is cleared (`""`), or the process exits.
//! - A span is a slice `[start, end]` named `k=v, …` on a lane of its scope's spans: lane `n`
//!   is the first one free at the span's start, so overlapping spans stay visible.
//!
//! A label change that arrives late (after later records were written) takes effect at the
//! current stream time on the state track; its `annotation` instant still has its own time.
//!
//! [`LabelState`] writes through a [`LabelSink`] (what it needs of the writer), which the
//! recorder implements: this module does not depend on the recorder.

use std::collections::HashMap;

use super::error::Result;
use super::tap::{EdgeKind, StateEdge};
use super::tracks::{Hint, TrackKey};
use crate::model::AnnotationRecord;
use crate::proto::{DebugAnnotation, TrackEvent};
use crate::vocab;
use crate::vocab::{ArgKey, Category, EventName, Instant};

/// What writing labels needs of the writer: tracks, and track events on the plain sequence.
pub(super) trait LabelSink {
    /// The uuid of a track, describing it first if the file has not yet.
    fn track(&mut self, key: &TrackKey, hint: Hint<'_>) -> Result<u64>;
    /// The iid of a label's debug-annotation key on the plain sequence (`None`: write it
    /// inline).
    fn label_key(&mut self, key: &str) -> Option<u64>;
    /// `value` named `key`: by its iid on the plain sequence, or inline past the interner's
    /// cap.
    fn named(&mut self, key: &str, value: DebugAnnotation) -> DebugAnnotation {
        let (name_iid, name) = match self.label_key(key) {
            Some(iid) => (Some(iid), None),
            None => (None, Some(key.to_owned())),
        };
        DebugAnnotation {
            name_iid,
            name,
            ..value
        }
    }
    /// The iid of a fixed event name on the plain sequence.
    fn event_name(&mut self, name: EventName) -> u64;
    /// An instant at `ts`.
    fn instant(&mut self, track: u64, ts: u64, te: TrackEvent) -> Result<()>;
    /// A label state's slice begun at `ts` and left open.
    fn begin_open(&mut self, track: u64, ts: u64, te: TrackEvent) -> Result<()>;
    /// Ends the open slice of `track` at `ts`.
    fn end_open(&mut self, track: u64, ts: u64) -> Result<()>;
    /// A slice from `ts` to `end`, both ends written at once (spans, NVTX ranges).
    fn complete(&mut self, track: u64, ts: u64, end: u64, te: TrackEvent) -> Result<()>;
    /// The stream's time: where a late label change takes effect.
    fn stream_time(&self) -> u64;
}

struct OpenState {
    value: String,
    track: u64,
    uid: u32,
    pid: Option<u32>,
}

/// Open label states and span lanes, per scope (`None`: trace-wide).
#[derive(Default)]
pub struct LabelState {
    states: HashMap<(Option<u32>, String), OpenState>,
    /// Per scope: the end time of the last span on each lane.
    lanes: HashMap<Option<u32>, Vec<u64>>,
    /// States ended by a rotation, to re-open in the next file.
    carried: Vec<((Option<u32>, String), OpenState)>,
    /// The tap's log of state begins and ends (`tap.rs`); `None`: not kept.
    pub(super) edges: Option<Vec<StateEdge>>,
}

impl LabelState {
    /// Logs a state's begin or end for the tap, when it is on.
    fn log(&mut self, scope: Option<u32>, key: &str, ts_ns: u64, kind: EdgeKind) {
        if let Some(edges) = self.edges.as_mut() {
            edges.push(StateEdge {
                scope,
                key: key.to_owned(),
                ts_ns,
                kind,
            });
        }
    }

    /// The first lane free at `start`, reserving it until `end`.
    fn lane(&mut self, scope: Option<u32>, start: u64, end: u64) -> u32 {
        let lanes = self.lanes.entry(scope).or_default();
        let idx = match lanes.iter().position(|busy_until| *busy_until <= start) {
            Some(i) => i,
            None => {
                lanes.push(0);
                lanes.len() - 1
            }
        };
        lanes[idx] = end;
        idx as u32
    }
}

fn provenance(uid: u32, pid: Option<u32>, out: &mut Vec<DebugAnnotation>) {
    out.push(DebugAnnotation {
        name_iid: Some(ArgKey::ProvenanceUid.iid()),
        uint_value: Some(u64::from(uid)),
        ..Default::default()
    });
    if let Some(pid) = pid {
        out.push(DebugAnnotation {
            name_iid: Some(ArgKey::ProvenancePid.iid()),
            uint_value: Some(u64::from(pid)),
            ..Default::default()
        });
    }
}

/// A label's state set (or cleared, with an empty value) in a scope.
struct StateChange<'a> {
    scope: Option<u32>,
    key: &'a str,
    value: &'a str,
    ts: u64,
    uid: u32,
    pid: Option<u32>,
    /// Re-opened at the start of a rotated file.
    continued: bool,
}

impl LabelState {
    fn label_args(sink: &mut impl LabelSink, a: &AnnotationRecord) -> Vec<DebugAnnotation> {
        let mut args = Vec::with_capacity(a.labels.len() + 8);
        for (k, v) in &a.labels {
            let key = format!("{}{k}", vocab::LABEL_PREFIX);
            let value = DebugAnnotation {
                string_value: Some(v.clone()),
                ..Default::default()
            };
            args.push(sink.named(&key, value));
        }
        provenance(a.provenance_uid, a.provenance_pid, &mut args);
        let uint = |key: ArgKey, v: u64| DebugAnnotation {
            name_iid: Some(key.iid()),
            uint_value: Some(v),
            ..Default::default()
        };
        args.push(uint(ArgKey::ProvenanceGid, u64::from(a.provenance_gid)));
        args.push(uint(ArgKey::ReceivedNs, a.received_ns));
        args.push(uint(ArgKey::RealtimeNs, a.realtime_ns));
        if let Some(end) = a.end_realtime_ns {
            args.push(uint(ArgKey::EndRealtimeNs, end));
        }
        if a.stamped_by_agent {
            args.push(DebugAnnotation {
                name_iid: Some(ArgKey::StampedByAgent.iid()),
                bool_value: Some(true),
                ..Default::default()
            });
        }
        if let Some(s) = a.scope {
            args.push(uint(ArgKey::ScopeStartTime, s.start_time));
        }
        args
    }

    /// Writes an annotation (see the module docs); `late`: it arrived after later records.
    pub(super) fn write_annotation(
        &mut self,
        sink: &mut impl LabelSink,
        a: &AnnotationRecord,
        late: bool,
    ) -> Result<()> {
        let scope = a.scope.map(|s| s.pid);
        let hint = Hint {
            pid: scope.unwrap_or(0),
            comm: "",
        };
        let args = Self::label_args(sink, a);
        if let Some(end) = a.end_ns {
            let lane = self.lane(scope, a.ts_ns, end);
            let track = sink.track(&TrackKey::SpanLane(scope, lane), hint)?;
            let name = a
                .labels
                .iter()
                .map(|(k, v)| vocab::state_name(k, v))
                .collect::<Vec<_>>()
                .join(", ");
            let te = TrackEvent {
                name: Some(name),
                category_iids: vec![Category::Annotation.iid()],
                debug_annotations: args,
                ..Default::default()
            };
            // Both ends are written now: the lane keeps spans from overlapping on a track, so
            // nothing else can begin on it before this end.
            return sink.complete(track, a.ts_ns, end.max(a.ts_ns), te);
        }
        let track = sink.track(&TrackKey::Labels(scope), hint)?;
        let te = TrackEvent {
            name_iid: Some(sink.event_name(EventName::Instant(Instant::Annotation))),
            category_iids: vec![Category::Annotation.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        sink.instant(track, a.ts_ns, te)?;
        let ts = if late { sink.stream_time() } else { a.ts_ns };
        for (key, value) in &a.labels {
            let change = StateChange {
                scope,
                key,
                value,
                ts,
                uid: a.provenance_uid,
                pid: a.provenance_pid,
                continued: false,
            };
            self.set_state(sink, &change)?;
        }
        Ok(())
    }

    fn set_state(&mut self, sink: &mut impl LabelSink, c: &StateChange<'_>) -> Result<()> {
        let map_key = (c.scope, c.key.to_owned());
        if let Some(open) = self.states.get(&map_key) {
            if open.value == c.value {
                return Ok(());
            }
            let track = open.track;
            self.states.remove(&map_key);
            sink.end_open(track, c.ts)?;
            self.log(c.scope, c.key, c.ts, EdgeKind::End);
        }
        if c.value.is_empty() {
            return Ok(());
        }
        let hint = Hint {
            pid: c.scope.unwrap_or(0),
            comm: "",
        };
        let track = sink.track(&TrackKey::State(c.scope, c.key.to_owned()), hint)?;
        let mut args = Vec::with_capacity(3);
        provenance(c.uid, c.pid, &mut args);
        if c.continued {
            args.push(DebugAnnotation {
                name_iid: Some(ArgKey::Continued.iid()),
                bool_value: Some(true),
                ..Default::default()
            });
        }
        let te = TrackEvent {
            name: Some(vocab::state_name(c.key, c.value)),
            category_iids: vec![Category::Annotation.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        sink.begin_open(track, c.ts, te)?;
        let begin = EdgeKind::Begin {
            value: c.value.to_owned(),
            continued: c.continued,
        };
        self.log(c.scope, c.key, c.ts, begin);
        self.states.insert(
            map_key,
            OpenState {
                value: c.value.to_owned(),
                track,
                uid: c.uid,
                pid: c.pid,
            },
        );
        Ok(())
    }

    /// The process exited: its label states end at `ts` and its lanes are forgotten.
    pub(super) fn end_scope(&mut self, sink: &mut impl LabelSink, pid: u32, ts: u64) -> Result<()> {
        let keys: Vec<_> = self
            .states
            .keys()
            .filter(|(s, _)| *s == Some(pid))
            .cloned()
            .collect();
        for k in keys {
            if let Some(open) = self.states.remove(&k) {
                sink.end_open(open.track, ts)?;
                self.log(k.0, &k.1, ts, EdgeKind::End);
            }
        }
        self.lanes.remove(&Some(pid));
        Ok(())
    }

    /// Ends every open state at `ts`; with `carry` they are re-opened by `reopen_states`.
    pub(super) fn close_states(
        &mut self,
        sink: &mut impl LabelSink,
        ts: u64,
        carry: bool,
    ) -> Result<()> {
        let mut all: Vec<_> = self.states.drain().collect();
        // Deterministic output order.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        for ((scope, key), open) in &all {
            sink.end_open(open.track, ts)?;
            self.log(*scope, key, ts, EdgeKind::End);
        }
        if carry {
            self.carried = all;
        }
        Ok(())
    }

    /// Re-opens, at `ts` in a new file, the states the last one ended.
    pub(super) fn reopen_states(&mut self, sink: &mut impl LabelSink, ts: u64) -> Result<()> {
        for ((scope, key), open) in std::mem::take(&mut self.carried) {
            let change = StateChange {
                scope,
                key: &key,
                value: &open.value,
                ts,
                uid: open.uid,
                pid: open.pid,
                continued: true,
            };
            self.set_state(sink, &change)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_reused_once_free() {
        let mut l = LabelState::default();
        assert_eq!(l.lane(None, 0, 10), 0);
        assert_eq!(l.lane(None, 5, 20), 1, "overlaps lane 0");
        assert_eq!(l.lane(None, 10, 12), 0, "lane 0 free at its end");
        assert_eq!(l.lane(Some(1), 5, 6), 0, "scopes are independent");
    }
}
