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
//! fall between them, so no late slice is open across one. The marks are written by the
//! recorder's plain-sequence events (`plain.rs`) from the state kept here.

/// The seek-mark state of the file being written.
#[derive(Default)]
pub(super) struct SeekMarks {
    /// Earliest start and latest end of the records in the chunks since the last mark.
    pub(super) records: Option<(u64, u64)>,
    /// A late slice's begin is written and its end is not: no restart now.
    pub(super) hold: bool,
    /// The file's `file end` mark is written.
    pub(super) closed: bool,
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
