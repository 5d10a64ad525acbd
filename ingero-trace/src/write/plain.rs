//! Track events on the plain sequence (annotations, label states, spans, session and
//! statistics): the recorder as the [`LabelSink`] its label state writes through.

use super::error::Result;
use super::labels::{LabelSink, LabelState};
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::proto::{TrackEvent, event_type};
use crate::vocab::EventName;

impl Recorder {
    /// Runs `f` on the label state with the recorder as its sink.
    pub(super) fn with_labels<T>(
        &mut self,
        f: impl FnOnce(&mut LabelState, &mut Recorder) -> Result<T>,
    ) -> Result<T> {
        let mut labels = std::mem::take(&mut self.labels);
        let result = f(&mut labels, self);
        self.labels = labels;
        result
    }
}

impl LabelSink for Recorder {
    fn track(&mut self, key: &TrackKey, hint: Hint<'_>) -> Result<u64> {
        Recorder::track(self, key, hint)
    }

    fn label_key(&mut self, key: &str) -> Option<u64> {
        self.plain.interner.debug_name(key)
    }

    fn event_name(&mut self, name: EventName) -> u64 {
        self.plain.interner.name(name)
    }

    fn instant(&mut self, track: u64, ts: u64, mut te: TrackEvent) -> Result<()> {
        te.r#type = Some(event_type::INSTANT);
        te.track_uuid = Some(track);
        self.emit_event(ts, te)
    }

    /// Both ends written at once (spans: their lane keeps them from overlapping).
    fn slice(&mut self, track: u64, ts: u64, end: u64, mut te: TrackEvent) -> Result<()> {
        te.r#type = Some(event_type::SLICE_BEGIN);
        te.track_uuid = Some(track);
        self.emit_event(ts, te)?;
        self.end_open(track, end.max(ts))
    }

    fn begin_open(&mut self, track: u64, ts: u64, mut te: TrackEvent) -> Result<()> {
        te.r#type = Some(event_type::SLICE_BEGIN);
        te.track_uuid = Some(track);
        self.emit_event(ts, te)
    }

    fn end_open(&mut self, track: u64, ts: u64) -> Result<()> {
        self.emit_event(
            ts,
            TrackEvent {
                r#type: Some(event_type::SLICE_END),
                track_uuid: Some(track),
                ..Default::default()
            },
        )
    }

    fn stream_time(&self) -> u64 {
        self.main.last_ts()
    }
}
