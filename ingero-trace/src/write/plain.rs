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

    /// Writes `te` as an event of type `ty` on `track` at `ts`: the one place where the
    /// plain sequence's instants, slice begins, slice ends and counter samples get their
    /// type and track.
    pub(super) fn plain_event(
        &mut self,
        ty: i32,
        track: u64,
        ts: u64,
        mut te: TrackEvent,
    ) -> Result<()> {
        te.r#type = Some(ty);
        te.track_uuid = Some(track);
        self.emit_event(ts, te)
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

    fn instant(&mut self, track: u64, ts: u64, te: TrackEvent) -> Result<()> {
        self.plain_event(event_type::INSTANT, track, ts, te)
    }

    fn begin_open(&mut self, track: u64, ts: u64, te: TrackEvent) -> Result<()> {
        self.plain_event(event_type::SLICE_BEGIN, track, ts, te)
    }

    fn end_open(&mut self, track: u64, ts: u64) -> Result<()> {
        self.plain_event(event_type::SLICE_END, track, ts, TrackEvent::default())
    }

    fn stream_time(&self) -> u64 {
        self.main.last_ts()
    }
}
