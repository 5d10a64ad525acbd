//! Event names, categories and track names.

use ingero_ebpf::{CudaOp, OffCpuReason};

use crate::model::ProcessOp;

words! {
    /// Categories, with fixed iids ([`Category::iid`]).
    pub enum Category {
        /// CUDA calls that returned an error (successful calls carry no category: one byte
        /// pair less per call, and the name already says it is a CUDA call).
        CudaError = "cuda,error",
        /// Off-CPU intervals.
        Sched = "sched",
        /// Process and thread lifecycle instants.
        Process = "process",
        /// Annotations, label states and spans.
        Annotation = "annotation",
        /// ingero's own session and statistics instants.
        Ingero = "ingero",
        /// NVTX ranges and marks.
        Nvtx = "nvtx",
        /// NVIDIA driver messages (Xid reports of GPU faults).
        Driver = "driver",
    }
}

impl Category {
    /// The fixed iid every recording declares for this category.
    pub const fn iid(self) -> u64 {
        self as u64 + 1
    }
}

words! {
    /// Instants of ingero's own.
    pub enum Instant {
        /// The session packet at the start of every file, on the `ingero` track.
        Session = "session",
        /// The final statistics, on the `ingero` track.
        Statistics = "statistics",
        /// An annotation on its scope's labels track.
        Annotation = "annotation",
        /// A seek mark on the `ingero` track, written before a chunk where the sequences
        /// inside chunks start afresh: where a reader may start decoding (its
        /// [`SeekArg`](super::SeekArg)s bound the records before it).
        Restart = "restart",
        /// The seek mark that closes a file: the [`SeekArg`](super::SeekArg)s of its last
        /// stretch of chunks.
        FileEnd = "file end",
        /// After a [`Instant::Restart`] mark, one per label state open across it: the state
        /// restated ([`SeekArg::LabelTrack`](super::SeekArg::LabelTrack) and the others), so
        /// a reader of the labels from that restart on needs nothing before it.
        LabelOpen = "label open",
    }
}

words! {
    /// Names of the tracks ingero describes (threads and processes are named by their task).
    pub enum TrackName {
        /// Session and statistics.
        Ingero = "ingero",
        /// A thread's off-CPU intervals (child of the thread's track).
        OffCpu = "off-CPU",
        /// A process's annotations (child of the process's track).
        Labels = "labels",
        /// Annotations with no process scope.
        TraceWide = "trace-wide labels",
        /// Request spans: `spans`, then `spans 2`, `spans 3`, … for overlapping ones.
        Spans = "spans",
        /// A process's device memory counter.
        DeviceMemory = "device memory",
        /// Records written per second.
        EventsPerSecond = "events/s",
        /// Drops reported.
        Drops = "drops",
        /// A thread's NVTX push/pop ranges and marks (child of the thread's track): `NVTX` for
        /// the default domain, `NVTX: <domain>` for the others.
        Nvtx = "NVTX",
        /// A process's NVTX start/end ranges: `NVTX ranges`, `NVTX ranges #2`, … for
        /// overlapping ones (child of the process's track).
        NvtxRanges = "NVTX ranges",
        /// The NVIDIA drivers' kernel log messages (Xid reports), machine-wide.
        Driver = "NVIDIA driver",
    }
}

/// Between `NVTX` and a domain's name in the name of a thread's NVTX track.
pub const NVTX_DOMAIN_SEPARATOR: &str = ": ";

/// An event name with a fixed iid: every name a recording declares in each sequence's first
/// packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventName {
    /// A CUDA call's slice (the op's canonical name from `ingero_ebpf`'s op table).
    Op(CudaOp),
    /// An off-CPU interval's slice.
    OffCpu(OffCpuReason),
    /// A lifecycle instant.
    Lifecycle(ProcessOp),
    /// One of ingero's own instants.
    Instant(Instant),
}

impl EventName {
    /// Every fixed name, in iid order (from 1).
    pub fn all() -> impl Iterator<Item = EventName> {
        let ops = CudaOp::ALL.iter().map(|op| EventName::Op(*op));
        let off = OffCpuReason::ALL.iter().map(|r| EventName::OffCpu(*r));
        let life = ProcessOp::ALL.iter().map(|p| EventName::Lifecycle(*p));
        let instants = Instant::ALL.iter().map(|i| EventName::Instant(*i));
        ops.chain(off).chain(life).chain(instants)
    }

    /// The op whose canonical name `text` is (one hash lookup: the reader asks per launch
    /// named by its kernel).
    pub fn op_from_text(text: &str) -> Option<CudaOp> {
        static OPS: std::sync::OnceLock<std::collections::HashMap<&'static str, CudaOp>> =
            std::sync::OnceLock::new();
        OPS.get_or_init(|| CudaOp::ALL.iter().map(|op| (op.name(), *op)).collect())
            .get(text)
            .copied()
    }

    /// The name as written in a recording.
    pub fn text(self) -> &'static str {
        match self {
            EventName::Op(op) => op.name(),
            EventName::OffCpu(r) => r.name(),
            EventName::Lifecycle(p) => p.text(),
            EventName::Instant(i) => i.text(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_event_names_are_distinct() {
        let names: Vec<_> = EventName::all().map(EventName::text).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!n.is_empty());
            assert!(!names[i + 1..].contains(n), "{n} twice");
        }
        for c in Category::ALL {
            assert_eq!(Category::from_text(c.text()), Some(*c));
        }
        for t in TrackName::ALL {
            assert_eq!(TrackName::from_text(t.text()), Some(*t));
        }
    }
}
