//! Open slices and the records they become at their end.
//!
//! Each track keeps a stack of 16-byte [`Open`] entries. A kernel launch (most of a
//! recording) refers to its configuration in the decoder's launch table by index, so
//! beginning and ending it moves no resolved call around; every other slice keeps its
//! resolved body on a second stack of the track. Records are written into the caller's slot
//! in place: the thread name is an `Arc` shared with the track, cloned only when the slot held
//! another thread.

use std::sync::Arc;

use ingero_ebpf::{CudaOp, OffCpuReason};

use super::annotations;
use super::args::{ListArgs, find, u64_of};
use super::instants::annotation;
use super::memo::Key;
use super::nvtx;
use super::plan::{self, CudaPrep, OffPrep, OpenBody};
use super::track_kind::TrackKind;
use super::values::Val;
use crate::fast_map::FastMap;
use crate::model::NvtxKind;
use crate::model::{
    CallDetail, CudaArgs, CudaCallRecord, LabelInterval, LaunchConfig, OffCpuRecord, Placement,
    ReadRecord, ThreadRef,
};
use crate::vocab::{self, ArgKey, EventName};

/// A slice open on a track.
#[derive(Clone, Copy)]
pub(super) struct Open {
    pub ts: u64,
    pub what: What,
}

#[derive(Clone, Copy)]
pub(super) enum What {
    /// A launch with no argument but its configuration: entry `idx` of the launch table.
    Launch { op: CudaOp, idx: u32 },
    /// Anything else: the top of the track's `bodies`.
    Body,
}

/// A track: what its descriptor says (`None` until described) and its open slices.
pub(super) struct Track {
    pub kind: Option<TrackKind>,
    /// Where its thread ran (thread and off-CPU tracks).
    pub placement: Placement,
    pub open: Vec<Open>,
    /// The bodies of the open [`What::Body`] entries, in stack order.
    pub bodies: Vec<OpenBody>,
    /// The slot [`Self::end_top_own`] writes into: it keeps this track's thread from record
    /// to record, so writing one touches no reference count (threads alternate record by
    /// record, and a shared slot then cloned and dropped a name for each).
    pub own: ReadRecord,
    /// The bytes (before the timestamp) of a slice end on this track in the writer's layout,
    /// and its sequence: the fast path decodes a launch and such an end right after it as one.
    pub end_key: Option<(Key, u64)>,
}

impl Default for Track {
    fn default() -> Self {
        Track {
            kind: None,
            placement: Placement::default(),
            open: Vec::new(),
            bodies: Vec::new(),
            own: super::empty_record(),
            end_key: None,
        }
    }
}

impl Track {
    /// Opens a slice with a resolved body.
    #[inline]
    pub fn push(&mut self, ts: u64, body: OpenBody) {
        self.open.push(Open {
            ts,
            what: What::Body,
        });
        self.bodies.push(body);
    }

    /// Opens a launch.
    #[inline(always)]
    pub fn push_launch(&mut self, ts: u64, op: CudaOp, idx: u32) {
        self.open.push(Open {
            ts,
            what: What::Launch { op, idx },
        });
    }

    /// Ends the innermost open slice at `end`; `true` when it wrote a record into `slot` (the
    /// track is still of the slice's kind). Nothing happens without an open slice.
    #[inline(always)]
    pub fn end_top(
        &mut self,
        end: u64,
        launches: &[LaunchConfig],
        names: &FastMap<&'static str, EventName>,
        slot: &mut ReadRecord,
    ) -> bool {
        end_top(self, end, launches, names, Slot::Given(slot))
    }

    /// A launch that begins at `ts` and ends at `end` with no slice opened in between: what
    /// [`Self::push_launch`] then [`Self::end_top_own`] do, without the stack.
    #[inline(always)]
    pub fn launch_own(
        &mut self,
        ts: u64,
        end: u64,
        op: CudaOp,
        idx: u32,
        launches: &[LaunchConfig],
    ) -> bool {
        match (&self.kind, launches.get(idx as usize)) {
            (Some(TrackKind::Thread(t)), Some(l)) => {
                let at = self.placement;
                put_launch(&mut self.own, ts, end.saturating_sub(ts), t, at, op, l);
                true
            }
            _ => false,
        }
    }

    /// A CUDA call that begins at `ts` and ends at `end` with no slice opened in between:
    /// what [`Self::push`] then [`Self::end_top_own`] do, without the stacks.
    #[inline(always)]
    pub fn call_own(&mut self, ts: u64, end: u64, p: &CudaPrep) -> bool {
        match &self.kind {
            Some(TrackKind::Thread(t)) => {
                put_cuda(
                    &mut self.own,
                    ts,
                    end.saturating_sub(ts),
                    t,
                    self.placement,
                    p,
                );
                true
            }
            _ => false,
        }
    }

