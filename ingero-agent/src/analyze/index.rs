//! The first pass over a recording: its extent on the trace clock, its wall-clock reference,
//! the session description, every label interval ([`LabelIndex`]) and the writer's seek
//! marks ([`SeekIndex`]). Memory grows with the number of annotations, not events; time too,
//! for compressed recordings, whose chunks this pass skips unread (everything it needs is
//! written outside them).
//!
//! The second pass ([`TraceIndex::window_reader`]) reads, with the seek marks, only the part
//! of each file a selected time range needs, so a window costs what it holds. Setting
//! `INGERO_FULL_SCAN=1` (or [`TraceIndex::seek_windows`] to false) makes it read every file
//! whole instead: the same results, at the cost of the whole recording (what the tests and
//! the benchmark compare against).

use std::path::PathBuf;

use anyhow::Result;

use super::clock::TraceClock;
use super::labels::LabelIndex;
use ingero_trace::model::{ReadRecord, SessionRecord};
use ingero_trace::read::seek::SeekIndex;
use ingero_trace::read::{self, TimeRange, TraceReader, empty_record};

/// Set to `1`: the second pass reads every file whole, not only the part a time range needs.
pub const FULL_SCAN_ENV: &str = "INGERO_FULL_SCAN";

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
    /// Whether the second pass inflates on a helper thread (`TraceReader::inflate_ahead`;
    /// default: the reader's).
    pub inflate_ahead: bool,
    /// What the writer's seek marks said of each file.
    pub seek: SeekIndex,
    /// Whether the second pass reads only what a time range needs (default: unless
    /// `INGERO_FULL_SCAN=1`).
    pub seek_windows: bool,
}

impl TraceIndex {
    pub fn build(files: Vec<PathBuf>) -> Result<TraceIndex> {
        let mut labels = LabelIndex::default();
        let mut session = None;
        let (mut start, mut end) = (u64::MAX, 0u64);
        let mut records = 0u64;
        // Only the packets outside the compressed chunks: labels, session, statistics and the
        // clock snapshots the writer puts after every chunk. The chunks (CUDA calls,
        // scheduling) are skipped unopened; older or uncompressed files are read whole.
        let mut reader = TraceReader::from_files(files.clone(), TimeRange::all()).skip_bundles();
        // One slot reused for every record: the scan allocates nothing per event.
        let mut rec = empty_record();
        while reader.next_into(&mut rec)? {
            records += 1;
            match &rec {
                ReadRecord::Session(s) => {
                    if session.is_none() {
                        session = Some(s.clone());
                    }
                    continue;
                }
                ReadRecord::Statistics(_) => continue,
                ReadRecord::LabelState(s) => labels.add_state(s),
                ReadRecord::Annotation(a) => labels.add_span(a),
                ReadRecord::Nvtx(n) => labels.add_nvtx(n),
                _ => {}
            }
            let (a, b) = rec.interval();
            start = start.min(a);
            end = end.max(b);
        }
        labels.seal();
        if let Some((first, last)) = reader.plain_clock_bounds() {
            start = start.min(first);
            end = end.max(last);
        }
        if start > end {
            // No timed records at all: an empty recording.
            start = session.as_ref().map_or(0, |s| s.ts_ns);
            end = start;
        }
        let offset = reader.first_realtime_offset();
        let seek = reader.seek_index();
        let fallback = session.as_ref().and_then(|s| {
            (s.started_realtime_ns != 0)
                .then(|| i128::from(s.started_realtime_ns) - i128::from(s.ts_ns))
        });
        Ok(TraceIndex {
            truncated: reader.truncated_files().to_vec(),
            files,
            clock: TraceClock {
                start_ns: start,
                end_ns: end,
                real_minus_mono: offset.or(fallback),
            },
            labels,
            session,
            records,
            inflate_ahead: read::default_inflate_ahead(),
            seek,
            seek_windows: std::env::var_os(FULL_SCAN_ENV).is_none_or(|v| v != "1"),
        })
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
