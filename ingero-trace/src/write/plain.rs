//! Track events on the plain sequence (annotations, label states, spans, session and
//! statistics): the recorder as the [`LabelSink`] its label state writes through (which also
//! keeps the labels' part of the seek-mark state); and the seek marks with the label states
//! they restate (`seek_marks.rs`).

use super::error::Result;
use super::labels::{LabelSink, LabelState};
use super::recorder::Recorder;
use super::seek_marks::MAX_RESTATED_LABELS;
use super::tracks::{Hint, TrackKey};
use crate::proto::{DebugAnnotation, TrackEvent, event_type};
use crate::vocab::{EventName, Instant, SeekArg};

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

    /// The `restart` mark, written (plain, so ahead of the chunk) just before the sequences
    /// restart at the head of the next chunk at stream time `base`, and after it a `label
    /// open` instant per label state open across it.
    pub(super) fn mark_restart(&mut self, base: u64) -> Result<()> {
        let open = self.slices.earliest_open();
        let restated = self.marks.open_labels.len();
        let restate = restated <= MAX_RESTATED_LABELS;
        self.write_mark(Instant::Restart, base, open, restate.then_some(restated))?;
        if !restate {
            return Ok(());
        }
        let track = self.track(&TrackKey::Ingero, Hint { pid: 0, comm: "" })?;
        let open = std::mem::take(&mut self.marks.open_labels);
        let mut result = Ok(());
        for (state_track, label) in &open {
            let mut args = Vec::with_capacity(label.args.len() + 3);
            args.push(self.named(SeekArg::LabelTrack.text(), uint(*state_track)));
            args.push(self.named(SeekArg::LabelBeginNs.text(), uint(label.ts)));
            let name = DebugAnnotation {
                string_value: Some(label.name.clone()),
                ..Default::default()
            };
            args.push(self.named(SeekArg::LabelName.text(), name));
            args.extend(label.args.iter().cloned());
            result = self.ingero_instant(track, base, Instant::LabelOpen, args);
            if result.is_err() {
                break;
            }
        }
        self.marks.open_labels = open;
        result
    }

    /// The `file end` mark: once per file, after its last chunk (chunked files only).
    pub(super) fn mark_file_end(&mut self, ts: u64) -> Result<()> {
        if self.marks.closed || !self.chunked() {
            return Ok(());
        }
        self.marks.closed = true;
        self.write_mark(Instant::FileEnd, ts, None, Some(0))
    }

    /// A seek mark: the records and labels since the last one, the earliest start of the
    /// slices open across it, and how many label states follow it restated (`None`: none
    /// are; a reader then cannot start reading labels at it).
    fn write_mark(
        &mut self,
        which: Instant,
        ts: u64,
        open: Option<u64>,
        restated: Option<usize>,
    ) -> Result<()> {
        let track = self.track(&TrackKey::Ingero, Hint { pid: 0, comm: "" })?;
        let records = self.marks.records.take();
        let labels = self.marks.labels.take();
        let values = [
            (SeekArg::RecordsFromNs, records.map(|r| r.0)),
            (SeekArg::RecordsToNs, records.map(|r| r.1)),
            (SeekArg::OpenFromNs, open),
            (SeekArg::LabelsFromNs, labels.map(|r| r.0)),
            (SeekArg::LabelsToNs, labels.map(|r| r.1)),
            (SeekArg::LabelsOpen, restated.map(|n| n as u64)),
        ];
        let mut args = Vec::with_capacity(values.len());
        for (key, value) in values {
            let Some(v) = value else { continue };
            args.push(self.named(key.text(), uint(v)));
        }
        self.ingero_instant(track, ts, which, args)
    }
}

/// An unsigned argument's value.
fn uint(v: u64) -> DebugAnnotation {
    DebugAnnotation {
        uint_value: Some(v),
        ..Default::default()
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
        self.marks.label(ts, ts);
        self.plain_event(event_type::INSTANT, track, ts, te)
    }

    fn begin_open(&mut self, track: u64, ts: u64, te: TrackEvent) -> Result<()> {
        self.marks.label_began(track, ts, &te);
        self.plain_event(event_type::SLICE_BEGIN, track, ts, te)
    }

    fn end_open(&mut self, track: u64, ts: u64) -> Result<()> {
        self.marks.label_ended(track, ts);
        self.plain_event(event_type::SLICE_END, track, ts, TrackEvent::default())
    }

    fn complete(&mut self, track: u64, ts: u64, end: u64, te: TrackEvent) -> Result<()> {
        self.marks.label(ts, end);
        self.plain_event(event_type::SLICE_BEGIN, track, ts, te)?;
        self.plain_event(event_type::SLICE_END, track, end, TrackEvent::default())
    }

    fn stream_time(&self) -> u64 {
        self.main.last_ts()
    }
}
