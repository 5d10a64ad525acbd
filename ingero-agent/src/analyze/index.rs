//! The first pass over a recording: its extent on the trace clock, its wall-clock reference,
//! the session description and every label interval ([`LabelIndex`]). Memory grows with the
//! number of annotations, not events; time too, for compressed recordings, whose chunks this
//! pass skips (everything it needs is written outside them).

use std::path::PathBuf;

use anyhow::Result;

use super::clock::TraceClock;
use super::labels::LabelIndex;
use ingero_trace::model::{ReadRecord, SessionRecord};
use ingero_trace::read::{self, TimeRange, TraceReader, empty_record};

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
        })
    }

    /// A reader of the indexed files over `range`, for a second pass.
    pub fn reader(&self, range: TimeRange) -> TraceReader {
        TraceReader::from_files(self.files.clone(), range).inflate_ahead(self.inflate_ahead)
    }
}
