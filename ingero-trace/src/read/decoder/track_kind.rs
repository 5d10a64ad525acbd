//! [`TrackKind`]: what a track's descriptor made it, which decides what the events on it
//! mean; and how a thread track follows its [`Placement`] (where its thread ran, as its events
//! last said).

use std::sync::Arc;

use super::args::u64_of;
use super::values::Val;
use crate::model::{CounterKind, Placement, ThreadRef};
use crate::vocab::ArgKey;

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
    /// A thread's NVTX ranges and marks of one domain (`None`: the default domain).
    Nvtx(ThreadRef, Option<String>),
    /// A lane of a process's NVTX start/end ranges.
    NvtxLane(u32),
    /// The NVIDIA drivers' messages.
    Driver,
    Counter(CounterKind),
    Other,
}

/// A track's placement is what the slice ends and instants on it last said (the writer states
/// it when it changes, and again after each restart of its sequences).
impl Placement {
    /// Takes what the arguments of an end or instant state.
    pub(super) fn update(&mut self, args: &[(Arc<str>, Val)]) {
        if let Some(cpu) = u64_of(args, ArgKey::Cpu) {
            self.cpu = cpu as u32;
        }
        if let Some(cgroup) = u64_of(args, ArgKey::CgroupId) {
            self.cgroup_id = cgroup;
        }
    }
}
