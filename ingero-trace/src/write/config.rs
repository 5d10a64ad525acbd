//! What the recorder is told: where to write, how big files may grow, and the session's
//! description; and the final statistics the caller hands over at the end.

use std::path::PathBuf;

use crate::model::SessionInfo;

/// Default retention: 10 GB across the directory.
pub const DEFAULT_MAX_TOTAL_SIZE: u64 = 10_000_000_000;
/// Default rotation size.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1_000_000_000;
/// Default libdeflate level of the compressed chunks (see `chunk.rs`): the fastest one.
pub const DEFAULT_COMPRESSION_LEVEL: u32 = 1;
/// The longest gap between two clock snapshots, in trace time.
pub const CLOCK_SNAPSHOT_INTERVAL_NS: u64 = 10_000_000_000;
/// Default raw chunk bytes between two restarts of the sequences inside chunks: at most this
/// much (about 85,000 CUDA calls) is lost to one damaged chunk. A restart declares the fixed
/// vocabulary again (about 2 KiB compressed, 0.4 % of this).
pub const DEFAULT_RESTART_BYTES: u64 = 4 << 20;
/// The longest trace time between two such restarts, for quiet recordings.
pub const RESTART_INTERVAL_NS: u64 = 60_000_000_000;

/// How a [`Recorder`](super::Recorder) writes: where, how big its files may grow, how they
/// are compressed, and the session it describes. `Default` gives the defaults above.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    /// `-o PATH`: the first file's exact path (rotated files get `.1`, `.2`, … before the
    /// extension). Retention then only deletes this session's own files.
    pub path: Option<PathBuf>,
    /// The directory for files named by start time (default `~/.ingero/traces/` of the
    /// invoking user). Retention deletes the oldest `ingero-*.pftrace` files in it.
    pub dir: Option<PathBuf>,
    /// Rotate when the current file reaches this many bytes.
    pub max_file_size: u64,
    /// Delete the oldest files while the total exceeds this.
    pub max_total_size: u64,
    /// The session written at the start of every file (see [`SessionInfo::this_host`]).
    pub session: SessionInfo,
    /// Stamp `machine_id` on every packet (what Perfetto uses to tell hosts apart when traces
    /// are merged). Costs 5 bytes per packet before compression (the default id fits 21 bits).
    pub stamp_machine_id: bool,
    /// Override the host's id (tests); `None`: hash of `/etc/machine-id`, folded to 21 bits.
    pub machine_id: Option<u32>,
    /// libdeflate level (1..=12) of the compressed chunks packets are written in; 0 writes
    /// packets plain.
    pub compression_level: u32,
    /// Under sudo, give created directories and files to `SUDO_USER` (default true).
    pub chown_to_sudo_user: bool,
    /// Start the sequences inside chunks afresh at the head of a chunk once this many raw
    /// chunk bytes (or [`RESTART_INTERVAL_NS`] of trace time) have gone by, so that a reader
    /// who finds a chunk damaged resumes at the next restart.
    pub restart_bytes: u64,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            path: None,
            dir: None,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_total_size: DEFAULT_MAX_TOTAL_SIZE,
            session: SessionInfo::default(),
            stamp_machine_id: true,
            machine_id: None,
            compression_level: DEFAULT_COMPRESSION_LEVEL,
            chown_to_sudo_user: true,
            restart_bytes: DEFAULT_RESTART_BYTES,
        }
    }
}
