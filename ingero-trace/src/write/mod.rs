//! `record/`: the streaming writer of Perfetto's native protobuf trace format (a stream of
//! `TracePacket`s; open the file at ui.perfetto.dev).
//!
//! # Interface
//! ```ignore
//! let mut rec = Recorder::create(RecorderConfig { path: Some("/tmp/run.pftrace".into()),
//!     session: SessionInfo::this_host(), ..Default::default() })?;
//! rec.write(&timeline_record)?;      // in timestamp order, as the merger releases them
//! rec.record_drops(ts_ns, total)?;   // drop counter samples
//! rec.flush()?;                      // at least once a second: writes the pending chunk
//! let files = rec.finish(&FinalStats { .. })?;
//! ```
//! - [`RecorderConfig`]: `path` (`-o`), else `dir` (default `~/.ingero/traces/` of the
//!   invoking user; under sudo `SUDO_USER`'s, files chowned to them), `max_file_size`
//!   (rotation: bytes written plus the pending chunk's raw size), `max_total_size`
//!   (retention), [`SessionInfo`](crate::model::SessionInfo), `stamp_machine_id`, `machine_id`, `compression_level`.
//! - [`Recorder::current_path`], [`Recorder::counters`].
//!
//! # What a file holds
//! - Main sequence (id 1): first packet = `SEQ_INCREMENTAL_STATE_CLEARED`, defaults
//!   (`timestamp_clock_id` = 64), a ClockSnapshot (clock 64 incremental, MONOTONIC, BOOTTIME,
//!   REALTIME) and the fixed interned vocabulary; later packets `SEQ_NEEDS_INCREMENTAL_STATE`
//!   with delta timestamps. A snapshot again at least every 10 s of trace time.
//! - Late sequence (id 2): records that arrived after later ones were written, with absolute
//!   MONOTONIC timestamps (defaults `timestamp_clock_id` = 3).
//! - Session metadata: instant `session` on track `ingero` with debug annotations (host,
//!   kernel, agent_version, command_line, targets, probes, machine_id, file_index,
//!   started_realtime_ns, machine_name, clock.maxerror_us, clock.esterror_us,
//!   clock.unsynchronized) at the start of every file, after a `SystemInfo` packet naming the
//!   machine (`machine_name`, field 17, which Perfetto names merged machines by; see
//!   `identity.rs`); final statistics: instant `statistics`
//!   with `events.*`, `drops.*`, `rejected.*`, `recorder.*`. TrackEvent instants rather than a
//!   dedicated proto: the UI shows them and no Perfetto message fits free-form session data.
//! - Tracks: see `tracks.rs`. Events: see `events.rs` and `labels.rs`. Names: `schema.rs`.
//! - Every file is self-contained: a rotation ends open slices in the old file, resets the
//!   sequences, and describes tracks again before use in the new one.
//! - The main and late sequences also start afresh (incremental state cleared, clock 64 and
//!   the fixed vocabulary restated, without `first_packet_on_sequence`) at the head of a chunk
//!   every `restart_bytes` (4 MiB) of chunks or 60 s of trace time, so a reader that loses a
//!   damaged chunk resumes at the next restart. Before each such chunk a `restart` instant on
//!   the `ingero` track (plain), and at the end of each file a `file end` one, bound the times
//!   of the records in the chunks since the previous one, so a reader of a time window can
//!   seek past the chunks before it and stop after it (`seek_marks.rs`, `read::seek`).
//! - Packets are written in chunks (`chunk.rs`): up to 256 KiB of packets compressed with
//!   zlib (`compression_level`: 1, the default, is `deflate/`'s packet-structured encoder,
//!   2–12 libdeflate) into ONE packet whose only field is
//!   `compressed_packets` (field 50), which trace_processor expands in place. A chunk is
//!   written when full and on every `flush` (the caller flushes each second), rotation and
//!   `finish`, so a SIGKILL loses at most the last second; a reader stops cleanly at a
//!   truncated last chunk. A packet bigger than a chunk is written plain. Level 0 writes every
//!   packet plain.
//! - `machine_id` on every packet (trace_processor routes each packet by its own); the default
//!   id is folded to 21 bits (a 3-byte varint, see `clocks.rs`).
//! - A kernel launch carries one argument, `launch` = [`crate::vocab::launch_text`] of its whole
//!   configuration, interned once per distinct configuration.

mod chunk;
mod clocks;
mod config;
mod deflate;
mod driver;
mod encode;
mod error;
mod events;
mod files;
mod identity;
mod interner;
mod labels;
mod nvtx;
mod plain;
mod recorder;
mod seek_marks;
mod sequence;
mod session_packets;
mod slices;
mod tap;
mod tapped;
mod tracks;

pub use config::{
    CLOCK_SNAPSHOT_INTERVAL_NS, DEFAULT_COMPRESSION_LEVEL, DEFAULT_MAX_FILE_SIZE,
    DEFAULT_MAX_TOTAL_SIZE, DEFAULT_RESTART_BYTES, RESTART_INTERVAL_NS, RecorderConfig,
};
/// Public for the property tests and the fuzz target (`fuzz/`); writers go through [`Recorder`].
pub use deflate::PacketDeflater;
pub use error::{Result, WriteError};
pub use files::{FILE_EXT, FILE_PREFIX, trace_files_in};
pub use recorder::{Recorder, RecorderCounters};
pub use tap::{Clamp, EdgeKind, StateEdge, StateIntervals, Tap};

#[cfg(test)]
mod chunk_tests;
#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod nvtx_tests;
#[cfg(test)]
mod placement_tests;
#[cfg(test)]
mod seek_marks_tests;
#[cfg(test)]
mod tap_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vocab_tests;
