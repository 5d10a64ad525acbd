//! [`Recorder`]: the streaming Perfetto writer. It owns the current file, the three packet
//! sequences, the track registry and the slices still open, and turns each
//! [`TimelineRecord`] into packets (the per-kind encoding lives in `events.rs` and
//! `labels.rs`).
//!
//! Ordering: records should come in timestamp order (from the merger). A slice's end is held
//! (`slices.rs`) and written when the stream reaches its time, so the main sequence stays
//! monotonic. A record earlier than what was already written goes to the late sequence with
//! absolute timestamps, never dropped.
//!
//! Packets of the main and late sequences go into the chunk writer (`chunk.rs`), which
//! compresses and writes them. The frequent ones (CUDA calls, off-CPU intervals, slice ends,
//! counters) are encoded straight into its buffer (`encode.rs`, [`Recorder::event_open`] /
//! [`Recorder::event_close`]); the rest are built as `TracePacket`s ([`Recorder::emit`]).
//!
//! Everything a first pass over the file needs goes to the plain sequence instead, written to
//! the file at once and never compressed ([`Recorder::emit_plain`]): track descriptors, the
//! session and statistics, annotations and label states, the events/s and drops counters, and
//! a clock snapshot at the start of the file and after every chunk (its MONOTONIC reading is
//! the newest main-sequence time written so far). `ingero query`/`explain` learn the labels
//! and the extent of a recording from these alone, skipping the chunks.

use std::path::{Path, PathBuf};

use super::chunk::ChunkWriter;
use super::clocks::ClockOffsets;
use super::config::{CLOCK_SNAPSHOT_INTERVAL_NS, RESTART_INTERVAL_NS, RecorderConfig};
use super::encode::{self, EventTail, Head, MachineIdField};
use super::error::Result;
use super::files::{self, Naming, Owner, TraceFile};
use super::identity;
use super::labels::LabelState;
use super::seek_marks::SeekMarks;
use super::sequence::{LATE_SEQUENCE, MAIN_SEQUENCE, PLAIN_SEQUENCE, Sequence};
use super::slices::{Begun, DueEnd, OpenSlices, Placement};
use super::tracks::{Hint, TrackKey, Tracks};
use crate::clock::{monotonic_now_ns, realtime_now_ns};
use crate::fast_map::FastMap;
use crate::host::machine_id;
use crate::model::FinalStats;
use crate::model::TimelineRecord;
use crate::proto::{
    DebugAnnotation, SEQ_NEEDS_INCREMENTAL_STATE, TracePacket, TrackDescriptor, TrackEvent,
    event_type,
};
use crate::vocab::{Category, EventName, Instant};

/// `TracePacket.interned_data`.
const INTERNED_DATA: u32 = 12;
const SEC: u64 = 1_000_000_000;

/// What the recorder counted (written into the final statistics as `recorder.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderCounters {
    /// Records written ([`Recorder::write`] calls).
    pub records: u64,
    /// Records earlier than what was already written: put on the late sequence.
    pub late: u64,
    /// Slices shortened to stay nested on their track.
    pub clamped: u64,
    /// Files opened: the first one and one per rotation.
    pub files: u64,
    /// Bytes of the files closed so far (of every file, after [`Recorder::finish`]).
    pub bytes: u64,
    /// Files retention deleted to keep the total under `max_total_size`.
    pub deleted_files: u64,
}

/// The second the events-per-second counter is counting.
#[derive(Clone, Copy)]
struct EpsWindow {
    /// End of the second (ns, a multiple of `SEC`).
    end: u64,
    count: u64,
}

/// An open track-event packet: where its lengths go, and its sequence.
#[derive(Clone, Copy)]
pub(super) struct OpenEvent {
    head: Head,
    late: bool,
}

enum Retention {
    Dir(PathBuf),
    Own,
}

