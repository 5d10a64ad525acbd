//! Debug-annotation keys: the arguments of CUDA calls, off-CPU intervals, lifecycle instants,
//! annotations and the session packet, in one table.

words! {
    /// A debug-annotation key with a fixed iid: [`ArgKey::iid`] is its place in this table
    /// (from 1), declared in every sequence's first packet. The reader resolves a key by its
    /// text, so the order only matters to the bytes written; new keys go last.
    pub enum ArgKey {
        /// `cudaError_t` of a CUDA call (absent: success).
        Ret = "ret",
        /// The error's name, for a non-zero `ret` with a known name.
        Error = "error",
        Size = "size",
        Ptr = "ptr",
        Stream = "stream",
        /// Older recordings: the launch configuration as separate arguments.
        Func = "func",
        Grid = "grid",
        Block = "block",
        SharedMem = "shared_mem",
        GraphExec = "graph_exec",
        Count = "count",
        Kind = "kind",
        Width = "width",
        Height = "height",
        DstDevice = "dst_device",
        SrcDevice = "src_device",
        Event = "event",
        /// The call's duration before it was clamped to keep slices nested.
        ClampedFromNs = "clamped_from_ns",
        /// Off-CPU: who ran instead, the state at switch-out. `cpu`: the CPU an off-CPU
        /// interval ended on, and on slice ends and instants of threads, the CPU when it
        /// changed.
        NextTid = "next_tid",
        NextComm = "next_comm",
        PrevState = "prev_state",
        Cpu = "cpu",
        /// Lifecycle: the other task, whether the fork's flags were seen, the file or name.
        OtherPid = "other_pid",
        CloneFlagsKnown = "clone_flags_known",
        Text = "text",
        /// Annotations: who wrote it, and the start time of the process it is scoped to (the
        /// process is its labels track's).
        ProvenanceUid = "provenance.uid",
        ProvenancePid = "provenance.pid",
        ScopeStartTime = "scope.start_time",
        /// A state slice re-opened at the start of a rotated file.
        Continued = "continued",
        /// The session packet.
        Host = "host",
        Kernel = "kernel",
        AgentVersion = "agent_version",
        CommandLine = "command_line",
        Targets = "targets",
        Probes = "probes",
        MachineId = "machine_id",
        FileIndex = "file_index",
        StartedRealtimeNs = "started_realtime_ns",
        /// A kernel launch's whole configuration as one interned string
        /// ([`super::launch_text`]): one argument per launch instead of four keeps a
        /// launch-dominated trace small and fast to read.
        Launch = "launch",
        /// The cgroup v2 id of the task (slice ends and instants, when it changed).
        CgroupId = "cgroup_id",
        /// Annotations: the writer's gid, when the agent received the line, the client's
        /// CLOCK_REALTIME stamps (an instant's, or a span's start and end) and whether the
        /// agent stamped it because the client did not.
        ProvenanceGid = "provenance.gid",
        ReceivedNs = "received_ns",
        RealtimeNs = "realtime_ns",
        EndRealtimeNs = "end_realtime_ns",
        StampedByAgent = "stamped_by_agent",
    }
}

/// How many [`ArgKey`]s there are (the reader's slot arrays are this long).
pub const ARG_KEYS: usize = ArgKey::ALL.len();

// The reader keeps a 64-bit presence mask per slice, one bit per key.
const _: () = assert!(
    ARG_KEYS <= 64,
    "more argument keys than the reader's slot mask holds"
);

impl ArgKey {
    /// The fixed iid every recording declares for this key.
    pub const fn iid(self) -> u64 {
        self as u64 + 1
    }

    /// The key's place in [`ArgKey::ALL`] (the reader's slot).
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Annotations: each label is a key `labels.<key>`.
pub const LABEL_PREFIX: &str = "labels.";

words! {
    /// The groups of the final statistics packet: each number is a key `<group><name>`.
    pub enum StatsGroup {
        Events = "events.",
        Drops = "drops.",
        Rejected = "rejected.",
        Recorder = "recorder.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_round_trips_through_its_text_and_has_a_distinct_iid() {
        for (i, k) in ArgKey::ALL.iter().enumerate() {
            assert_eq!(ArgKey::from_text(k.text()), Some(*k));
            assert_eq!(k.index(), i);
            assert_eq!(k.iid(), i as u64 + 1);
            assert!(!k.text().starts_with(LABEL_PREFIX), "{k:?}");
        }
        assert_eq!(ArgKey::from_text("no such key"), None);
        for g in StatsGroup::ALL {
            assert_eq!(StatsGroup::from_text(g.text()), Some(*g));
        }
    }
}
