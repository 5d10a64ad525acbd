//! The first pass over a recording: its extent on the trace clock, its wall-clock reference,
//! the session description, the label intervals ([`LabelIndex`]), the drops it counted
//! ([`LossLog`]), the writer's seek marks ([`SeekIndex`]) and the NVIDIA driver's Xid reports
//! ([`XidLog`]). Memory grows with the number of annotations, not events; time too, for
//! compressed recordings, whose chunks this pass skips unread (everything it needs is written
//! outside them).
//!
//! With a time window ([`FirstPass`]), the pass reads the labels in two steps, so a window of
//! a long recording costs what it holds here too: first everything but the labels after each
//! file's first restart (their extent comes from the seek marks), which places the window;
//! then only the labels of the stretches that window needs ([`ingero_trace::read::SkippedLabels`]),
//! and the index keeps those overlapping it, from as far before it as the report looks
//! ([`LabelReach`]: a call begun before the window is labelled by its start, so are a request
//! `--events` lists and an allocation `--memory` shows). A whole recording's labels are read
//! in one pass, as before.
//!
//! The second pass ([`TraceIndex::window_reader`]) reads, with the seek marks, only the part
//! of each file a selected time range needs. Setting `INGERO_FULL_SCAN=1` (or
//! [`TraceIndex::seek_windows`] to false) makes both passes read every file whole instead:
//! the same results, at the cost of the whole recording (what the tests and the benchmark
//! compare against).

use std::path::PathBuf;

use anyhow::Result;

use super::clock::TraceClock;
use super::labels::LabelIndex;
use super::losses::LossLog;
use super::selection::LabelReach;
use super::xids::XidLog;
use ingero_trace::model::{ReadRecord, SessionRecord};
use ingero_trace::read::seek::{LabelStretches, SeekIndex};
use ingero_trace::read::{self, SkippedLabels, TimeRange, TraceReader, empty_record};

/// Set to `1`: the passes read every file whole, not only the part a time range needs.
pub const FULL_SCAN_ENV: &str = "INGERO_FULL_SCAN";

/// Whether reads seek to what a time range needs (unless `INGERO_FULL_SCAN=1`).
pub fn seek_from_env() -> bool {
    std::env::var_os(FULL_SCAN_ENV).is_none_or(|v| v != "1")
}

/// What the first pass learnt.
pub struct TraceIndex {
    pub files: Vec<PathBuf>,
    pub clock: TraceClock,
    pub labels: LabelIndex,
    pub session: Option<SessionRecord>,
    /// Records read in this pass.
    pub records: u64,
    /// Files that ended inside a packet (a killed agent).
    pub truncated: Vec<PathBuf>,
    /// The drops the recording counted, and where.
    pub losses: LossLog,
    /// Whether the second pass inflates on a helper thread (`TraceReader::inflate_ahead`;
    /// default: the reader's).
    pub inflate_ahead: bool,
    /// What the writer's seek marks said of each file.
    pub seek: SeekIndex,
    /// Whether the second pass reads only what a time range needs (default: unless
    /// `INGERO_FULL_SCAN=1`).
    pub seek_windows: bool,
    /// The NVIDIA driver's Xid reports (GPU faults).
    pub xids: XidLog,
}

/// The first pass before its labels are complete: the extent, the wall clock and the session
/// (what places a time window), the labels read so far, and those left for
/// [`Self::finish`].
pub struct FirstPass {
    files: Vec<PathBuf>,
    /// The extent and wall clock (what places a window).
    pub clock: TraceClock,
    session: Option<SessionRecord>,
    records: u64,
    truncated: Vec<PathBuf>,
    losses: LossLog,
    seek: SeekIndex,
    labels: LabelIndex,
    /// The labels skipped (with `skip_labels`).
    skipped: Option<SkippedLabels>,
    xids: XidLog,
}

impl FirstPass {
    /// Reads `files` for their extent, wall clock, session, seek marks and labels; with
    /// `skip_labels`, the labels after each file's first restart are left for
    /// [`Self::finish`] to read for a window (the seek marks bound them, so the extent is
    /// the same).
    pub fn read(files: Vec<PathBuf>, skip_labels: bool) -> Result<FirstPass> {
        let mut labels = LabelIndex::default();
        let mut session = None;
        let mut extent = Extent::default();
        let mut records = 0u64;
        let mut losses = LossLog::default();
        let mut xids = XidLog::default();
        // Only the packets outside the compressed chunks: labels, session, statistics and the
        // clock snapshots the writer puts after every chunk. The chunks (CUDA calls,
        // scheduling) are skipped unopened; older or uncompressed files are read whole.
        let mut reader = TraceReader::from_files(files.clone(), TimeRange::all()).skip_bundles();
        if skip_labels {
            reader = reader.skip_labels();
        }
        // One slot reused for every record: the scan allocates nothing per event.
        let mut rec = empty_record();
        while reader.next_into(&mut rec)? {
            records += 1;
            losses.add(&rec);
            match &rec {
                ReadRecord::Session(s) => {
                    if session.is_none() {
                        session = Some(s.clone());
                    }
                    continue;
                }
                ReadRecord::Driver(d) => xids.add(d),
                _ => {}
            }
            labels.add_at(&rec, reader.record_place());
            extent.add(&rec);
        }
        let mut skipped = skip_labels.then(|| reader.skipped_labels());
        if let Some(s) = skipped.as_mut() {
            // The tails the marks do not bound (a file still being written): read now, so the
            // extent is complete before it places a window.
            s.read(LabelStretches::Unbounded, |r, place| {
                records += 1;
                labels.add_at(r, place);
                extent.add(r);
            })?;
        }
        let seek = reader.seek_index();
        for (a, b) in seek
            .labels_extent()
            .into_iter()
            .chain(reader.plain_clock_bounds())
        {
            extent.widen(a, b);
        }
        let offset = reader.first_realtime_offset();
        let (start, end) = extent.get().unwrap_or_else(|| {
            // No timed records at all: an empty recording.
            let t = session.as_ref().map_or(0, |s| s.ts_ns);
            (t, t)
        });
        losses.seal(end);
        let fallback = session.as_ref().and_then(|s| {
            (s.started_realtime_ns != 0)
                .then(|| i128::from(s.started_realtime_ns) - i128::from(s.ts_ns))
        });
        Ok(FirstPass {
            truncated: reader.truncated_files().to_vec(),
            losses,
            files,
            clock: TraceClock {
                start_ns: start,
                end_ns: end,
                real_minus_mono: offset.or(fallback),
            },
            session,
            records,
            seek,
            labels,
            skipped: skipped.filter(|s| !s.is_empty()),
            xids,
        })
    }

