//! [`Placement`]: where a thread ran. The writer and the reader share it: the writer states it
//! on a track's slice ends and instants when it changes, the reader follows what they stated.

/// Where a thread ran: what its slice ends and instants state when it changes (threads rarely
/// move, so most events carry none and keep the track's last).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The CPU a call returned on (an instant's: the CPU it was recorded on).
    pub cpu: u32,
    /// The thread's cgroup v2 id.
    pub cgroup_id: u64,
}
