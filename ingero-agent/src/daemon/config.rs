//! [`DaemonConfig`]: what the daemon traces and where it writes, as plain data (the command
//! line, a test or a benchmark builds it).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use ingero_trace::write::RecorderConfig;

use crate::annotate::IngestConfig;
use crate::export::otlp::live::run::LiveSettings;
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
    /// `ingero trace -- CMD`: run this command once the probes are attached, trace it and its
    /// descendants, and stop when it exits (ingero then exits with its code); `None`: trace
    /// until the duration ends or a signal arrives.
    pub command: Option<CommandConfig>,
    /// A uid besides root (and the agent's own) whose processes may connect to the NVTX socket:
    /// the user `trace -- CMD` runs the command as, so that its injection library can stream
    /// to an agent running under sudo. The NVTX server decides with [`nvtx_peer_allowed`].
    pub nvtx_allowed_uid: Option<u32>,
    /// Export spans and metrics live to an OpenTelemetry Collector (needs `record`).
    pub otlp: Option<LiveSettings>,
}

/// Whether a process of `peer_uid` may connect to the NVTX socket of an agent running as
/// `agent_euid`: root, the agent's own user, and the session's [`DaemonConfig::nvtx_allowed_uid`].
pub fn nvtx_peer_allowed(allowed_uid: Option<u32>, agent_euid: u32, peer_uid: u32) -> bool {
    peer_uid == 0 || peer_uid == agent_euid || allowed_uid == Some(peer_uid)
}

/// The command `ingero trace -- CMD` runs.
#[derive(Clone, Debug)]
pub struct CommandConfig {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Variables set on top of the inherited environment (the NVTX ones, and `HOME`, `USER`,
    /// `LOGNAME` when it runs as another user).
    pub env: Vec<(OsString, OsString)>,
    /// Run it as this user; `None`: as this process's user.
    pub user: Option<crate::launch::user::RunAs>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nvtx_socket_admits_root_the_agents_user_and_the_commands_user() {
        assert!(nvtx_peer_allowed(None, 0, 0));
        assert!(!nvtx_peer_allowed(None, 0, 1000));
        assert!(nvtx_peer_allowed(Some(1000), 0, 1000));
        assert!(!nvtx_peer_allowed(Some(1000), 0, 1001));
        assert!(nvtx_peer_allowed(None, 1000, 1000));
    }
}
