//! Encoding of annotations.
//!
//! - Every annotation is an instant named `annotation` on its scope's `labels` track, with
//!   each label as `labels.<key>`, its provenance (`provenance.uid`, `provenance.pid`) and its
//!   scope's start time: the exact record, for the reader.
//! - An instant also moves label state: per (scope, key) a track whose slices `key=value`
//!   last until the value changes, is cleared (`""`), or the process exits.
//! - A span is a slice `[start, end]` named `k=v, …` on a lane of its scope's spans: lane `n`
//!   is the first one free at the span's start, so overlapping spans stay visible.
//!
//! A label change that arrives late (after later records were written) takes effect at the
//! current stream time on the state track; its `annotation` instant still has its own time.

use std::collections::HashMap;

use super::error::Result;
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::model::AnnotationRecord;
use crate::proto::{DebugAnnotation, TrackEvent};
use crate::vocab;
use crate::vocab::{ArgKey, Category, EventName, Instant};

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
}

impl LabelState {
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

impl Recorder {
    fn label_args(&mut self, a: &AnnotationRecord) -> Vec<DebugAnnotation> {
        let mut args = Vec::with_capacity(a.labels.len() + 8);
        for (k, v) in &a.labels {
            let key = format!("{}{k}", vocab::LABEL_PREFIX);
            let (name_iid, name) = match self.plain.interner.debug_name(&key) {
                Some(iid) => (Some(iid), None),
                None => (None, Some(key)),
            };
            args.push(DebugAnnotation {
                name_iid,
                name,
                string_value: Some(v.clone()),
                ..Default::default()
            });
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
            args.push(DebugAnnotation {
                name_iid: Some(ArgKey::ScopeStartTime.iid()),
                uint_value: Some(s.start_time),
                ..Default::default()
            });
        }
        args
    }

    pub(super) fn write_annotation(&mut self, a: &AnnotationRecord, late: bool) -> Result<()> {
        let scope = a.scope.map(|s| s.pid);
        let hint = Hint {
            pid: scope.unwrap_or(0),
            comm: "",
        };
        let args = self.label_args(a);
        if let Some(end) = a.end_ns {
            let lane = self.labels.lane(scope, a.ts_ns, end);
            let track = self.track(&TrackKey::SpanLane(scope, lane), hint)?;
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
            return self.plain_slice(track, a.ts_ns, end, te);
        }
        let track = self.track(&TrackKey::Labels(scope), hint)?;
        let te = TrackEvent {
            name_iid: Some(
                self.plain
                    .interner
                    .name(EventName::Instant(Instant::Annotation)),
            ),
            category_iids: vec![Category::Annotation.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        self.instant(track, a.ts_ns, te)?;
        let at = if late { self.main.last_ts() } else { a.ts_ns };
        for (k, v) in &a.labels {
            self.set_state(scope, k, v, at, a.provenance_uid, a.provenance_pid, false)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn set_state(
        &mut self,
        scope: Option<u32>,
        key: &str,
        value: &str,
        ts: u64,
        uid: u32,
        pid: Option<u32>,
        continued: bool,
    ) -> Result<()> {
        let map_key = (scope, key.to_owned());
        if let Some(open) = self.labels.states.get(&map_key) {
            if open.value == value {
                return Ok(());
            }
            let track = open.track;
            self.labels.states.remove(&map_key);
            self.end_open(track, ts)?;
        }
        if value.is_empty() {
            return Ok(());
        }
        let hint = Hint {
            pid: scope.unwrap_or(0),
            comm: "",
        };
        let track = self.track(&TrackKey::State(scope, key.to_owned()), hint)?;
        let mut args = Vec::with_capacity(3);
        provenance(uid, pid, &mut args);
        if continued {
            args.push(DebugAnnotation {
                name_iid: Some(ArgKey::Continued.iid()),
                bool_value: Some(true),
                ..Default::default()
            });
        }
        let te = TrackEvent {
            name: Some(vocab::state_name(key, value)),
            category_iids: vec![Category::Annotation.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        self.begin_open(track, ts, te)?;
        self.labels.states.insert(
            map_key,
            OpenState {
                value: value.to_owned(),
                track,
                uid,
                pid,
            },
        );
        Ok(())
    }

    /// The process exited: its label states end at `ts` and its lanes are forgotten.
    pub(super) fn end_scope(&mut self, pid: u32, ts: u64) -> Result<()> {
        let keys: Vec<_> = self
            .labels
            .states
            .keys()
            .filter(|(s, _)| *s == Some(pid))
            .cloned()
            .collect();
        for k in keys {
            if let Some(open) = self.labels.states.remove(&k) {
                self.end_open(open.track, ts)?;
            }
        }
        self.labels.lanes.remove(&Some(pid));
        Ok(())
    }

    /// Ends every open state at `ts`; with `carry` they are re-opened by `reopen_states`.
    pub(super) fn close_states(&mut self, ts: u64, carry: bool) -> Result<()> {
        let mut all: Vec<_> = self.labels.states.drain().collect();
        // Deterministic output order.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, open) in &all {
            self.end_open(open.track, ts)?;
        }
        if carry {
            self.labels.carried = all;
        }
        Ok(())
    }

    pub(super) fn reopen_states(&mut self, ts: u64) -> Result<()> {
        for ((scope, key), open) in std::mem::take(&mut self.labels.carried) {
            self.set_state(scope, &key, &open.value, ts, open.uid, open.pid, true)?;
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