/// The streaming writer. See the module docs of `record` for the interface.
pub struct Recorder {
    pub(super) cfg: RecorderConfig,
    naming: Naming,
    retention: Retention,
    owner: Option<Owner>,
    out: ChunkWriter,
    files: Vec<PathBuf>,
    pub(super) main: Sequence,
    pub(super) late: Sequence,
    /// Written outside the chunks (see the module docs).
    pub(super) plain: Sequence,
    /// Chunks written when the last plain clock snapshot was.
    chunks_seen: u64,
    /// Chunk bytes written and main-sequence time when the sequences last started afresh.
    restarted_at: (u64, u64),
    /// Newest timestamp written on the plain sequence.
    plain_last_ts: u64,
    pub(super) tracks: Tracks,
    offsets: ClockOffsets,
    pub(super) machine_id: u32,
    /// `machine_id` as appended to every packet (empty when not stamped).
    mid: MachineIdField,
    pub(super) started_realtime_ns: u64,
    last_snapshot_ts: u64,
    pub(super) slices: OpenSlices,
    /// What the next seek mark says (`seek_marks.rs`).
    pub(super) marks: SeekMarks,
    pub(super) labels: LabelState,
    /// Per process, the end time of the last NVTX start/end range on each lane.
    pub(super) nvtx_lanes: FastMap<u32, Vec<u64>>,
    /// Device memory per process, from successful allocations and frees of known size.
    pub(super) device_memory: FastMap<u32, i64>,
    eps: Option<EpsWindow>,
    pub(super) counters: RecorderCounters,
    descs: Vec<TrackDescriptor>,
    /// See `tap.rs`: `Some` once enabled.
    pub(super) tap: Option<super::tap::Tap>,
    /// REALTIME − MONOTONIC of the first file's first clock snapshot.
    pub(super) first_real_minus_mono: Option<i128>,
}

impl Recorder {
    /// Opens the first file (the directory is created, and under sudo given to the invoking
    /// user) and applies retention. Nothing is written until the first record or `finish`.
    pub fn create(cfg: RecorderConfig) -> Result<Recorder> {
        Self::create_with(cfg, true)
    }

