//! [`TimelineRecord`]: what the agent's merger orders and the writer writes — a probe [`Event`],
//! an accepted annotation, an NVTX range or a driver message, on the one trace clock (CLOCK_MONOTONIC ns).
//!
//! [`AnnotationRecord`] is the timeline's own, flat form of an annotation: the writer and the
//! reader share it, so what `read/` yields compares equal to what was written. The agent builds
//! it from what its annotation server received.

use super::{DriverMessage, Event, NvtxRecord};

/// The process incarnation an annotation is scoped to (`None` on the record: trace-wide).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    /// The process's pid.
    pub pid: u32,
    /// Start time of the process in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

/// One annotation: labels set at an instant, or a span over `[ts_ns, end_ns]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnnotationRecord {
    /// Labels in the client's order; an empty value clears the key (instants only).
    pub labels: Vec<(String, String)>,
    /// `None`: trace-wide.
    pub scope: Option<Scope>,
    /// The instant, or the span's start (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// `Some(end)`: a span `[ts_ns, end]`; `None`: an instant that sets state.
    pub end_ns: Option<u64>,
    /// Effective uid of the writer.
    pub provenance_uid: u32,
    /// Pid of the writer, when the kernel could say.
    pub provenance_pid: Option<u32>,
    /// Effective gid of the writer.
    pub provenance_gid: u32,
    /// When the agent received the line (trace clock).
    pub received_ns: u64,
    /// The CLOCK_REALTIME stamp (unix ns) of the instant or of the span's start, as the client
    /// sent it (or the agent's receive time, see `stamped_by_agent`).
    pub realtime_ns: u64,
    /// A span's end as a CLOCK_REALTIME stamp.
    pub end_realtime_ns: Option<u64>,
    /// The client sent no time: the agent stamped the instant when it received it.
    pub stamped_by_agent: bool,
}

/// One item on the timeline.
#[derive(Clone, Debug, PartialEq)]
pub enum TimelineRecord {
    /// What a probe reported.
    Event(Event),
    /// An annotation the agent accepted from a client.
    Annotation(AnnotationRecord),
    /// An NVTX range or mark the program emitted (through the injection library).
    Nvtx(NvtxRecord),
    /// A message of the NVIDIA kernel drivers (an Xid report of a GPU fault).
    Driver(DriverMessage),
}

impl TimelineRecord {
    /// The time the record is ordered by: an event's start, an annotation's instant or span
    /// start.
    pub fn ts_ns(&self) -> u64 {
        match self {
            TimelineRecord::Event(e) => e.ts_ns(),
            TimelineRecord::Annotation(a) => a.ts_ns,
            TimelineRecord::Nvtx(n) => n.ts_ns,
            TimelineRecord::Driver(d) => d.ts_ns,
        }
    }
}

impl From<Event> for TimelineRecord {
    fn from(e: Event) -> Self {
        TimelineRecord::Event(e)
    }
}
