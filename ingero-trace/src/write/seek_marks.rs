//! Seek marks: what lets a reader decode a window of a long recording without the chunks
//! before it (`read::seek` is the reader's side).
//!
//! The sequences inside chunks already start afresh every `restart_bytes` (incremental state
//! cleared, clock 64 and the fixed vocabulary restated): from such a chunk on, the file decodes
//! without what came before. Before each such chunk the recorder writes a `restart` instant on
//! the `ingero` track (plain sequence, so the first pass reads it without opening a chunk),
//! and at the end of each file a `file end` instant, with:
//!
//! - `records.from_ns` / `records.to_ns`: the earliest start and the latest end of the records
//!   whose first packet (a slice's begin, an instant, a counter sample) went into the chunks
//!   since the previous mark: late records, written after later ones, included at their own
//!   times, and slices still open at their (known) end;
//! - `open.from_ns` (restarts only): the earliest start of the slices still open on the main
//!   sequence, whose ends come after the restart.
//!
//! - `labels.from_ns` / `labels.to_ns`: the earliest start and the latest end of the label
//!   records (annotations, label states, spans, NVTX ranges and marks: the plain sequence's
//!   records that a first pass reads) completed since the previous mark, a state at its end;
//! - `labels.open`: how many `label open` instants follow a restart mark, one per label
//!   state open across it (its track, begin, name and the arguments of its begin), so the
//!   labels from a restart on decode without the packets before it (0 on a `file end`).
//!
//! A reader that wants the records overlapping `[a, b]` starts at the first stretch whose
//! `records.to_ns` reaches `a` (everything begun before ends before `a`) and stops at the
//! first later restart where nothing after begins by `b` and nothing open began by `b`.
//! A late slice's begin and end are written together: the recorder holds a restart that would
//! fall between them, so no late slice is open across one. The marks are written by the
//! recorder's plain-sequence events (`plain.rs`) from the state kept here.

use std::collections::BTreeMap;

use crate::proto::{DebugAnnotation, TrackEvent};

/// At most this many label states are restated at a restart; past it the mark says nothing
/// of its labels (no `labels.open`), and a reader decodes every label from the file's first
/// restart on instead of the window's alone.
pub(super) const MAX_RESTATED_LABELS: usize = 4096;

/// A label state open now, as a restart restates it.
pub(super) struct OpenLabel {
    /// When it began.
    pub(super) ts: u64,
    /// The name of its slice (`step=42`).
    pub(super) name: String,
    /// The arguments of its begin (provenance, `continued`).
    pub(super) args: Vec<DebugAnnotation>,
}

/// The seek-mark state of the file being written.
#[derive(Default)]
pub(super) struct SeekMarks {
    /// Earliest start and latest end of the records in the chunks since the last mark.
    pub(super) records: Option<(u64, u64)>,
    /// Earliest start and latest end of the label records completed since the last mark.
    pub(super) labels: Option<(u64, u64)>,
    /// The label states open now, by track (in track order: the restatement is
    /// deterministic).
    pub(super) open_labels: BTreeMap<u64, OpenLabel>,
    /// A late slice's begin is written and its end is not: no restart now.
    pub(super) hold: bool,
    /// The file's `file end` mark is written.
    pub(super) closed: bool,
}

/// `[ts, end]` joined into `extent`.
#[inline(always)]
fn widen(extent: &mut Option<(u64, u64)>, ts: u64, end: u64) {
    *extent = Some(match *extent {
        Some((a, b)) => (a.min(ts), b.max(end)),
        None => (ts, end),
    });
}

impl SeekMarks {
    /// A record whose first packet just went into the current chunk, over `[ts, end]`.
    #[inline(always)]
    pub(super) fn holds(&mut self, ts: u64, end: u64) {
        widen(&mut self.records, ts, end);
    }

    /// A label record over `[ts, end]` was completed on the plain sequence.
    pub(super) fn label(&mut self, ts: u64, end: u64) {
        widen(&mut self.labels, ts, end);
    }

    /// A label state began on `track`: open until [`Self::label_ended`].
    pub(super) fn label_began(&mut self, track: u64, ts: u64, te: &TrackEvent) {
        let open = OpenLabel {
            ts,
            name: te.name.clone().unwrap_or_default(),
            args: te.debug_annotations.clone(),
        };
        self.open_labels.insert(track, open);
    }

    /// The label state open on `track` ended at `end`: a label record over its interval.
    pub(super) fn label_ended(&mut self, track: u64, end: u64) {
        let ts = self.open_labels.remove(&track).map_or(end, |o| o.ts);
        self.label(ts, end);
    }

    /// A new file: nothing in it yet.
    pub(super) fn new_file(&mut self) {
        *self = SeekMarks::default();
    }
}