    /// As [`Recorder::create`]; `read_proc: false` names processes from events only (tests and
    /// synthetic traces whose pids are not real).
    pub fn create_with(cfg: RecorderConfig, read_proc: bool) -> Result<Recorder> {
        let (naming, retention, owner) = match (&cfg.path, &cfg.dir) {
            (Some(path), _) => {
                let owner = if cfg.chown_to_sudo_user {
                    files::invoking_user_home()?.1
                } else {
                    None
                };
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    files::create_dir_owned(parent, owner)?;
                }
                (
                    Naming::Fixed {
                        base: path.clone(),
                        next: 0,
                    },
                    Retention::Own,
                    owner,
                )
            }
            (None, dir) => {
                let (home, owner) = files::invoking_user_home()?;
                let owner = if cfg.chown_to_sudo_user { owner } else { None };
                let dir = dir
                    .clone()
                    .unwrap_or_else(|| home.join(".ingero").join("traces"));
                files::create_dir_owned(&dir, owner)?;
                (Naming::Dir(dir.clone()), Retention::Dir(dir), owner)
            }
        };
        let mid = cfg.machine_id.unwrap_or_else(machine_id);
        let mut r = Recorder {
            naming,
            retention,
            owner,
            out: ChunkWriter::new(cfg.compression_level)?,
            files: Vec::new(),
            main: Sequence::new(MAIN_SEQUENCE, true),
            late: Sequence::new(LATE_SEQUENCE, false),
            plain: Sequence::new(PLAIN_SEQUENCE, false),
            chunks_seen: 0,
            restarted_at: (0, 0),
            plain_last_ts: 0,
            tracks: Tracks::new(read_proc),
            offsets: ClockOffsets::measure(),
            machine_id: mid,
            mid: MachineIdField::new(cfg.stamp_machine_id.then_some(mid)),
            started_realtime_ns: realtime_now_ns(),
            last_snapshot_ts: 0,
            slices: OpenSlices::default(),
            marks: SeekMarks::default(),
            labels: LabelState::default(),
            nvtx_lanes: FastMap::default(),
            device_memory: FastMap::default(),
            eps: None,
            counters: RecorderCounters::default(),
            descs: Vec::new(),
            tap: None,
            first_real_minus_mono: None,
            cfg,
        };
        r.open_next_file()?;
        Ok(r)
    }

    /// The file being written.
    pub fn current_path(&self) -> &Path {
        self.out.path().unwrap_or(Path::new(""))
    }

    /// What the recorder counted so far.
    pub fn counters(&self) -> RecorderCounters {
        self.counters
    }

    /// Writes one record (in timestamp order, as the merger releases them).
    pub fn write(&mut self, rec: &TimelineRecord) -> Result<()> {
        let ts = rec.ts_ns();
        if !self.main.started() {
            self.start_main(ts)?;
        }
        let late = ts < self.main.last_ts();
        if late {
            self.counters.late += 1;
        } else {
            self.advance_to(ts)?;
        }
        self.counters.records += 1;
        match rec {
            TimelineRecord::Event(e) => self.write_event(e, late)?,
            TimelineRecord::Annotation(a) => {
                self.with_labels(|l, r| l.write_annotation(r, a, late))?;
                self.label_process(a)?;
            }
            TimelineRecord::Nvtx(n) => self.write_nvtx(n)?,
            TimelineRecord::Driver(d) => self.write_driver(d)?,
        }
        if self.out.size() >= self.cfg.max_file_size {
            self.rotate()?;
        }
        self.after_chunks()
    }

    /// The total number of dropped events so far, as a counter sample at `ts_ns`.
    pub fn record_drops(&mut self, ts_ns: u64, total: u64) -> Result<()> {
        self.start_main(ts_ns)?;
        let late = ts_ns < self.main.last_ts();
        if !late {
            self.advance_to(ts_ns)?;
        }
        let track = self.track(&TrackKey::Drops, Hint { pid: 0, comm: "" })?;
        self.plain_counter(track, ts_ns, i64::try_from(total).unwrap_or(i64::MAX))?;
        self.after_chunks()
    }

    /// Writes the pending chunk and hands everything to the kernel (call at least once a
    /// second: a SIGKILL loses what was written since the last flush).
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush_chunk()?;
        self.after_chunks()?;
        self.out.flush()
    }

    /// Ends every open slice, writes the final statistics, closes the file and returns the
    /// files of this session that still exist (retention may have deleted early ones).
    pub fn finish(mut self, stats: &FinalStats) -> Result<Vec<PathBuf>> {
        let now = monotonic_now_ns();
        self.start_main(now)?;
        self.close_all_slices(false)?;
        // The last chunk (and its clock snapshot) first: the statistics end the file.
        self.out.flush_chunk()?;
        self.after_chunks()?;
        let ts = self.stream_end();
        self.mark_file_end(ts)?;
        self.write_statistics(ts, stats)?;
        self.close_file()?;
        Ok(self.files.iter().filter(|p| p.exists()).cloned().collect())
    }

    // ---- files ---------------------------------------------------------------------------

    fn open_next_file(&mut self) -> Result<()> {
        let path = self.naming.next_path();
        let file = TraceFile::create(&path, self.owner)?;
        self.files.push(path.clone());
        self.counters.files += 1;
        self.out.open(file);
        self.main.reset();
        self.late.reset();
        self.plain.reset();
        self.tracks.new_file();
        self.slices.clear();
        self.marks.new_file();
        let candidates = match &self.retention {
            Retention::Dir(dir) => files::trace_files_in(dir)?,
            Retention::Own => self.files.clone(),
        };
        let deleted = files::enforce_retention(&candidates, &path, self.cfg.max_total_size)?;
        self.counters.deleted_files += deleted.len() as u64;
        Ok(())
    }

    /// Closes the current file at the current time and continues in a new one: pending
    /// slice ends are written into the old file, open label states are ended there and
    /// re-opened (flagged `continued`) in the new one.
    fn rotate(&mut self) -> Result<()> {
        self.close_all_slices(true)?;
        self.close_file()?;
        self.open_next_file()?;
        let ts = self.stream_end();
        self.start_main(ts)?;
        self.with_labels(|l, r| l.reopen_states(r, ts))
    }

    /// Writes every pending slice end and ends open label states (kept for re-opening when
    /// `keep_states`).
    pub(super) fn close_all_slices(&mut self, keep_states: bool) -> Result<()> {
        while let Some(due) = self.slices.pop() {
            self.slice_end(due)?;
        }
        self.slices.clear();
        let ts = self.stream_end();
        self.with_labels(|l, r| l.close_states(r, ts, keep_states))
    }

    /// Writes the last chunk and its clock snapshot, and closes the file.
    fn close_file(&mut self) -> Result<()> {
        self.out.flush_chunk()?;
        self.after_chunks()?;
        self.mark_file_end(self.stream_end())?;
        if let Some((_, bytes)) = self.out.close()? {
            self.counters.bytes += bytes;
        }
        Ok(())
    }

    // ---- sequences and packets -----------------------------------------------------------

    /// Writes the main sequence's first packet in this file (clock snapshot, defaults, fixed
    /// vocabulary) and the session packet, if not done yet. `base_ts` becomes clock 64's
    /// starting value on the first file.
    pub(super) fn start_main(&mut self, base_ts: u64) -> Result<()> {
        if self.main.started() {
            return Ok(());
        }
        let base = if self.counters.files > 1 || self.main.last_ts() > 0 {
            self.main.last_ts()
        } else {
            base_ts
        };
        self.offsets = ClockOffsets::measure();
        self.first_real_minus_mono
            .get_or_insert(self.offsets.real_minus_mono);
        // The plain sequence opens the file, with the clocks at the base time: a first pass
        // that skips the chunks still learns where the recording starts.
        let mut first_plain = TracePacket {
            clock_snapshot: Some(self.offsets.snapshot(base, false)),
            ..Default::default()
        };
        self.plain.stamp_first(&mut first_plain, 0);
        first_plain.machine_id = self.machine_id_field();
        self.encode_plain(&first_plain)?;
        let info = TracePacket {
            system_info: Some(identity::system_info(&self.cfg.session)),
            ..Default::default()
        };
        self.emit_plain(None, info)?;
        self.chunks_seen = self.out.chunks_written();
        self.last_snapshot_ts = base;
        self.main_first_packet(base)?;
        self.write_session(base)
    }

    /// The main sequence's first packet, in the file or after a restart: clock 64 stated at
    /// `base` with the other clocks, defaults, the fixed vocabulary.
    fn main_first_packet(&mut self, base: u64) -> Result<()> {
        let mut pkt = TracePacket {
            clock_snapshot: Some(self.offsets.snapshot(base, true)),
            ..Default::default()
        };
        self.main.stamp_first(&mut pkt, base);
        pkt.machine_id = self.machine_id_field();
        self.restarted_at = (self.out.chunk_bytes(), base);
        self.encode(&pkt)
    }

    /// Starts the sequences inside chunks (main and late) afresh at the head of a chunk every
    /// `restart_bytes` of chunks or [`RESTART_INTERVAL_NS`] of trace time, so that the chunks from
    /// there on decode without what came before: a reader that finds a chunk damaged loses
    /// the packets up to the next restart and resumes there, instead of losing the rest of
    /// the file to interned names and clock deltas it never saw. Not every chunk: a restart
    /// declares the whole fixed vocabulary again (about 2 KiB compressed).
    #[inline(always)]
    fn chunk_sequences(&mut self) -> Result<()> {
        if !self.out.at_chunk_head() {
            return Ok(());
        }
        self.restart_chunk_sequences()
    }

    /// At the head of a chunk: the main sequence's incremental state cleared, its clock
    /// re-stated at its current value and the fixed vocabulary declared again, if a restart
    /// is due; the late sequence then restarts at its next packet.
    #[cold]
    #[inline(never)]
    fn restart_chunk_sequences(&mut self) -> Result<()> {
        let (bytes, ts) = self.restarted_at;
        let base = self.main.last_ts();
        let due = self.out.chunk_bytes() - bytes >= self.cfg.restart_bytes
            || base.saturating_sub(ts) >= RESTART_INTERVAL_NS;
        if !due || !self.out.compressed() || !self.main.started() || self.marks.hold {
            return Ok(());
        }
        self.mark_restart(base)?;
        self.late.restart();
        self.main.restart();
        self.slices.restarted();
        self.main_first_packet(base)
    }

    /// After chunks were written: a plain clock snapshot at the newest main-sequence time, so
    /// a first pass that skips chunks knows how far the recording reaches.
    fn after_chunks(&mut self) -> Result<()> {
        let written = self.out.chunks_written();
        if written == self.chunks_seen || !self.plain.started() {
            return Ok(());
        }
        self.chunks_seen = written;
        let pkt = TracePacket {
            clock_snapshot: Some(self.offsets.snapshot(self.stream_end(), false)),
            ..Default::default()
        };
        self.emit_plain(None, pkt)
    }

    fn start_late(&mut self) -> Result<()> {
        if self.late.started() {
            return Ok(());
        }
        let mut pkt = TracePacket::default();
        self.late.stamp_first(&mut pkt, 0);
        pkt.machine_id = self.machine_id_field();
        self.encode(&pkt)
    }

    /// Whether packets go into compressed chunks (any level but 0).
    pub(super) fn chunked(&self) -> bool {
        self.out.compressed()
    }

    fn machine_id_field(&self) -> Option<u32> {
        self.cfg.stamp_machine_id.then_some(self.machine_id)
    }

    fn encode(&mut self, pkt: &TracePacket) -> Result<()> {
        let buf = self.out.buf();
        let start = buf.len();
        crate::proto::encode::framed(pkt, buf);
        self.out.packet_done(start)
    }

    /// Encodes `pkt` and writes it to the file at once, outside any chunk.
    fn encode_plain(&mut self, pkt: &TracePacket) -> Result<()> {
        let buf = self.out.buf();
        let start = buf.len();
        crate::proto::encode::framed(pkt, buf);
        self.out.write_plain(start)
    }

    /// Stamps `pkt` on the plain sequence and writes it outside any chunk.
    pub(super) fn emit_plain(&mut self, ts: Option<u64>, mut pkt: TracePacket) -> Result<()> {
        if !self.plain.started() {
            let mut first = TracePacket::default();
            self.plain.stamp_first(&mut first, 0);
            first.machine_id = self.machine_id_field();
            self.encode_plain(&first)?;
        }
        if let Some(ts) = ts {
            self.plain_last_ts = self.plain_last_ts.max(ts);
        }
        self.plain.stamp(&mut pkt, ts);
        pkt.machine_id = self.machine_id_field();
        self.encode_plain(&pkt)
    }

    /// The newest time written on the main or the plain sequence: where open label states
    /// end when the recording (or a file) does.
    pub(super) fn stream_end(&self) -> u64 {
        self.main.last_ts().max(self.plain_last_ts)
    }

    /// Starts a track-event packet at `ts` on the main (`late == false`) or late sequence;
    /// the caller appends categories and debug annotations to `self.out.buf()`, then calls
    /// [`Recorder::event_close`].
    #[inline(always)]
    pub(super) fn event_open(&mut self, late: bool, ts: u64) -> Result<OpenEvent> {
        self.chunk_sequences()?;
        if late && !self.late.started() {
            self.start_late()?;
        }
        let seq = if late { &mut self.late } else { &mut self.main };
        let ts = seq.timestamp_field(ts);
        let head = encode::event_head(self.out.buf(), ts, seq.id());
        Ok(OpenEvent { head, late })
    }

    /// Ends a packet begun by [`Recorder::event_open`]: the track event's type, name, track
    /// and counter value, definitions interned meanwhile, flags and machine id.
    #[inline(always)]
    pub(super) fn event_close(&mut self, e: OpenEvent, tail: &EventTail) -> Result<()> {
        let seq = if e.late {
            &mut self.late
        } else {
            &mut self.main
        };
        let buf = self.out.buf();
        encode::track_event_tail(buf, e.head, tail);
        if seq.interner.has_pending() {
            seq.interner.encode_pending(INTERNED_DATA, buf);
        }
        encode::packet_tail(buf, e.head, SEQ_NEEDS_INCREMENTAL_STATE, &self.mid);
        // The frame's key is the byte before its length placeholder.
        self.out.packet_done(e.head.frame - 1)
    }

    /// The debug-annotation buffer of an open event and the interning table of its sequence.
    #[inline(always)]
    pub(super) fn event_args(&mut self, e: &OpenEvent) -> (&mut Vec<u8>, &mut Sequence) {
        let seq = if e.late {
            &mut self.late
        } else {
            &mut self.main
        };
        (self.out.buf(), seq)
    }

    /// Stamps and writes a packet on the main (`late == false`) or late sequence.
    pub(super) fn emit(
        &mut self,
        late: bool,
        ts: Option<u64>,
        mut pkt: TracePacket,
    ) -> Result<TracePacket> {
        self.chunk_sequences()?;
        if late {
            self.start_late()?;
            self.late.stamp(&mut pkt, ts);
        } else {
            self.main.stamp(&mut pkt, ts);
        }
        pkt.machine_id = self.machine_id_field();
        self.encode(&pkt)?;
        Ok(pkt)
    }

    /// Writes a track event built as a struct on the plain sequence (the rare kinds:
    /// annotations, label states, session, statistics, the per-second counters).
    pub(super) fn emit_event(&mut self, ts: u64, te: TrackEvent) -> Result<()> {
        let pkt = TracePacket {
            track_event: Some(te),
            ..Default::default()
        };
        self.emit_plain(Some(ts), pkt)
    }

    /// The uuid of a track, describing it (and its parents) first if this file has not yet.
    pub(super) fn track(&mut self, key: &TrackKey, hint: Hint<'_>) -> Result<u64> {
        let uuid = self.tracks.ensure(key, hint, &mut self.descs);
        if !self.descs.is_empty() {
            // A track described again (renamed thread, exec) is named anew from here on: the
            // records waiting in the chunk go to the file before its descriptor does.
            if self.tracks.take_redescribed() {
                self.out.flush_chunk()?;
            }
            let descs = std::mem::take(&mut self.descs);
            for d in &descs {
                let pkt = TracePacket {
                    track_descriptor: Some(d.clone()),
                    ..Default::default()
                };
                // Plain, so a descriptor is in the file before any chunk that uses it.
                self.emit_plain(None, pkt)?;
            }
            self.descs = descs;
            self.descs.clear();
        }
        Ok(uuid)
    }

    // ---- time ----------------------------------------------------------------------------

    /// Moves the main sequence to `ts`: writes slice ends due by then, the events-per-second
    /// counter for completed seconds, and a clock snapshot every 10 s.
    #[inline(always)]
    fn advance_to(&mut self, ts: u64) -> Result<()> {
        while let Some(due) = self.slices.pop_due(ts) {
            self.slice_end(due)?;
        }
        match &mut self.eps {
            // The stream only moves forward here, so `ts` is past the window's start.
            Some(w) if ts < w.end => w.count += 1,
            _ => self.next_second(ts)?,
        }
        if ts.saturating_sub(self.last_snapshot_ts) >= CLOCK_SNAPSHOT_INTERVAL_NS {
            self.snapshot(ts)?;
        }
        Ok(())
    }

    /// Restates clock 64 at its current value (so the snapshot is right whether or not a
    /// reader resets its delta base on snapshots) with fresh clock offsets.
    #[cold]
    fn snapshot(&mut self, ts: u64) -> Result<()> {
        let at = self.main.last_ts();
        self.offsets = ClockOffsets::measure();
        let pkt = TracePacket {
            clock_snapshot: Some(self.offsets.snapshot(at, true)),
            ..Default::default()
        };
        self.emit(false, None, pkt)?;
        self.last_snapshot_ts = ts;
        Ok(())
    }

    /// `ts` is in a later second than the one counted: writes the completed second's count
    /// and starts counting `ts`'s.
    #[cold]
    fn next_second(&mut self, ts: u64) -> Result<()> {
        let start = ts - ts % SEC;
        if let Some(w) = self.eps {
            let track = self.track(&TrackKey::EventsPerSecond, Hint { pid: 0, comm: "" })?;
            self.plain_counter(track, w.end, i64::try_from(w.count).unwrap_or(i64::MAX))?;
            if start > w.end {
                // An idle gap: the rate drops to zero rather than ramping across it.
                self.plain_counter(track, w.end + SEC, 0)?;
            }
        }
        self.eps = Some(EpsWindow {
            end: start + SEC,
            count: 1,
        });
        Ok(())
    }

    // ---- slices --------------------------------------------------------------------------

    /// Queues the end of `[ts, end]` on `track` (main sequence), counting a clamped slice.
    #[inline(always)]
    pub(super) fn open_slice(&mut self, track: u64, ts: u64, end: u64, at: Placement) -> Begun {
        let begun = self.slices.begin(track, ts, end, at);
        if begun.clamped_from_ns.is_some() {
            self.counters.clamped += 1;
        }
        begun
    }

    /// Writes the end of a slice on the main sequence (the stream has reached it).
    #[inline(always)]
    fn slice_end(&mut self, due: DueEnd) -> Result<()> {
        self.end_packet(false, due.track, due.end, due.state)
    }

    /// The end of a late slice, written right after its begin on the late sequence.
    pub(super) fn late_slice_end(&mut self, track: u64, end: u64, at: Placement) -> Result<()> {
        let state = self.slices.state_now(track, at);
        self.end_packet(true, track, end, state)
    }

    /// A slice-end packet: in one piece unless definitions are waiting to be written or it
    /// states where its thread ran.
    #[inline(always)]
    fn end_packet(
        &mut self,
        late: bool,
        track: u64,
        end: u64,
        state: Option<Placement>,
    ) -> Result<()> {
        self.chunk_sequences()?;
        let seq = if late { &mut self.late } else { &mut self.main };
        if state.is_some() || !seq.started() || seq.interner.has_pending() {
            let e = self.event_open(late, end)?;
            if let Some(at) = state {
                encode::placement(self.out.buf(), at);
            }
            return self.event_close(e, &EventTail::end(track));
        }
        let ts = seq.timestamp_field(end);
        let buf = self.out.buf();
        let start = buf.len();
        let flags = SEQ_NEEDS_INCREMENTAL_STATE;
        encode::slice_end(buf, ts, seq.id(), track, flags, &self.mid);
        self.out.packet_done(start)
    }

    /// A counter sample on the plain sequence (events/s, drops).
    fn plain_counter(&mut self, track: u64, ts: u64, value: i64) -> Result<()> {
        let te = TrackEvent {
            counter_value: Some(value),
            ..Default::default()
        };
        self.plain_event(event_type::COUNTER, track, ts, te)
    }

    pub(super) fn counter(&mut self, late: bool, track: u64, ts: u64, value: i64) -> Result<()> {
        let e = self.event_open(late, ts)?;
        self.event_close(
            e,
            &EventTail {
                ty: event_type::COUNTER,
                name_iid: None,
                track,
                counter_value: Some(value),
            },
        )
    }

    /// Writes one of the recorder's own instants (session, statistics) on `track`: category
    /// `ingero`, the interned name of `which`, and `args`.
    pub(super) fn ingero_instant(
        &mut self,
        track: u64,
        ts: u64,
        which: Instant,
        args: Vec<DebugAnnotation>,
    ) -> Result<()> {
        let te = TrackEvent {
            name_iid: Some(self.plain.interner.name(EventName::Instant(which))),
            category_iids: vec![Category::Ingero.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        self.plain_event(event_type::INSTANT, track, ts, te)
    }
}
