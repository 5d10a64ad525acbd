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
//! A reader that wants the records overlapping `[a, b]` starts at the first stretch whose
//! `records.to_ns` reaches `a` (everything begun before ends before `a`) and stops at the
//! first later restart where nothing after begins by `b` and nothing open began by `b`.
//! A late slice's begin and end are written together: the recorder holds a restart that would
//! fall between them, so no late slice is open across one.

use super::error::Result;
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::proto::DebugAnnotation;
use crate::vocab::{Instant, SeekArg};

/// The seek-mark state of the file being written.
#[derive(Default)]
pub(super) struct SeekMarks {
    /// Earliest start and latest end of the records in the chunks since the last mark.
    records: Option<(u64, u64)>,
    /// A late slice's begin is written and its end is not: no restart now.
    pub(super) hold: bool,
    /// The file's `file end` mark is written.
    closed: bool,
}

impl SeekMarks {
    /// A record whose first packet just went into the current chunk, over `[ts, end]`.
    #[inline(always)]
    pub(super) fn holds(&mut self, ts: u64, end: u64) {
        self.records = Some(match self.records {
            Some((a, b)) => (a.min(ts), b.max(end)),
            None => (ts, end),
        });
    }

    /// A new file: nothing in it yet.
    pub(super) fn new_file(&mut self) {
        *self = SeekMarks::default();
    }
}

impl Recorder {
    /// The `restart` mark, written (plain, so ahead of the chunk) just before the sequences
    /// restart at the head of the next chunk at stream time `base`.
    pub(super) fn mark_restart(&mut self, base: u64) -> Result<()> {
        let open = self.slices.earliest_open();
        self.write_mark(Instant::Restart, base, open)
    }

    /// The `file end` mark: once per file, after its last chunk (chunked files only).
    pub(super) fn mark_file_end(&mut self, ts: u64) -> Result<()> {
        if self.marks.closed || !self.chunked() {
            return Ok(());
        }
        self.marks.closed = true;
        self.write_mark(Instant::FileEnd, ts, None)
    }

    fn write_mark(&mut self, which: Instant, ts: u64, open: Option<u64>) -> Result<()> {
        let track = self.track(&TrackKey::Ingero, Hint { pid: 0, comm: "" })?;
        let records = self.marks.records.take();
        let values = [
            (SeekArg::RecordsFromNs, records.map(|r| r.0)),
            (SeekArg::RecordsToNs, records.map(|r| r.1)),
            (SeekArg::OpenFromNs, open),
        ];
        let mut args = Vec::with_capacity(values.len());
        for (key, value) in values {
            let Some(v) = value else { continue };
            let (name_iid, name) = match self.plain.interner.debug_name(key.text()) {
                Some(iid) => (Some(iid), None),
                None => (None, Some(key.text().to_owned())),
            };
            args.push(DebugAnnotation {
                name_iid,
                name,
                uint_value: Some(v),
                ..Default::default()
            });
        }
        self.ingero_instant(track, ts, which, args)
    }
}
