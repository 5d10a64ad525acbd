//! `read/`: the streaming reader of ingero recordings (the API `explain` and `query` build on).
//!
//! # Interface
//! ```ignore
//! let reader = TraceReader::open(path_or_dir, TimeRange::all())?;   // or TimeRange::new(a, b)
//! for rec in reader {
//!     match rec? {
//!         ReadRecord::Cuda(c) => ..,        // CudaCallRecord: op, args, ret, thread, ts, duration
//!         ReadRecord::OffCpu(o) => ..,      // reason, who ran instead
//!         ReadRecord::Lifecycle(l) => ..,
//!         ReadRecord::Annotation(a) => ..,  // instants and spans exactly as written
//!         ReadRecord::LabelState(s) => ..,  // `step=42` from .. to ..
//!         ReadRecord::Counter(c) | ReadRecord::Session(s) | ReadRecord::Statistics(s) => ..,
//!     }
//! }
//! ```
//! - A directory is read file by file (`*.pftrace`, oldest first by modification time, then
//!   name); each file is self-contained. A directory of several hosts' recordings is split
//!   into one recording per host by [`host_recordings`] (recursively, by the machine each
//!   file's session names).
//! - Files are read in 1 MiB chunks and decoded packet by packet in place: memory is bounded by the open
//!   slices, not the file size. A truncated last packet ends the file quietly
//!   ([`TraceReader::truncated_files`] says which).
//! - `compressed_packets` containers (zlib) are inflated one at a time and their packets
//!   decoded as if they stood in the file in their place; files may mix both. On a machine
//!   with more than one CPU a helper thread inflates the next containers while the current
//!   one is decoded ([`TraceReader::inflate_ahead`]). A container that cannot be inflated or
//!   decoded is lost, not fatal: [`TraceReader::damage`] says where and why, and reading goes
//!   on after it.
//! - Fast scans: [`TraceReader::for_each_record`] runs the decode loop with the caller's closure
//!   inlined; [`TraceReader::next_into`] reuses one record's allocations (`next_comm`)
//!   from call to call; the iterator hands out fresh records. Thread names are shared
//!   (`Arc<str>`) with the reader's track table.
//! - Skim mode ([`TraceReader::skip_bundles`]) skips containers unread (a seek past each) and
//!   yields only the plain packets' records; [`TraceReader::plain_clock_bounds`] then bounds
//!   the recording's time from the plain clock snapshots the writer puts around every
//!   container, and [`TraceReader::seek_index`] is what the writer's seek marks said.
//! - Labels by stretches ([`TraceReader::skip_labels`], [`SkippedLabels`]): a skim may leave
//!   the label packets after each file's first restart mark unread, and read afterwards only
//!   those of the stretches a window needs, each from a restart where the writer restated the
//!   label states open across it.
//! - Windows ([`TraceReader::seek`], [`seek`]): given that index, a reader decodes only the
//!   part of each file that can hold records overlapping a window, and skims the rest (or,
//!   [`TraceReader::events_only`], reads nothing of it but the track descriptors before it):
//!   the records overlapping the window are exactly those a whole read yields, in the same
//!   order. Files without marks are read whole.
//! - Slices come out when they end: records are in end order on the main sequence, and late
//!   records (written after later ones) come where they were written.
//! - The time filter keeps records whose interval overlaps the range; session and statistics
//!   records always pass.

mod ahead;
mod decoder;
mod error;
mod expand;
mod file_decoder;
mod framing;
mod hosts;
mod inflate;
mod labels;
mod open_file;
pub mod seek;

#[cfg(test)]
mod hosts_tests;
#[cfg(test)]
mod labels_tests;
#[cfg(test)]
mod seek_tests;
#[cfg(test)]
mod skim_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
use decoder::Paths;
pub use decoder::{ClocksSeen, empty_record};
pub use error::{FramingError, InflateError, LossReason, PacketError, ReadError};
pub use expand::{ExpandError, ExpandedPackets};
pub use file_decoder::FileDecoder;
pub use framing::{ChunkedPackets, PacketReader};
pub use hosts::{HostRecording, MAX_DEPTH, first_session, host_recordings, natural_cmp};
pub use labels::SkippedLabels;

use std::collections::VecDeque;

use crate::model::{CounterKind, ReadRecord};

/// What the reader's fallible calls return.
pub type Result<T, E = ReadError> = std::result::Result<T, E>;
use std::path::{Path, PathBuf};

use open_file::{HowToRead, OpenFile};
use seek::SeekIndex;