    /// [`Self::end_top`] into the track's own slot, [`Self::own`].
    #[inline(always)]
    pub fn end_top_own(
        &mut self,
        end: u64,
        launches: &[LaunchConfig],
        names: &FastMap<&'static str, EventName>,
    ) -> bool {
        end_top(self, end, launches, names, Slot::Own)
    }
}

/// Where [`end_top`] writes.
enum Slot<'a> {
    Given(&'a mut ReadRecord),
    Own,
}

#[inline(always)]
fn end_top(
    track: &mut Track,
    end: u64,
    launches: &[LaunchConfig],
    names: &FastMap<&'static str, EventName>,
    slot: Slot<'_>,
) -> bool {
    let Track {
        kind,
        placement,
        open,
        bodies,
        own,
        ..
    } = track;
    let slot = match slot {
        Slot::Given(s) => s,
        Slot::Own => own,
    };
    let Some(o) = open.pop() else {
        return false;
    };
    let dur = end.saturating_sub(o.ts);
    match o.what {
        What::Launch { op, idx } => match (kind, launches.get(idx as usize)) {
            (Some(TrackKind::Thread(t)), Some(l)) => {
                put_launch(slot, o.ts, dur, t, *placement, op, l);
                true
            }
            _ => false,
        },
        What::Body => {
            let Some(body) = bodies.last_mut() else {
                return false;
            };
            let kind = kind.as_ref();
            let done = match (kind, body) {
                (Some(TrackKind::Thread(t)), OpenBody::Cuda(p)) => {
                    put_cuda(slot, o.ts, dur, t, *placement, p);
                    true
                }
                (Some(TrackKind::OffCpu(t)), OpenBody::OffCpu(p)) => {
                    put_off_cpu(slot, o.ts, dur, t, *placement, p);
                    true
                }
                (_, OpenBody::General { name, args }) => {
                    general(kind, *placement, names, (o.ts, end), name, args, slot)
                }
                (Some(TrackKind::SpanLane(scope)), OpenBody::Annotation(span)) => {
                    let (record, start_time) = &mut **span;
                    let mut record = std::mem::take(record);
                    record.scope = annotations::scoped(*scope, *start_time);
                    record.end_ns = Some(end);
                    *slot = ReadRecord::Annotation(record);
                    true
                }
                _ => false,
            };
            bodies.truncate(bodies.len() - 1);
            done
        }
    }
}

/// A slice the general path kept by name: its record by the track's kind.
#[cold]
fn general(
    kind: Option<&TrackKind>,
    at: Placement,
    names: &FastMap<&'static str, EventName>,
    (ts, end): (u64, u64),
    name: &str,
    args: &[(Arc<str>, Val)],
    slot: &mut ReadRecord,
) -> bool {
    let duration_ns = end.saturating_sub(ts);
    match kind {
        Some(TrackKind::Thread(t)) => {
            let op = match names.get(name).copied() {
                Some(EventName::Op(op)) => op,
                // A launch named by its kernel: the op is an argument.
                _ => match plan::op_argument(&ListArgs(args)) {
                    Some(op) => op,
                    None => return false,
                },
            };
            put_cuda(
                slot,
                ts,
                duration_ns,
                t,
                at,
                &CudaPrep::new(op, &ListArgs(args)),
            );
        }
        Some(TrackKind::OffCpu(t)) => {
            // Any other name on an off-CPU track reads as blocked (as `Plan::of` does).
            let reason = match names.get(name) {
                Some(EventName::OffCpu(r)) => *r,
                _ => OffCpuReason::Blocked,
            };
            put_off_cpu(
                slot,
                ts,
                duration_ns,
                t,
                at,
                &OffPrep::new(reason, &ListArgs(args)),
            );
        }
        Some(TrackKind::SpanLane(scope)) => {
            *slot = ReadRecord::Annotation(annotation(*scope, ts, Some(end), args));
        }
        Some(TrackKind::Nvtx(t, domain)) => {
            *slot = ReadRecord::Nvtx(nvtx::record(
                NvtxKind::PushPop,
                (t.pid, t.tid),
                domain.as_deref(),
                (ts, end),
                name,
                args,
            ));
        }
        Some(TrackKind::NvtxLane(pid)) => {
            *slot = ReadRecord::Nvtx(nvtx::record(
                NvtxKind::StartEnd,
                (*pid, 0),
                None,
                (ts, end),
                name,
                args,
            ));
        }
        Some(TrackKind::State(scope, key)) => {
            let value = vocab::state_value(name, key).unwrap_or("");
            *slot = ReadRecord::LabelState(LabelInterval {
                scope_pid: *scope,
                key: key.clone(),
                value: value.to_owned(),
                start_ns: ts,
                end_ns: end,
                provenance_uid: u64_of(args, ArgKey::ProvenanceUid).unwrap_or(0) as u32,
                provenance_pid: u64_of(args, ArgKey::ProvenancePid).map(|p| p as u32),
                continued: find(args, ArgKey::Continued).is_some(),
            });
        }
        _ => return false,
    }
    true
}

