//! [`OpenFile`]: the file a [`super::TraceReader`] is in: its framing, its decoder, what its
//! seek marks said so far, and, for a reader seeking to a window ([`super::seek`]), whether it
//! is before, inside or after the part of the file the window needs.
//!
//! Before and after that part the framing skips containers with a seek, unread, and the
//! decoder sees only the plain sequence's packets (or, for a reader of the chunks' records
//! alone, only the track descriptors before it and nothing after it). Inside it, every packet
//! is decoded, as in a read of the whole file; the helper thread, if any, inflates from its
//! start to its end.

use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;

use super::ahead::InflateAhead;
use super::error::{FramingError, ReadError};
use super::file_decoder::{FileDecoder, Outside};
use super::framing::ChunkedPackets;
use super::seek::{FileIndex, Plan};

/// How a file is to be read.
#[derive(Clone, Copy, Debug)]
pub(super) struct HowToRead {
    /// Skim mode: every container skipped, whatever the plan.
    pub skip_bundles: bool,
    pub inflate_ahead: bool,
    /// Only the chunks' records are wanted.
    pub events_only: bool,
    /// The part a window needs (`None`: the whole file).
    pub plan: Option<Plan>,
    /// The writer's plain sequence, from the file's seek marks.
    pub plain_sequence: Option<u32>,
    /// Label packets are skipped from the file's first restart on (see
    /// [`FileDecoder::skip_labels`]).
    pub skip_labels: bool,
}

/// Where a read of the file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Every packet in order; `skim`: containers skipped.
    Whole { skim: bool },
    /// Skimming up to offset `from`, where the window's part starts.
    Before { from: u64, until: Option<u64> },
    /// Decoding every packet up to offset `until` (`None`: the end).
    Inside { until: Option<u64> },
    /// Past the window's part: skimming to the end.
    After,
    /// Nothing more to read.
    Done,
}

pub(super) struct OpenFile {
    pub path: PathBuf,
    pub packets: ChunkedPackets<File>,
    pub decoder: FileDecoder,
    /// What the file's seek marks said so far.
    pub index: FileIndex,
    phase: Phase,
    /// The decoder's [`Outside`] before and after the window's part, and inside it.
    skim: Outside,
    inside: Outside,
    inflate_ahead: bool,
    events_only: bool,
}

impl OpenFile {
    /// Opens `path` to be read as `how` says; `None` when nothing in it is wanted (only the
    /// chunks' records, and none of them overlaps the window).
    pub fn open(path: PathBuf, how: HowToRead) -> Result<Option<OpenFile>, ReadError> {
        let seeking = how.plan.filter(|_| !how.skip_bundles);
        if how.events_only && seeking == Some(Plan::Nothing) {
            return Ok(None);
        }
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(source) => return Err(ReadError::Open { path, source }),
        };
        let mut decoder = FileDecoder::new();
        decoder.skip_bundles(how.skip_bundles);
        decoder.skip_labels(how.skip_labels);
        let plain_sequence = how.plain_sequence.unwrap_or(0);
        let only = |plain, others| Outside::Only {
            plain_sequence,
            plain,
            others,
        };
        let (skim, inside) = if how.events_only {
            (only(false, false), only(false, true))
        } else {
            (only(true, false), Outside::All)
        };
        let phase = match seeking {
            None => Phase::Whole {
                skim: how.skip_bundles,
            },
            Some(Plan::Nothing) => Phase::After,
            Some(Plan::Range { from, until }) => Phase::Before { from, until },
        };
        let mut f = OpenFile {
            path,
            packets: ChunkedPackets::new(file),
            decoder,
            index: FileIndex::default(),
            phase,
            skim,
            inside,
            inflate_ahead: how.inflate_ahead && !how.skip_bundles,
            events_only: how.events_only,
        };
        match phase {
            Phase::Whole { skim: false } if f.inflate_ahead => f.start_helper(0, None),
            Phase::Before { .. } | Phase::After => f.decoder.set_outside(skim),
            _ => {}
        }
        Ok(Some(f))
    }

    /// The next packet to decode, as a range of `self.packets.buf()`; `None` at the end of
    /// what is read of the file.
    pub fn next_packet(&mut self) -> Result<Option<Range<usize>>, FramingError> {
        loop {
            let at = self.packets.offset();
            match self.phase {
                Phase::Whole { skim: false } => return self.packets.next_range(),
                Phase::Whole { skim: true } | Phase::After => {
                    return self.packets.next_plain_range(u64::MAX);
                }
                Phase::Before { from, until } if at >= from => self.enter(until),
                Phase::Before { from, .. } => return self.packets.next_plain_range(from),
                Phase::Inside { until: Some(u) } if at >= u => self.leave(),
                Phase::Inside { .. } => return self.packets.next_range(),
                Phase::Done => return Ok(None),
            }
        }
    }

    /// The window's part starts here: every packet is decoded up to `until`.
    fn enter(&mut self, until: Option<u64>) {
        self.phase = Phase::Inside { until };
        self.decoder.set_outside(self.inside);
        if self.inflate_ahead {
            self.start_helper(self.packets.offset(), until);
        }
    }

    /// Past the window's part: a skim to the end, or nothing more for a reader of the chunks'
    /// records alone (nothing after it overlaps the window).
    fn leave(&mut self) {
        self.decoder.leave_chunks();
        if self.events_only {
            self.phase = Phase::Done;
            return;
        }
        self.phase = Phase::After;
        self.decoder.set_outside(self.skim);
    }

    /// A helper inflating the containers from offset `from` to `until`.
    fn start_helper(&mut self, from: u64, until: Option<u64>) {
        match InflateAhead::spawn_at(&self.path, from, until) {
            Ok(ahead) => self.decoder.inflate_ahead(ahead),
            // Inflating in this thread instead is only slower.
            Err(e) => tracing::debug!("no helper thread to inflate {}: {e}", self.path.display()),
        }
    }

    /// Containers skipped so far (unread by the framing, or unopened by the decoder).
    pub fn bundles_skipped(&self) -> u64 {
        self.packets.containers_skipped() + self.decoder.bundles_skipped()
    }
}
