//! Debug-annotation keys: the arguments of CUDA calls, off-CPU intervals, lifecycle instants,
//! annotations and the session packet, in one table.

words! {
    /// A debug-annotation key with a fixed iid: [`ArgKey::iid`] is its place in this table
    /// (from 1), declared in every sequence's first packet. The reader resolves a key by its
    /// text, so the order only matters to the bytes written; still, a key keeps its place (new
    /// keys go last, or into the place of a removed one), so files stay byte for byte what
    /// they were and the reader's memo of repeated packets sees the same bytes.
    pub enum ArgKey {
        /// `cudaError_t` of a CUDA call (absent: success).
        Ret = "ret",
        /// The error's name, for a non-zero `ret` with a known name.
        Error = "error",
        /// Bytes allocated, or held by the allocation freed.
        Size = "size",
        /// The pointer allocated (on success) or freed.
        Ptr = "ptr",
        /// The `cudaStream_t` handle a call was queued on or waited for.
        Stream = "stream",
        /// Older recordings: the launch configuration as separate arguments; this one the
        /// kernel's host-side function address.
        Func = "func",
        /// Older recordings: a launch's grid dimensions (`16x4x1`).
        Grid = "grid",
        /// Older recordings: a launch's block dimensions (`32x8x1`).
        Block = "block",
        /// Older recordings: a launch's dynamic shared memory per block, in bytes.
        SharedMem = "shared_mem",
        /// The `cudaGraphExec_t` handle a graph launch ran.
        GraphExec = "graph_exec",
        /// Bytes copied or set.
        Count = "count",
        /// A copy's direction ([`crate::model::MemcpyKind::text`]: `H2D`, …).
        Kind = "kind",
        /// A 2D copy's width, in bytes.
        Width = "width",
        /// A 2D copy's height, in rows.
        Height = "height",
        /// A peer copy's destination device.
        DstDevice = "dst_device",
        /// A peer copy's source device.
        SrcDevice = "src_device",
        /// The `cudaEvent_t` handle cudaEventSynchronize waited for.
        Event = "event",
        /// The call's duration before it was clamped to keep slices nested.
        ClampedFromNs = "clamped_from_ns",
        /// Off-CPU: the thread that ran instead.
        NextTid = "next_tid",
        /// Off-CPU: the name of the thread that ran instead.
        NextComm = "next_comm",
        /// Off-CPU: the scheduler's `prev_state` at switch-out.
        PrevState = "prev_state",
        /// The CPU an off-CPU interval ended on, and on slice ends and instants of threads,
        /// the CPU when it changed.
        Cpu = "cpu",
        /// Lifecycle: the other task (a fork's child, the pid before an exec).
        OtherPid = "other_pid",
        /// Lifecycle: whether a fork's clone flags were seen (else fork versus thread is a
        /// guess).
        CloneFlagsKnown = "clone_flags_known",
        /// Lifecycle: an exec's file or a fork's child name.
        Text = "text",
        /// Annotations: the effective uid of the client that wrote it.
        ProvenanceUid = "provenance.uid",
        /// Annotations: the pid of the client that wrote it.
        ProvenancePid = "provenance.pid",
        /// The cgroup v2 id of the task (slice ends and instants, when it changed). In the
        /// place of a key no record wrote (`scope.pid`), so the iids after it stay what older
        /// recordings used.
        CgroupId = "cgroup_id",
        /// Annotations: the scoped process's start time (clock ticks since boot), which tells
        /// incarnations of a reused pid apart (the process is its labels track's).
        ScopeStartTime = "scope.start_time",
        /// A state slice re-opened at the start of a rotated file.
        Continued = "continued",
        /// The session packet: the host's name.
        Host = "host",
        /// The session packet: the kernel release. On a launch: the launched kernel's name as
        /// users read it (demangled; the slice is named by it too).
        Kernel = "kernel",
        /// The session packet: the agent's version.
        AgentVersion = "agent_version",
        /// The session packet: the agent's command line.
        CommandLine = "command_line",
        /// The session packet: what was traced, one per line.
        Targets = "targets",
        /// The session packet: the attached probes, one per line.
        Probes = "probes",
        /// The session packet: the host's id.
        MachineId = "machine_id",
        /// The session packet: the file's place in its session (0, then 1, 2, … after
        /// rotations).
        FileIndex = "file_index",
        /// The session packet: the session's start as a CLOCK_REALTIME stamp (unix ns).
        StartedRealtimeNs = "started_realtime_ns",
        /// A kernel launch's whole configuration as one interned string
        /// ([`super::launch_text`]): one argument per launch instead of four keeps a
        /// launch-dominated trace small and fast to read.
        Launch = "launch",
        /// Annotations: the effective gid of the client that wrote it.
        ProvenanceGid = "provenance.gid",
        /// Annotations: when the agent received the line (CLOCK_MONOTONIC ns).
        ReceivedNs = "received_ns",
        /// Annotations: the client's CLOCK_REALTIME stamp of an instant or of a span's start.
        RealtimeNs = "realtime_ns",
        /// Annotations: a span's end as a CLOCK_REALTIME stamp.
        EndRealtimeNs = "end_realtime_ns",
        /// Annotations: the client sent no time, so the agent stamped it on receipt.
        StampedByAgent = "stamped_by_agent",
        /// A CUDA call whose slice is named by something else (a launch named by its kernel):
        /// the op.
        Op = "op",
        /// The export that fired, when it is not the op's own name (`cuMemAlloc_v2`).
        Symbol = "symbol",
        /// The traced call this one ran inside of on the same thread (`cudaMalloc` for the
        /// `cuMemAlloc` it made).
        Parent = "parent",
        /// A launch: the kernel's name as compiled (mangled).
        KernelMangled = "kernel_mangled",
        /// A launch: where the kernel's name came from ([`crate::model::NameSource`]).
        KernelSource = "kernel_source",
        /// The `cudaGraph_t` a capture produced or an instantiation used.
        Graph = "graph",
        /// Kernel launches recorded into a graph by its capture.
        KernelNodes = "kernel_nodes",
        /// The stream whose capture built a launched graph.
        CaptureStream = "capture_stream",
        /// A capture's `cudaStreamCaptureMode`.
        CaptureMode = "capture_mode",
        /// The `CUmodule` or `CUlibrary` a load created.
        Module = "module",
        /// The `CUfunction` or `CUkernel` a lookup returned.
        Function = "function",
        /// The module, library or kernel a function lookup asked.
        Owner = "owner",
        /// A copy's host-side pointer (the source of `H2D`, the destination of `D2H`), when
        /// the call names one.
        HostPtr = "host_ptr",
        /// A host memory registration's flags (`cudaHostRegister*`, `CU_MEMHOSTREGISTER_*`).
        Flags = "flags",
        /// A `CUmemGenericAllocationHandle`: created, released, retained, imported or mapped.
        Handle = "handle",
        /// Where `cuMemCreate`'s memory lives ([`crate::model::MemLocation::text`]).
        Location = "location",
        /// An NCCL call's arguments that stay the same from call to call on a communicator,
        /// as one interned string ([`super::nccl_text`]).
        Nccl = "nccl",
        /// An NCCL collective's place in its communicator's order in its process, from 1.
        Seq = "seq",
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

words! {
    /// Label keys the agent itself writes for a process (from its launcher's environment);
    /// adapters use the same words (docs/integrations.md).
    pub enum ProcessLabel {
        /// The process's global rank in a distributed job.
        Rank = "rank",
        /// Its rank on its node.
        LocalRank = "local_rank",
        /// The number of ranks in the job.
        WorldSize = "world_size",
        /// The job's run id (`TORCHELASTIC_RUN_ID`, `SLURM_JOB_ID`).
        RunId = "run_id",
    }
}

/// Annotations: each label is a key `labels.<key>`.
pub const LABEL_PREFIX: &str = "labels.";

/// The span label an NVTX range is to `query` and `explain`: its message.
pub const NVTX_LABEL: &str = "nvtx";
/// The span label naming a range's domain, when it is not the default one.
pub const NVTX_DOMAIN_LABEL: &str = "nvtx.domain";

words! {
    /// The arguments of NVTX ranges and marks. Written on the plain sequence by name (an
    /// interned debug-annotation name, like labels): NVTX is not on the hot path of the
    /// reader's fixed-key slots.
    pub enum NvtxArg {
        /// The domain's name (absent: the default domain).
        Domain = "nvtx.domain",
        /// The category number (absent: 0).
        Category = "nvtx.category",
        /// The category's name, when the program named it.
        CategoryName = "nvtx.category_name",
        /// ARGB color.
        Color = "nvtx.color",
        /// The payload (an unsigned, signed or floating value).
        Payload = "nvtx.payload",
        /// The process.
        Pid = "nvtx.pid",
        /// The thread that pushed, started or marked.
        Tid = "nvtx.tid",
        /// The thread that ended a start/end range, when another one did.
        EndTid = "nvtx.end_tid",
        /// Nesting level of a push/pop range.
        Depth = "nvtx.depth",
        /// The message was cut.
        Truncated = "nvtx.truncated",
        /// Still open when its process ended.
        Unclosed = "nvtx.unclosed",
    }
}

words! {
    /// The arguments of an NVIDIA driver message's instant, written by name on the plain
    /// sequence (messages are rare). The reader needs only the text; the Xid fields are what
    /// the Perfetto UI shows beside it.
    pub enum DriverArg {
        /// The message as the driver printed it.
        Text = "driver.text",
        /// The message was cut.
        Truncated = "driver.truncated",
        /// An Xid report's code.
        Xid = "xid",
        /// The GPU's (or NVSwitch's) PCI bus id.
        Pci = "xid.pci",
        /// The process the driver named.
        Pid = "xid.pid",
        /// What the code means (ingero's catalog).
        Meaning = "xid.meaning",
    }
}

words! {
    /// The session packet's arguments added after the fixed [`ArgKey`] table was full enough
    /// to need its slots for events: written by name (not interned; once per file), found by
    /// name.
    pub enum SessionArg {
        /// The name the host goes by among a job's hosts (`--machine-name`; also
        /// `SystemInfo.machine_name`).
        MachineName = "machine_name",
        /// The kernel's maximum error of REALTIME, µs (`adjtimex`).
        ClockMaxErrorUs = "clock.maxerror_us",
        /// The kernel's estimated error of REALTIME, µs.
        ClockEstErrorUs = "clock.esterror_us",
        /// Nothing disciplines REALTIME (`STA_UNSYNC`).
        ClockUnsynchronized = "clock.unsynchronized",
    }
}

words! {
    /// The arguments of the seek marks ([`super::Instant::Restart`], [`super::Instant::FileEnd`])
    /// the writer puts on the `ingero` track at every restart of the sequences inside chunks
    /// and at the end of each file (see `read::seek`). Written by name on the plain sequence
    /// (interned like labels, not among the fixed [`ArgKey`] slots: no slice carries them).
    pub enum SeekArg {
        /// The earliest start of the records whose packets are in the chunks since the
        /// previous mark (absent: none).
        RecordsFromNs = "records.from_ns",
        /// The latest end of those records (slices still open included, at their end).
        RecordsToNs = "records.to_ns",
        /// The earliest start of the slices still open at this restart (absent: none).
        OpenFromNs = "open.from_ns",
        /// The earliest start of the label records (annotations, label states, spans, NVTX
        /// ranges and marks) completed on the plain sequence since the previous mark (absent:
        /// none).
        LabelsFromNs = "labels.from_ns",
        /// The latest end of those label records.
        LabelsToNs = "labels.to_ns",
        /// How many [`super::Instant::LabelOpen`] instants follow the mark (0 on a `file
        /// end`). Present on every mark of a writer that indexes its labels this way.
        LabelsOpen = "labels.open",
        /// A `label open` instant's state track.
        LabelTrack = "label.track",
        /// When the restated state began.
        LabelBeginNs = "label.begin_ns",
        /// The restated state slice's name (`step=42`).
        LabelName = "label.name",
    }
}

words! {
    /// The groups of the final statistics packet: each number is a key `<group><name>`.
    pub enum StatsGroup {
        /// Events per type ([`crate::model::FinalStats::events`]).
        Events = "events.",
        /// Drops per reason ([`crate::model::FinalStats::drops`]).
        Drops = "drops.",
        /// Rejected annotations per reason ([`crate::model::FinalStats::rejected`]).
        Rejected = "rejected.",
        /// The recorder's own counts ([`crate::model::FinalStats::recorder`]).
        Recorder = "recorder.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_keys_keep_the_iids_older_recordings_used() {
        let kept = [
            (ArgKey::Ret, 1),
            (ArgKey::Size, 3),
            (ArgKey::Ptr, 4),
            (ArgKey::Stream, 5),
            (ArgKey::Count, 11),
            (ArgKey::Kind, 12),
            (ArgKey::NextTid, 19),
            (ArgKey::Cpu, 22),
            (ArgKey::ScopeStartTime, 29),
            (ArgKey::StartedRealtimeNs, 39),
            (ArgKey::Launch, 40),
        ];
        for (k, iid) in kept {
            assert_eq!(k.iid(), iid, "{k:?}");
        }
    }

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
        for a in SessionArg::ALL {
            assert_eq!(SessionArg::from_text(a.text()), Some(*a));
            assert_eq!(
                ArgKey::from_text(a.text()),
                None,
                "{a:?} is not a fixed key"
            );
        }
    }
}
