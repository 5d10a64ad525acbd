//! What a recording says about itself: the session that wrote it (at the start of every file)
//! and its final statistics (the last packet of the last file).

use crate::clock_quality::ClockQuality;

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
    /// The name this host goes by among the hosts of a job (`ingero trace --machine-name`,
    /// default the host name): what merged traces and multi-host reports call it. Recordings
    /// made before ingero wrote it read back empty; [`SessionInfo::machine`] then falls back
    /// to [`SessionInfo::host`].
    pub machine_name: String,
    /// How far the host's REALTIME clock may be off (read when the session started), which
    /// bounds how well its events align with other hosts'; `None` when unknown (older
    /// recordings).
    pub clock: Option<ClockQuality>,
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
            machine_name: crate::host::host_name(),
            clock: ClockQuality::measure(),
        }
    }

    /// The machine's name: [`SessionInfo::machine_name`], else (older recordings) the host
    /// name.
    pub fn machine(&self) -> &str {
        if self.machine_name.is_empty() {
            &self.host
        } else {
            &self.machine_name
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
