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
//!
//! Labels (`read::labels`): each mark also bounds the label records completed in its stretch,
//! and after each restart the writer restates the label states open across it, so a first
//! pass may skip the labels of every stretch but the first ([`FileIndex::label_ranges`] then
//! says where those a window needs are, [`SeekIndex::label_window`] which ones it needs).

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
    /// Earliest start and latest end of the label records completed in the stretch the mark
    /// ends (`None`: none).
    pub labels: Option<(u64, u64)>,
    /// How many label states the writer restated after the mark (`label open` instants);
    /// `None`: a mark that says nothing of its labels (an older writer's).
    pub labels_open: Option<u64>,
    /// The sequence the mark is on: the writer's plain sequence (what a skim decodes).
    pub sequence: u32,
}

/// Which stretches of a file's skipped labels to read (see [`FileIndex::label_ranges`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelStretches {
    /// Those whose labels the marks do not bound: the tail after the last mark of a file
    /// without its `file end` (an agent still writing it, or killed), or everything after the
    /// first restart when a later mark says nothing of its labels.
    Unbounded,
    /// Those whose labels, as their marks bound them, overlap the window.
    Overlapping(TimeRange),
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
    /// The label records' extent of each stretch the marks have ended, in order.
    label_stretches: Vec<Option<(u64, u64)>>,
    /// The file's first restart mark said how many label states it restated: a skim skipping
    /// labels skipped them from that mark on ([`super::TraceReader::skip_labels`]).
    labels_indexed: bool,
    /// A later mark said nothing of its labels: those after the first restart are read
    /// whole.
    labels_unbounded: bool,
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
        if self.stretches.is_empty() && mark.kind == MarkKind::Restart {
            self.labels_indexed = mark.labels_open.is_some();
        } else if mark.labels_open.is_none() {
            self.labels_unbounded = true;
        }
        self.stretches.push(mark.records);
        self.label_stretches.push(mark.labels);
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

    /// The first stretch whose records reach `a`: every record begun before it ends before
    /// `a`. `None`: no record reaches `a`.
    fn first_reaching(&self, a: u64) -> Option<usize> {
        let n = self.restarts.len() + 1;
        (0..n).find(|&i| self.stretch(i).is_some_and(|(_, to)| to >= a))
    }

    /// What a reader of the records overlapping `window` must decode; `None`: the whole file
    /// (no usable marks).
    pub fn plan(&self, window: TimeRange) -> Option<Plan> {
        if self.is_empty() {
            return None;
        }
        let (a, b) = (window.start_ns, window.end_ns);
        let n = self.restarts.len() + 1;
        let Some(first) = self.first_reaching(a) else {
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

impl FileIndex {
    /// Whether a skim skipping labels skipped this file's from its first restart on.
    pub fn labels_skipped(&self) -> bool {
        self.labels_indexed
    }

    /// Earliest start and latest end of the label records the marks bound.
    pub fn labels_extent(&self) -> Option<(u64, u64)> {
        let known = self.label_stretches.iter().flatten();
        known.fold(None, |acc, &(a, b)| {
            Some(acc.map_or((a, b), |(x, y): (u64, u64)| (x.min(a), y.max(b))))
        })
    }

    /// The parts of the file (a restart mark's offset up to a later one's, `None`: the end)
    /// holding the skipped labels of the stretches `which` names, in file order, adjacent
    /// stretches joined. Each starts at a restart mark, after which the writer restated the
    /// label states open across it. Empty when no label was skipped.
    pub fn label_ranges(&self, which: LabelStretches) -> Vec<(u64, Option<u64>)> {
        if !self.labels_indexed {
            return Vec::new();
        }
        if self.labels_unbounded || self.broken {
            return match which {
                LabelStretches::Unbounded => vec![(self.start_of(1), None)],
                LabelStretches::Overlapping(_) => Vec::new(),
            };
        }
        let last = self.restarts.len();
        let mut out: Vec<(u64, Option<u64>)> = Vec::new();
        for i in 1..=last {
            let wanted = match (self.label_stretches.get(i), which) {
                // The tail of a file without its `file end`: not bounded.
                (None, w) => w == LabelStretches::Unbounded,
                (Some(extent), LabelStretches::Overlapping(w)) => {
                    extent.is_some_and(|(a, b)| a <= w.end_ns && b >= w.start_ns)
                }
                (Some(_), LabelStretches::Unbounded) => false,
            };
            if !wanted {
                continue;
            }
            let (from, until) = (self.start_of(i), (i < last).then(|| self.start_of(i + 1)));
            match out.last_mut() {
                Some(prev) if prev.1 == Some(from) => prev.1 = until,
                _ => out.push((from, until)),
            }
        }
        out
    }

    /// A lower bound of the starts of this file's records that overlap `window`, as its
    /// marks bound them (`None`: none can; 0 for a file read whole). Calls and off-CPU
    /// intervals begun before the window are looked up by their start: the labels a window
    /// needs reach back to here.
    pub fn window_start(&self, window: TimeRange) -> Option<u64> {
        if self.is_empty() {
            return Some(0);
        }
        let n = self.restarts.len() + 1;
        let first = self.first_reaching(window.start_ns)?;
        (first..n)
            .filter_map(|i| self.stretch(i).map(|r| r.0))
            .min()
            .map(|from| from.min(window.start_ns))
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

    /// Earliest start and latest end of the label records every file's marks bound.
    pub fn labels_extent(&self) -> Option<(u64, u64)> {
        self.files
            .values()
            .filter_map(FileIndex::labels_extent)
            .reduce(|(a, b), (x, y)| (a.min(x), b.max(y)))
    }

    /// The labels a window needs: those overlapping it, from the earliest start any file's
    /// marks allow for a record overlapping it (see [`FileIndex::window_start`]); a file not
    /// in the index counts as read whole.
    pub fn label_window<'a>(
        &self,
        files: impl IntoIterator<Item = &'a PathBuf>,
        window: TimeRange,
    ) -> TimeRange {
        let start = files
            .into_iter()
            .filter_map(|f| self.get(f).map_or(Some(0), |ix| ix.window_start(window)))
            .min()
            .unwrap_or(window.start_ns);
        TimeRange::new(start.min(window.start_ns), window.end_ns)
    }
}