    /// Files that ended inside a packet (a killed agent).
    pub fn truncated(&self) -> &[PathBuf] {
        &self.truncated
    }

    /// The index, with the labels a window needs (those overlapping it, from as far before
    /// it as `reach` says: see the module docs); `None`: every label, unrestricted.
    pub fn finish(self, window: Option<(TimeRange, LabelReach)>) -> Result<TraceIndex> {
        let FirstPass {
            files,
            clock,
            session,
            mut records,
            truncated,
            losses,
            seek,
            mut labels,
            mut skipped,
            xids,
        } = self;
        let needed = match window {
            Some((w, reach)) => Some(needed_labels(
                &files,
                &seek,
                &labels,
                skipped.as_mut(),
                w,
                reach,
            )?),
            None => None,
        };
        if let Some(mut skipped) = skipped {
            let which = LabelStretches::Overlapping(needed.unwrap_or(TimeRange::all()));
            skipped.read(which, |r, place| {
                records += 1;
                labels.add_at(r, place);
            })?;
        }
        let labels = match needed {
            Some(w) => labels.restricted_to(w.start_ns, w.end_ns),
            None => {
                labels.seal();
                labels
            }
        };
        Ok(TraceIndex {
            truncated,
            losses,
            files,
            clock,
            labels,
            session,
            records,
            inflate_ahead: read::default_inflate_ahead(),
            seek,
            seek_windows: seek_from_env(),
            xids,
        })
    }
}

/// The time whose labels a window `w` needs: `w`, from the earliest start of a call or
/// interval that overlaps it as the seek marks bound them; with [`LabelReach::Listed`], also
/// of a label record overlapping it (a request or an NVTX range `--events` lists is labelled
/// by its start); with [`LabelReach::Start`], from the recording's start.
fn needed_labels(
    files: &[PathBuf],
    seek: &SeekIndex,
    labels: &LabelIndex,
    skipped: Option<&mut SkippedLabels>,
    w: TimeRange,
    reach: LabelReach,
) -> Result<TimeRange> {
    let mut start = match reach {
        LabelReach::Start => 0,
        LabelReach::Window | LabelReach::Listed => seek.label_window(files, w).start_ns,
    };
    if reach == LabelReach::Listed {
        if let Some(s) = labels.earliest_overlapping(w.start_ns, w.end_ns) {
            start = start.min(s);
        }
        if let Some(skipped) = skipped {
            skipped.read(LabelStretches::Overlapping(w), |r, _| {
                if w.admits(r) {
                    start = start.min(r.interval().0);
                }
            })?;
        }
    }
    Ok(TimeRange::new(start, w.end_ns))
}

/// The earliest start and the latest end of the timed records seen.
#[derive(Default)]
struct Extent(Option<(u64, u64)>);

impl Extent {
    fn add(&mut self, rec: &ReadRecord) {
        if matches!(rec, ReadRecord::Session(_) | ReadRecord::Statistics(_)) {
            return;
        }
        let (a, b) = rec.interval();
        self.widen(a, b);
    }

    fn widen(&mut self, a: u64, b: u64) {
        self.0 = Some(self.0.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
    }

    fn get(&self) -> Option<(u64, u64)> {
        self.0
    }
}

impl TraceIndex {
    /// The first pass over the whole recording, every label read.
    pub fn build(files: Vec<PathBuf>) -> Result<TraceIndex> {
        FirstPass::read(files, false)?.finish(None)
    }

    /// A reader of the indexed files over `range`, for a second pass, reading them whole.
    pub fn reader(&self, range: TimeRange) -> TraceReader {
        TraceReader::from_files(self.files.clone(), range).inflate_ahead(self.inflate_ahead)
    }

    /// A reader of the indexed files over `range`, for a second pass that looks at the
    /// records overlapping `window` alone: it reads only the part of each file that can hold
    /// them (unless [`Self::seek_windows`] is off), and yields them as a whole read would.
    pub fn window_reader(&self, range: TimeRange, window: TimeRange) -> TraceReader {
        let reader = self.reader(range);
        if self.seek_windows {
            reader.seek(self.seek.clone(), window)
        } else {
            reader
        }
    }
}
