//! Seeking to a time window: the index a first pass collects from the writer's seek marks
//! (`write/seek_marks.rs`), and the part of each file a window needs.
//!
//! A chunked file is a series of stretches of chunks, each starting where the sequences
//! inside chunks start afresh (the first at the file's start). Before each restart the
//! writer puts a `restart` mark on the plain sequence, and at the end of the file a
//! `file end` mark; each says the earliest start and the latest end of the records begun in
//! the stretch it ends, and a restart also the earliest start of the slices still open
//! across it. A skim reads them without opening a chunk: [`FileIndex`] is what they say, with
//! the file offset of each restart mark, [`SeekIndex`] the same for every file of a recording.
//!
//! For a window `[a, b]` ([`FileIndex::plan`]) a reader decodes from the restart mark of the
//! first stretch whose records reach `a` (every record begun earlier ends before `a`) up to
//! the first later restart from which no record begins by `b` and at which no slice begun by
//! `b` is still open. Before and after that part it only skims (plain packets, chunks skipped
//! unopened), or reads nothing at all where the caller wants the chunks' records alone. The
//! records overlapping the window are then exactly those of a full read, in the same order.
//!
//! A file without marks (written before them, or uncompressed: no restarts) has no plan and is
//! read whole, as is the stretch after the last mark of a file cut short (an agent killed).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::TimeRange;

/// Which seek mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// Before a restart of the sequences inside chunks: a reader may start at it.
    Restart,
    /// After the last chunk of a file.
    FileEnd,
}

/// What one seek mark says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// A restart or the end of the file.
    pub kind: MarkKind,
    /// Its time: the stream's when the sequences restarted (or the file ended).
    pub ts_ns: u64,
    /// Earliest start and latest end of the records begun in the stretch the mark ends
    /// (`None`: no record).
    pub records: Option<(u64, u64)>,
    /// At a restart: the earliest start of the slices open across it (`None`: none).
    pub open_from: Option<u64>,
    /// The sequence the mark is on: the writer's plain sequence (what a skim decodes).
    pub sequence: u32,
}

/// The part of a file a window needs decoded in full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// No record of the file overlaps the window.
    Nothing,
    /// Decode the packets from file offset `from` up to `until`.
    Range {
        /// A packet's start (a restart mark's, or 0).
        from: u64,
        /// A later packet's start (a restart mark's); `None`: the end of the file.
        until: Option<u64>,
    },
}

/// What a file's seek marks said, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileIndex {
    /// Each restart mark's file offset and the earliest start of the slices open across it.
    restarts: Vec<(u64, Option<u64>)>,
    /// Each restart mark's time.
    times: Vec<u64>,
    /// The records' extent of each stretch the marks have ended, in order.
    stretches: Vec<Option<(u64, u64)>>,
    /// The `file end` mark was read: the last stretch is known too.
    closed: bool,
    /// The sequence of the marks: the plain sequence, outside the chunks.
    sequence: Option<u32>,
    /// A mark out of place (after the `file end`, or not after the previous one): the file is
    /// read whole.
    broken: bool,
}

impl FileIndex {
    /// Adds the mark read at file offset `offset`.
    pub fn add(&mut self, offset: u64, mark: &Mark) {
        let after_last = self.restarts.last().is_none_or(|(o, _)| offset > *o);
        let same_sequence = self.sequence.is_none_or(|s| s == mark.sequence);
        if self.closed || !after_last || !same_sequence {
            self.broken = true;
            return;
        }
        self.sequence = Some(mark.sequence);
        self.stretches.push(mark.records);
        match mark.kind {
            MarkKind::Restart => {
                self.restarts.push((offset, mark.open_from));
                self.times.push(mark.ts_ns);
            }
            MarkKind::FileEnd => self.closed = true,
        }
    }

    /// Whether the file had no marks to use (an older or uncompressed file): it is read whole.
    pub fn is_empty(&self) -> bool {
        self.broken || self.stretches.is_empty()
    }

    /// The writer's plain sequence (that of its marks), once one was read.
    pub fn plain_sequence(&self) -> Option<u32> {
        self.sequence
    }

    /// Restart marks read.
    pub fn restarts(&self) -> usize {
        self.restarts.len()
    }

    /// The stream's time at each restart, in file order.
    pub fn restart_times(&self) -> &[u64] {
        &self.times
    }

    /// The records' extent of stretch `i`: what its mark said, or anything at all for the
    /// last one of a file without its `file end` mark.
    fn stretch(&self, i: usize) -> Option<(u64, u64)> {
        match self.stretches.get(i) {
            Some(r) => *r,
            None => Some((0, u64::MAX)),
        }
    }

    /// File offset where stretch `i` starts (its restart mark; the file's start for the first).
    fn start_of(&self, i: usize) -> u64 {
        i.checked_sub(1)
            .and_then(|r| self.restarts.get(r))
            .map_or(0, |(offset, _)| *offset)
    }

    /// What a reader of the records overlapping `window` must decode; `None`: the whole file
    /// (no usable marks).
    pub fn plan(&self, window: TimeRange) -> Option<Plan> {
        if self.is_empty() {
            return None;
        }
        let (a, b) = (window.start_ns, window.end_ns);
        let n = self.restarts.len() + 1;
        // Every record begun before the first stretch reaching `a` ends before `a`.
        let Some(first) = (0..n).find(|&i| self.stretch(i).is_some_and(|(_, to)| to >= a)) else {
            return Some(Plan::Nothing);
        };
        // The earliest start of the records begun from each stretch on.
        let mut from_on = vec![u64::MAX; n + 1];
        for i in (0..n).rev() {
            from_on[i] = from_on[i + 1].min(self.stretch(i).map_or(u64::MAX, |r| r.0));
        }
        // The first later restart from which nothing begins by `b` and across which nothing
        // begun by `b` is open (the stretch `first` itself: nothing overlaps the window).
        let open_after = |k: usize| {
            k == first
                || k.checked_sub(1)
                    .and_then(|r| self.restarts.get(r))
                    .is_none_or(|(_, open)| open.is_none_or(|o| o > b))
        };
        let stop = from_on
            .iter()
            .enumerate()
            .take(n)
            .skip(first)
            .find(|&(k, &from)| from > b && open_after(k))
            .map(|(k, _)| k);
        let from = self.start_of(first);
        Some(match stop {
            Some(k) if k == first => Plan::Nothing,
            Some(k) => Plan::Range {
                from,
                until: Some(self.start_of(k)),
            },
            None => Plan::Range { from, until: None },
        })
    }
}

/// The [`FileIndex`] of each file of a recording, by path (from a first pass:
/// [`super::TraceReader::seek_index`]).
#[derive(Clone, Debug, Default)]
pub struct SeekIndex {
    files: HashMap<PathBuf, FileIndex>,
}

impl SeekIndex {
    /// Records what `file`'s marks said.
    pub fn insert(&mut self, file: PathBuf, index: FileIndex) {
        self.files.insert(file, index);
    }

    /// What `file`'s marks said, if it was indexed.
    pub fn get(&self, file: &Path) -> Option<&FileIndex> {
        self.files.get(file)
    }

    /// Restart marks across every file.
    pub fn restarts(&self) -> usize {
        self.files.values().map(FileIndex::restarts).sum()
    }
}
