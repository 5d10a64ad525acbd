//! What a recording says about itself: the session that wrote it (at the start of every file)
//! and its final statistics (the last packet of the last file).

/// Describes the recording session; written at the start of every file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// The recording host's name.
    pub host: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The version of the agent that wrote the recording.
    pub agent_version: String,
    /// The agent's command line, its arguments joined by spaces.
    pub command_line: String,
    /// What was traced (pids, libraries), one entry each.
    pub targets: Vec<String>,
    /// Attached probes.
    pub probes: Vec<String>,
}

impl SessionInfo {
    /// Host, kernel and version filled in from this machine; the caller adds the rest.
    pub fn this_host() -> SessionInfo {
        SessionInfo {
            host: crate::host::host_name(),
            kernel: crate::host::kernel_release(),
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
            targets: Vec::new(),
            probes: Vec::new(),
        }
    }
}

/// End-of-session numbers, written as the last packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinalStats {
    /// Events per type (`cuda`, `off_cpu`, `process`, `annotation`, ...).
    pub events: Vec<(String, u64)>,
    /// Drops per reason.
    pub drops: Vec<(String, u64)>,
    /// Rejected annotations per reason.
    pub rejected: Vec<(String, u64)>,
    /// The recorder's own counts (late records, clamped slices, files); filled in by
    /// `Recorder::finish` and yielded by the reader.
    pub recorder: Vec<(String, u64)>,
}