/// A closed time range on the trace clock (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    /// The first nanosecond in the range.
    pub start_ns: u64,
    /// The last nanosecond in the range.
    pub end_ns: u64,
}

impl TimeRange {
    /// The whole clock: every record passes.
    pub fn all() -> TimeRange {
        TimeRange {
            start_ns: 0,
            end_ns: u64::MAX,
        }
    }

    /// `[start_ns, end_ns]`, both ends included.
    pub fn new(start_ns: u64, end_ns: u64) -> TimeRange {
        TimeRange { start_ns, end_ns }
    }

    /// Whether the reader keeps `rec`: its interval overlaps the range, or it is a session or
    /// statistics record (those always pass).
    pub fn admits(&self, rec: &ReadRecord) -> bool {
        if matches!(rec, ReadRecord::Session(_) | ReadRecord::Statistics(_)) {
            return true;
        }
        let (a, b) = rec.interval();
        a <= self.end_ns && b >= self.start_ns
    }
}

/// The files of a recording: one file, or the `*.pftrace` files of a directory, oldest first.
pub fn recording_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let list = |source| ReadError::List {
        path: path.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(path).map_err(list)? {
        let entry = entry.map_err(list)?;
        let p = entry.path();
        if p.extension().is_some_and(|e| e == crate::write::FILE_EXT) {
            let mtime = entry.metadata().and_then(|m| m.modified()).ok();
            files.push((mtime, p));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// A `compressed_packets` container that could not be read: its packets are lost, and so are
/// those after it that needed the incremental state it held (up to the writer's next restart
/// of its sequences, see `RecorderConfig::restart_bytes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The file holding the container.
    pub path: PathBuf,
    /// File offset of the container.
    pub offset: u64,
    /// Why it could not be read.
    pub reason: LossReason,
}

/// Whether readers inflate on a helper thread unless told otherwise: when the machine has
/// more than one CPU.
pub fn default_inflate_ahead() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

/// At most this many [`Damage`] entries are kept (all are counted).
pub const MAX_DAMAGE_KEPT: usize = 100;

/// Streams [`ReadRecord`]s from a file or directory.
pub struct TraceReader {
    files: VecDeque<PathBuf>,
    current: Option<OpenFile>,
    range: TimeRange,
    /// The index and window of [`Self::seek`].
    seek: Option<(SeekIndex, TimeRange)>,
    /// [`Self::events_only`].
    events_only: bool,
    /// What the seek marks of the files already done said.
    marks: SeekIndex,
    /// Files left unopened: nothing in them was wanted.
    files_skipped: u64,
    /// `range` admits every record (checking it per record costs as much as a decode step).
    all_time: bool,
    truncated: Vec<PathBuf>,
    /// Packets of the files already done.
    packets: u64,
    skip_bundles: bool,
    /// Whether each file's containers are inflated ahead on a helper thread.
    inflate_ahead: bool,
    /// Containers skipped in the files already done.
    bundles_skipped: u64,
    /// What the clock snapshots of the files already done said.
    clocks: ClocksSeen,
    /// [`Self::skip_labels`], and the decoders of the files done whose labels were skipped.
    skip_labels: bool,
    skipped_labels: Vec<(u64, PathBuf, FileDecoder)>,
    /// Files taken from `files` so far: the current one is number `taken - 1`.
    taken: u64,
    /// Containers lost (the first [`MAX_DAMAGE_KEPT`] described), and packets skipped after
    /// them in the files already done.
    damage: Vec<Damage>,
    containers_lost: u64,
    packets_skipped: u64,
    /// Containers of the current file already in `damage`.
    noted: u64,
}

impl TraceReader {
    /// A reader of the recording at `path` (a file, or a directory of `*.pftrace` files read
    /// oldest first) yielding the records `range` admits. Fails when the directory cannot
    /// be listed; files are opened as the reader reaches them.
    pub fn open(path: &Path, range: TimeRange) -> Result<TraceReader> {
        Ok(Self::from_files(recording_files(path)?, range))
    }

    /// A reader of exactly these files, in this order (see [`recording_files`]), yielding the
    /// records `range` admits.
    pub fn from_files(files: Vec<PathBuf>, range: TimeRange) -> TraceReader {
        TraceReader {
            files: files.into(),
            current: None,
            range,
            seek: None,
            events_only: false,
            marks: SeekIndex::default(),
            files_skipped: 0,
            all_time: range == TimeRange::all(),
            truncated: Vec::new(),
            packets: 0,
            skip_bundles: false,
            skip_labels: false,
            skipped_labels: Vec::new(),
            taken: 0,
            inflate_ahead: default_inflate_ahead(),
            bundles_skipped: 0,
            clocks: ClocksSeen::default(),
            damage: Vec::new(),
            containers_lost: 0,
            packets_skipped: 0,
            noted: 0,
        }
    }

    /// Skim mode: `compressed_packets` containers are skipped without being inflated or
    /// decoded; every other packet is decoded as usual. The writer keeps what an analysis's
    /// first pass needs (session, statistics, labels, annotations, track descriptors,
    /// counters, clock snapshots) outside its containers, so this reads only that.
    pub fn skip_bundles(mut self) -> Self {
        self.skip_bundles = true;
        self
    }

    /// With [`Self::skip_bundles`]: the label records (annotations, label states, spans, NVTX)
    /// of each file are yielded only up to its first restart mark, when that mark says the
    /// writer restated its label states after each restart (files of older writers are read
    /// whole); the rest are skipped unread, and [`Self::skipped_labels`] reads those a window
    /// needs afterwards. The seek marks bound what was skipped
    /// ([`SeekIndex::labels_extent`]).
    pub fn skip_labels(mut self) -> Self {
        self.skip_labels = true;
        self
    }

    /// Where the last record of a skim ([`Self::skip_bundles`]) was in the recording: its
    /// file's place among the reader's files and the offset of the packet that completed it,
    /// as [`file_order`] orders them.
    pub fn record_place(&self) -> u64 {
        let offset = self
            .current
            .as_ref()
            .map_or(0, |c| c.packets.packet_start());
        file_order(self.taken.saturating_sub(1), offset)
    }

    /// The labels skipped so far ([`Self::skip_labels`]), to be read by the stretches a window
    /// needs; call once the reader is done (a file it is still in is left out).
    pub fn skipped_labels(&mut self) -> SkippedLabels {
        SkippedLabels::new(std::mem::take(&mut self.skipped_labels), &self.marks)
    }

    /// Reads only what can hold records overlapping `window`, by what `index` (a first pass's
    /// [`Self::seek_index`] of the same files) says of each file (see [`seek`]): every record
    /// overlapping `window` (and admitted by the reader's range) comes, in the order a whole
    /// read yields it; records outside `window` may or may not. Files `index` has no marks
    /// for are read whole.
    pub fn seek(mut self, index: SeekIndex, window: TimeRange) -> Self {
        self.seek = Some((index, window));
        self
    }

    /// Only the records of the probe events, which the writer keeps inside its chunks: CUDA
    /// calls, off-CPU intervals, lifecycle instants and device-memory counters. With
    /// [`Self::seek`], the packets outside the chunks are then read only for the track
    /// descriptors before the window's part, and nothing after it.
    pub fn events_only(mut self) -> Self {
        self.events_only = true;
        self
    }

    /// What the seek marks of the files read so far said (to [`Self::seek`] a later reader of
    /// the same files with). A skim ([`Self::skip_bundles`]) reads every mark.
    pub fn seek_index(&self) -> SeekIndex {
        let mut index = self.marks.clone();
        if let Some(cur) = &self.current {
            index.insert(cur.path.clone(), cur.index.clone());
        }
        index
    }

    /// Files left unopened so far because nothing in them was wanted ([`Self::events_only`]
    /// with [`Self::seek`]).
    pub fn files_skipped(&self) -> u64 {
        self.files_skipped
    }

    /// Whether each file's containers are inflated on a helper thread, ahead of the decoding
    /// (default: when the machine has more than one CPU). The records are the same either
    /// way; with the helper a scan takes up to about 40 % less wall time and a little more CPU.
    /// Skim mode inflates nothing and starts no helper.
    pub fn inflate_ahead(mut self, yes: bool) -> Self {
        self.inflate_ahead = yes;
        self
    }

    /// Containers skipped so far (skim mode, and around a window's part with [`Self::seek`]).
    pub fn bundles_skipped(&self) -> u64 {
        self.bundles_skipped + self.current.as_ref().map_or(0, OpenFile::bundles_skipped)
    }

    /// Min and max MONOTONIC timestamp of the clock snapshots read so far outside containers
    /// (in either mode).
    pub fn plain_clock_bounds(&self) -> Option<(u64, u64)> {
        self.clocks_seen().plain_bounds
    }

    /// REALTIME − MONOTONIC (ns) of the first clock snapshot with both clocks, inside or
    /// outside containers, in file order.
    pub fn first_realtime_offset(&self) -> Option<i128> {
        self.clocks_seen().realtime_offset
    }

    fn clocks_seen(&self) -> ClocksSeen {
        let mut c = self.clocks;
        if let Some(cur) = &self.current {
            c.merge(&cur.decoder.clocks());
        }
        c
    }

    /// Containers that could not be read so far, the first [`MAX_DAMAGE_KEPT`] of them.
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// All containers that could not be read so far.
    pub fn containers_lost(&self) -> u64 {
        self.containers_lost
    }

    /// Packets skipped so far because a lost container held the state they needed.
    pub fn packets_skipped(&self) -> u64 {
        self.packets_skipped
            + self
                .current
                .as_ref()
                .map_or(0, |c| c.decoder.packets_skipped())
    }

    /// Logs a warning per lost container (and one for those past [`MAX_DAMAGE_KEPT`]), with
    /// the packets skipped after them: a caller that reads on past damage says so once done.
    pub fn warn_damage(&self) {
        for d in &self.damage {
            tracing::warn!(
                file = %d.path.display(),
                offset = d.offset,
                "a compressed container could not be read ({}); its events are missing",
                d.reason
            );
        }
        let more = self.containers_lost - self.damage.len() as u64;
        if more > 0 {
            tracing::warn!("{more} more compressed containers could not be read");
        }
        let skipped = self.packets_skipped();
        if skipped > 0 {
            tracing::warn!(
                "{skipped} packets after the damage were skipped: they depended on what the \
                 lost containers held (reading resumes at the writer's next restart of its \
                 sequences; files written before ingero restarted them have none)"
            );
        }
    }

    /// Files that ended inside a packet (so far).
    pub fn truncated_files(&self) -> &[PathBuf] {
        &self.truncated
    }

    /// Packets read so far (those inside `compressed_packets` containers, not the
    /// containers).
    pub fn packets(&self) -> u64 {
        self.packets + self.current.as_ref().map_or(0, |c| c.decoder.packets())
    }

    /// The next record into `rec`, reusing its allocations when it holds a record of the same
    /// kind (a scan over millions of CUDA calls then allocates nothing per record). `false`
    /// at the end of the recording, when `rec` holds no meaningful record. An error ends the
    /// stream, as with the iterator.
    pub fn next_into(&mut self, rec: &mut ReadRecord) -> Result<bool> {
        // Most records come straight from the hot loop over the current container.
        if self.all_time {
            if let Some(cur) = self.current.as_mut() {
                if cur.decoder.hot_into(rec) {
                    return Ok(true);
                }
            }
        }
        self.next_slow(rec)
    }

    /// Calls `f` on every record, in the order [`Self::next_into`] yields them, until the end
    /// of the recording or an error. The hot loop over a container runs here with `f` inlined
    /// into it (no call and no state reload per record); the record `f` sees lives in the
    /// reader, its slots reused from record to record.
    pub fn for_each_record(&mut self, mut f: impl FnMut(&ReadRecord)) -> Result<()> {
        if self.all_time {
            // No wrapper to call through on every record.
            return self.each(&mut f);
        }
        // The range is checked here rather than by leaving the hot loop: an analysis's range
        // is the recording's extent, which admits every record but is not `all()`.
        let range = self.range;
        self.each(&mut |r: &ReadRecord| {
            if range.admits(r) {
                f(r);
            }
        })
    }

    /// [`Self::for_each_record`]'s loop, `f` seeing every record (its caller filters).
    #[inline(always)]
    fn each(&mut self, f: &mut impl FnMut(&ReadRecord)) -> Result<()> {
        let mut rec = empty_record();
        loop {
            if let Some(cur) = self.current.as_mut() {
                cur.decoder.hot_each(&mut rec, f);
            }
            // `next_slow` yields only admitted records: checking again changes nothing.
            if !self.next_slow(&mut rec)? {
                return Ok(());
            }
            f(&rec);
        }
    }

    #[inline(never)]
    fn next_slow(&mut self, rec: &mut ReadRecord) -> Result<bool> {
        let r = self.next_inner(rec);
        if r.is_err() {
            // The file's state can no longer be trusted.
            self.files.clear();
            self.current = None;
        }
        r
    }

    fn next_inner(&mut self, rec: &mut ReadRecord) -> Result<bool> {
        loop {
            if self.current.is_none() {
                let Some(path) = self.files.pop_front() else {
                    return Ok(false);
                };
                self.taken += 1;
                match OpenFile::open(path.clone(), self.how_to_read(&path))? {
                    Some(f) => self.current = Some(f),
                    None => {
                        self.files_skipped += 1;
                        continue;
                    }
                }
                self.noted = 0;
            }
            let Some(cur) = self.current.as_mut() else {
                continue;
            };
            // A container lost on the last turn: the framing is still at it.
            if cur.decoder.containers_lost() != self.noted {
                self.noted = cur.decoder.containers_lost();
                note_damage(&mut self.damage, &mut self.containers_lost, cur);
            }
            if cur.decoder.pending_into(rec) {
                if self.wants(rec) {
                    return Ok(true);
                }
                continue;
            }
            let got = cur.next_packet().map_err(|source| ReadError::Framing {
                path: cur.path.clone(),
                source,
            })?;
            let Some(range) = got else {
                self.file_done();
                continue;
            };
            let done = cur
                .decoder
                .packet_into(&cur.packets.buf()[range], rec)
                .map_err(|source| ReadError::Packet {
                    path: cur.path.clone(),
                    offset: cur.packets.packet_start(),
                    source,
                })?;
            if let Some(mark) = cur.decoder.take_mark() {
                cur.index.add(cur.packets.packet_start(), &mark);
            }
            if done && self.wants(rec) {
                return Ok(true);
            }
        }
    }

    /// Whether `rec` is one to yield: in the range, and a probe event if only those are.
    #[inline(always)]
    fn wants(&self, rec: &ReadRecord) -> bool {
        (self.all_time || self.range.admits(rec)) && (!self.events_only || is_probe_event(rec))
    }

    /// How to read `path`: what the seek index says its window needs.
    fn how_to_read(&self, path: &Path) -> HowToRead {
        let file = self
            .seek
            .as_ref()
            .and_then(|(ix, w)| Some((ix.get(path)?, *w)));
        HowToRead {
            skip_bundles: self.skip_bundles,
            inflate_ahead: self.inflate_ahead,
            events_only: self.events_only,
            plan: file.and_then(|(ix, w)| ix.plan(w)),
            plain_sequence: file.and_then(|(ix, _)| ix.plain_sequence()),
            skip_labels: self.skip_labels,
        }
    }

    /// The current file is read: its counts join the totals.
    fn file_done(&mut self) {
        let Some(cur) = self.current.take() else {
            return;
        };
        if cur.packets.truncated() {
            self.truncated.push(cur.path.clone());
        }
        self.packets += cur.decoder.packets();
        self.packets_skipped += cur.decoder.packets_skipped();
        self.bundles_skipped += cur.bundles_skipped();
        self.clocks.merge(&cur.decoder.clocks());
        if cur.index.labels_skipped() {
            let ordinal = self.taken.saturating_sub(1);
            self.skipped_labels
                .push((ordinal, cur.path.clone(), cur.decoder));
        }
        self.marks.insert(cur.path, cur.index);
    }
}

/// A record's place in a recording, for ordering records read in different passes: the
/// place of its file among the recording's (`ordinal`, from 0) and the offset in that file of
/// the packet that completed it (files under 1 TiB).
pub fn file_order(ordinal: u64, offset: u64) -> u64 {
    (ordinal << 40) | (offset & ((1 << 40) - 1))
}

/// The records the writer keeps inside its chunks (see [`TraceReader::events_only`]).
fn is_probe_event(rec: &ReadRecord) -> bool {
    match rec {
        ReadRecord::Cuda(_) | ReadRecord::OffCpu(_) | ReadRecord::Lifecycle(_) => true,
        ReadRecord::Counter(c) => matches!(c.kind, CounterKind::DeviceMemory { .. }),
        _ => false,
    }
}

/// Records the container the current file's decoder just lost, at the packet the framing
/// last returned.
#[cold]
fn note_damage(damage: &mut Vec<Damage>, count: &mut u64, cur: &OpenFile) {
    *count += 1;
    // The decoder sets its last loss whenever it counts one, so there always is one here.
    if let (true, Some(reason)) = (damage.len() < MAX_DAMAGE_KEPT, cur.decoder.last_loss()) {
        damage.push(Damage {
            path: cur.path.clone(),
            offset: cur.packets.packet_start(),
            reason: reason.clone(),
        });
    }
}

impl Iterator for TraceReader {
    type Item = Result<ReadRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut rec = empty_record();
        match self.next_into(&mut rec) {
            Ok(true) => Some(Ok(rec)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
