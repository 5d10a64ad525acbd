//! [`DaemonConfig`]: what the daemon traces and where it writes, as plain data (the command
//! line, a test or a benchmark builds it).

use std::path::PathBuf;
use std::time::Duration;

use ingero_trace::write::RecorderConfig;

use crate::annotate::IngestConfig;
use crate::timeline::merger::MergerConfig;

/// Everything one tracing session needs to know before it starts.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// Trace only these processes (their forked children too); `None`: every process that
    /// uses CUDA.
    pub pids: Option<Vec<u32>>,
    /// Attach to these libcudart files instead of discovering them (and never rescan).
    pub cuda_libs: Vec<PathBuf>,
    /// Stop after this long; `None`: until a signal.
    pub duration: Option<Duration>,
    /// One JSON object per event on stdout instead of the live table.
    pub json: bool,
    /// Bytes per ring buffer (checked when the daemon starts: a power of two, at least a page).
    pub ringbuf_size: u64,
    /// Accept annotations on the socket this describes; `None`: no socket.
    pub ingest: Option<IngestConfig>,
    /// Record a Perfetto trace; `None`: no recording.
    pub record: Option<RecordConfig>,
    /// Kernels the live table lists (most API time first); 0: none.
    pub top_kernels: usize,
}

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// The writer's settings. Its `session` is filled in when recording starts, once the
    /// targets and the attached probes are known.
    pub recorder: RecorderConfig,
    /// The reorder window records wait in before they are written.
    pub merger: MergerConfig,
}
