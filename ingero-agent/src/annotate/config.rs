//! Settings of the ingest server, with the defaults from the issue.

use std::path::PathBuf;
use std::time::Duration;

/// How the annotation socket server is set up. `Default` gives the
/// documented defaults; the CLI overrides fields from its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestConfig {
    /// Socket path; `None` follows the default rules
    /// (`$INGERO_ANNOTATE_SOCKET`, `/run/ingero/annotate.sock` when `/run`
    /// is writable, else `$HOME/.ingero/annotate/annotate.sock`).
    pub socket_path: Option<PathBuf>,
    /// Open the socket to this group (name or numeric gid): directory 0710,
    /// socket 0770. `None`: owner only (0700).
    pub group: Option<String>,
    /// Most connections open at once; more are accepted and closed at once.
    pub max_conns: usize,
    /// Lines per second per connection (token bucket refill); 0 = no limit.
    pub rate_per_conn: u32,
    /// Token bucket size per connection (lines that may arrive at once).
    pub burst: u32,
    /// Lines per second over all connections together (bucket size equals
    /// one second's worth); 0 = no limit.
    pub global_rate: u32,
    /// A connection silent for this long is closed (a client reconnects on
    /// its next write).
    pub idle_timeout: Duration,
    /// Capacity of the queue to the timeline; when it is full lines are
    /// dropped and counted, never waited for.
    pub queue_capacity: usize,
    /// Also let this user connect to the NVTX socket beside it (`trace -- CMD`, whose
    /// command runs as the invoking user).
    pub nvtx_allowed_uid: Option<u32>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            socket_path: None,
            group: None,
            max_conns: 1024,
            rate_per_conn: 1000,
            burst: 1000,
            global_rate: 100_000,
            idle_timeout: Duration::from_secs(600),
            queue_capacity: 65_536,
            nvtx_allowed_uid: None,
        }
    }
}