/// The thread into a record's slot; the name's reference count is touched only when the slot
/// held another thread's name.
#[inline(always)]
fn put_thread(dst: &mut ThreadRef, t: &ThreadRef) {
    dst.pid = t.pid;
    dst.tid = t.tid;
    if !Arc::ptr_eq(&dst.name, &t.name) {
        dst.name = t.name.clone();
    }
}

/// Writes a launch into `slot`, in place when it already holds a CUDA call.
#[inline(always)]
fn put_launch(
    slot: &mut ReadRecord,
    ts: u64,
    dur: u64,
    t: &ThreadRef,
    at: Placement,
    op: CudaOp,
    l: &LaunchConfig,
) {
    let args = CudaArgs::Launch {
        func: l.func,
        grid: l.grid,
        block: l.block,
        shared_mem: l.shared_mem,
        stream: l.stream,
    };
    if let ReadRecord::Cuda(c) = slot {
        c.ts_ns = ts;
        c.duration_ns = dur;
        put_thread(&mut c.thread, t);
        c.op = op;
        c.ret = 0;
        c.args = args;
        c.detail = CallDetail::default();
        c.clamped_from_ns = None;
        c.cpu = at.cpu;
        c.cgroup_id = at.cgroup_id;
        return;
    }
    *slot = ReadRecord::Cuda(CudaCallRecord {
        detail: Default::default(),
        ts_ns: ts,
        duration_ns: dur,
        thread: t.clone(),
        op,
        ret: 0,
        args,
        clamped_from_ns: None,
        cpu: at.cpu,
        cgroup_id: at.cgroup_id,
    });
}

/// Writes a CUDA call into `slot`, in place when it already holds one.
#[inline(always)]
pub(super) fn put_cuda(
    slot: &mut ReadRecord,
    ts: u64,
    dur: u64,
    t: &ThreadRef,
    at: Placement,
    p: &CudaPrep,
) {
    if let ReadRecord::Cuda(c) = slot {
        c.ts_ns = ts;
        c.duration_ns = dur;
        put_thread(&mut c.thread, t);
        c.op = p.op;
        c.ret = p.ret;
        c.args = p.args.clone();
        c.detail = p.detail.clone();
        c.clamped_from_ns = p.clamped;
        c.cpu = at.cpu;
        c.cgroup_id = at.cgroup_id;
        return;
    }
    *slot = ReadRecord::Cuda(CudaCallRecord {
        detail: p.detail.clone(),
        ts_ns: ts,
        duration_ns: dur,
        thread: t.clone(),
        op: p.op,
        ret: p.ret,
        args: p.args.clone(),
        clamped_from_ns: p.clamped,
        cpu: at.cpu,
        cgroup_id: at.cgroup_id,
    });
}

fn put_off_cpu(
    slot: &mut ReadRecord,
    ts: u64,
    dur: u64,
    t: &ThreadRef,
    at: Placement,
    p: &OffPrep,
) {
    let next_comm = p.next_comm.as_deref().unwrap_or("");
    if let ReadRecord::OffCpu(o) = slot {
        o.ts_ns = ts;
        o.duration_ns = dur;
        put_thread(&mut o.thread, t);
        o.reason = p.reason;
        o.prev_state = p.prev_state;
        o.next_tid = p.next_tid;
        if o.next_comm != next_comm {
            o.next_comm.clear();
            o.next_comm.push_str(next_comm);
        }
        o.cpu = p.cpu;
        o.cgroup_id = at.cgroup_id;
        o.clamped_from_ns = p.clamped;
        return;
    }
    *slot = ReadRecord::OffCpu(OffCpuRecord {
        ts_ns: ts,
        duration_ns: dur,
        thread: t.clone(),
        reason: p.reason,
        prev_state: p.prev_state,
        next_tid: p.next_tid,
        next_comm: next_comm.to_owned(),
        cpu: p.cpu,
        cgroup_id: at.cgroup_id,
        clamped_from_ns: p.clamped,
    });
}
