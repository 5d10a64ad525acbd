//! [`TrackKind`]: what a track's descriptor made it, which decides what the events on it
//! mean.

use crate::model::{CounterKind, ThreadRef};

/// What a track is, from its descriptor (and its parent's).
#[derive(Clone, Debug)]
pub(super) enum TrackKind {
    /// Session and statistics.
    Ingero,
    Process(u32),
    /// CUDA calls and lifecycle instants.
    Thread(ThreadRef),
    /// The thread's off-CPU intervals.
    OffCpu(ThreadRef),
    /// A process's (or, `None`, the trace-wide) annotations.
    Labels(Option<u32>),
    /// A label's state slices: the scope and the label key.
    State(Option<u32>, String),
    /// Request spans of a scope.
    SpanLane(Option<u32>),
    Counter(CounterKind),
    Other,
}
