//! Encoding of probe events: CUDA calls as slices on their thread's track (arguments as debug
//! annotations, errors in the `cuda,error` category), off-CPU intervals on the thread's
//! `off-CPU` child track, lifecycle as instants, and device memory per process as a counter.
//!
//! These are the frequent records, so they are encoded straight into the chunk buffer
//! (`encode.rs`): no per-event allocation, one hash lookup for a launch's configuration, and
//! the thread's track from the per-tid cache.

use super::encode::{self, EventTail};
use super::error::Result;
use super::interner::{Interner, StrKey};
use super::recorder::Recorder;
use super::slices::{Begun, Placement};
use super::tracks::{Hint, ThreadTrack, TrackKey};
use crate::model::AnnotationRecord;
use crate::model::LaunchConfig;
use crate::model::{
    CudaArgs, CudaCall, Event, OffCpu, ProcessEvent, ProcessOp, Task, call_error_name, call_failed,
};
use crate::proto::event_type;
use crate::vocab::{ArgKey, Category, EventName, ProcessLabel};
use crate::vocab::{launch_text, nccl_text};

/// Where a task's event says it ran.
#[inline(always)]
fn placement(task: &Task) -> Placement {
    Placement {
        cpu: task.cpu,
        cgroup_id: task.cgroup_id,
    }
}

/// A string value through the sequence's interning table (inline past its cap).
fn string_arg(buf: &mut Vec<u8>, interner: &mut Interner, arg: ArgKey, key: StrKey<'_>) {
    match interner.string(key.clone()) {
        Some(iid) => encode::arg_string_iid(buf, arg.iid(), iid),
        None => encode::arg_string(buf, arg.iid(), key.render().as_bytes()),
    }
}

/// The debug annotations of a CUDA call's arguments.
fn cuda_args(buf: &mut Vec<u8>, interner: &mut Interner, a: &CudaArgs) {
    let stream = |buf: &mut Vec<u8>, interner: &mut Interner, s: Option<u64>| {
        if let Some(s) = s {
            string_arg(buf, interner, ArgKey::Stream, StrKey::Ptr(s));
        }
    };
    match *a {
        CudaArgs::Launch {
            func,
            grid,
            block,
            shared_mem,
            stream,
        } => {
            let l = LaunchConfig {
                func,
                grid,
                block,
                shared_mem,
                stream,
            };
            match interner.launch(&l) {
                Some(iid) => encode::arg_string_iid(buf, ArgKey::Launch.iid(), iid),
                None => encode::arg_string(buf, ArgKey::Launch.iid(), launch_text(&l).as_bytes()),
            }
        }
        CudaArgs::Alloc {
            size,
            ptr,
            stream: s,
        } => {
            encode::arg_uint(buf, ArgKey::Size.iid(), size);
            if let Some(p) = ptr {
                encode::arg_pointer(buf, ArgKey::Ptr.iid(), p);
            }
            stream(buf, interner, s);
        }
        CudaArgs::Free {
            ptr,
            size,
            stream: s,
        } => {
            encode::arg_pointer(buf, ArgKey::Ptr.iid(), ptr);
            if let Some(size) = size {
                encode::arg_uint(buf, ArgKey::Size.iid(), size);
            }
            stream(buf, interner, s);
        }
        CudaArgs::HostAlloc { size, ptr } => {
            encode::arg_uint(buf, ArgKey::Size.iid(), size);
            if let Some(p) = ptr {
                encode::arg_pointer(buf, ArgKey::Ptr.iid(), p);
            }
        }
        CudaArgs::HostFree { ptr } | CudaArgs::HostUnregister { ptr } => {
            encode::arg_pointer(buf, ArgKey::Ptr.iid(), ptr)
        }
        CudaArgs::PhysicalCreate {
            size,
            handle,
            location,
        } => {
            encode::arg_uint(buf, ArgKey::Size.iid(), size);
            if let Some(h) = handle {
                encode::arg_pointer(buf, ArgKey::Handle.iid(), h);
            }
            encode::arg_string(buf, ArgKey::Location.iid(), location.text().as_bytes());
        }
        CudaArgs::PhysicalHandle { handle, ptr } => {
            if let Some(h) = handle {
                encode::arg_pointer(buf, ArgKey::Handle.iid(), h);
            }
            if let Some(p) = ptr {
                encode::arg_pointer(buf, ArgKey::Ptr.iid(), p);
            }
        }
        CudaArgs::AddressRange { ptr, size, handle } => {
            if let Some(p) = ptr {
                encode::arg_pointer(buf, ArgKey::Ptr.iid(), p);
            }
            encode::arg_uint(buf, ArgKey::Size.iid(), size);
            if let Some(h) = handle {
                encode::arg_pointer(buf, ArgKey::Handle.iid(), h);
            }
        }
        CudaArgs::HostRegister { ptr, size, flags } => {
            encode::arg_pointer(buf, ArgKey::Ptr.iid(), ptr);
            encode::arg_uint(buf, ArgKey::Size.iid(), size);
            encode::arg_uint(buf, ArgKey::Flags.iid(), u64::from(flags));
        }
        CudaArgs::GraphLaunch {
            graph_exec,
            stream: s,
            captured,
        } => {
            string_arg(buf, interner, ArgKey::GraphExec, StrKey::Ptr(graph_exec));
            stream(buf, interner, Some(s));
            if let Some(c) = captured {
                encode::arg_uint(buf, ArgKey::KernelNodes.iid(), u64::from(c.kernel_nodes));
                string_arg(buf, interner, ArgKey::CaptureStream, StrKey::Ptr(c.stream));
            }
        }
        CudaArgs::CaptureBegin { stream: s, mode } => {
            stream(buf, interner, Some(s));
            if let Some(mode) = mode {
                encode::arg_uint(buf, ArgKey::CaptureMode.iid(), u64::from(mode));
            }
        }
        CudaArgs::CaptureEnd {
            stream: s,
            graph,
            kernel_nodes,
        } => {
            stream(buf, interner, Some(s));
            if let Some(g) = graph {
                string_arg(buf, interner, ArgKey::Graph, StrKey::Ptr(g));
            }
            if let Some(n) = kernel_nodes {
                encode::arg_uint(buf, ArgKey::KernelNodes.iid(), u64::from(n));
            }
        }
        CudaArgs::GraphInstantiate { graph, graph_exec } => {
            string_arg(buf, interner, ArgKey::Graph, StrKey::Ptr(graph));
            if let Some(x) = graph_exec {
                string_arg(buf, interner, ArgKey::GraphExec, StrKey::Ptr(x));
            }
        }
        CudaArgs::ModuleLoad { module } => {
            if let Some(m) = module {
                string_arg(buf, interner, ArgKey::Module, StrKey::Ptr(m));
            }
        }
        CudaArgs::GetFunction { owner, function } => {
            string_arg(buf, interner, ArgKey::Owner, StrKey::Ptr(owner));
            if let Some(f) = function {
                string_arg(buf, interner, ArgKey::Function, StrKey::Ptr(f));
            }
        }
        CudaArgs::Memcpy {
            count,
            kind,
            stream: s,
            width_height,
            host_ptr,
        } => {
            encode::arg_uint(buf, ArgKey::Count.iid(), count);
            let k = kind.text();
            string_arg(buf, interner, ArgKey::Kind, StrKey::Text(&k));
            if let Some((w, h)) = width_height {
                encode::arg_uint(buf, ArgKey::Width.iid(), w);
                encode::arg_uint(buf, ArgKey::Height.iid(), h);
            }
            stream(buf, interner, s);
            // Written only when known, so copies without a host side cost no byte more.
            if let Some(p) = host_ptr {
                encode::arg_pointer(buf, ArgKey::HostPtr.iid(), p);
            }
        }
        CudaArgs::MemcpyPeer {
            count,
            dst_device,
            src_device,
            stream: s,
        } => {
            encode::arg_uint(buf, ArgKey::Count.iid(), count);
            encode::arg_int(buf, ArgKey::DstDevice.iid(), i64::from(dst_device));
            encode::arg_int(buf, ArgKey::SrcDevice.iid(), i64::from(src_device));
            stream(buf, interner, s);
        }
        CudaArgs::Memset { count, stream: s } => {
            encode::arg_uint(buf, ArgKey::Count.iid(), count);
            stream(buf, interner, s);
        }
        CudaArgs::Sync { stream: s, event } => {
            stream(buf, interner, s);
            if let Some(ev) = event {
                string_arg(buf, interner, ArgKey::Event, StrKey::Ptr(ev));
            }
        }
        CudaArgs::Collective {
            count,
            stream: s,
            seq,
            ..
        } => {
            encode::arg_uint(buf, ArgKey::Count.iid(), count);
            nccl_arg(buf, interner, a);
            stream(buf, interner, Some(s));
            if let Some(n) = seq {
                encode::arg_uint(buf, ArgKey::Seq.iid(), n);
            }
        }
        CudaArgs::PointToPoint {
            count, stream: s, ..
        } => {
            encode::arg_uint(buf, ArgKey::Count.iid(), count);
            nccl_arg(buf, interner, a);
            stream(buf, interner, Some(s));
        }
        CudaArgs::CommCreate { .. } | CudaArgs::CommEnd { .. } => nccl_arg(buf, interner, a),
        CudaArgs::Group => {}
    }
}

/// The `nccl` argument of an NCCL call: interned, since it repeats for every call of one kind
/// on one communicator.
fn nccl_arg(buf: &mut Vec<u8>, interner: &mut Interner, a: &CudaArgs) {
    if let Some(text) = nccl_text(a) {
        string_arg(buf, interner, ArgKey::Nccl, StrKey::Text(&text));
    }
}

/// The debug annotations of a call's context (kernel, export, parent). Returns the interned
/// name of a launch's slice when it is named by its kernel (so the UI reads like Nsight's);
/// the op then goes into an `op` argument.
fn call_detail(buf: &mut Vec<u8>, interner: &mut Interner, c: &CudaCall) -> Option<u64> {
    let d = &c.detail;
    let mut named = None;
    if let Some(k) = &d.kernel {
        string_arg(buf, interner, ArgKey::Kernel, StrKey::Text(&k.demangled));
        string_arg(
            buf,
            interner,
            ArgKey::KernelMangled,
            StrKey::Text(&k.mangled),
        );
        let source = k.source.as_str();
        string_arg(buf, interner, ArgKey::KernelSource, StrKey::Text(source));
        named = interner.dynamic_name(&k.demangled);
        if named.is_some() {
            string_arg(buf, interner, ArgKey::Op, StrKey::Text(c.op.name()));
        }
    }
    if let Some(symbol) = d.symbol {
        string_arg(buf, interner, ArgKey::Symbol, StrKey::Text(symbol));
    }
    if let Some(parent) = d.parent {
        string_arg(buf, interner, ArgKey::Parent, StrKey::Text(parent.name()));
    }
    named
}

impl Recorder {
    /// The uuid of a task's thread or off-CPU track: the per-tid cache, else the registry
    /// (which describes the track first if this file has not).
    #[inline(always)]
    fn thread_track(&mut self, kind: ThreadTrack, task: &Task) -> Result<u64> {
        match self.tracks.cached(kind, task.tid, &task.comm) {
            Some(uuid) => Ok(uuid),
            None => self.thread_track_slow(kind, task),
        }
    }

    #[cold]
    fn thread_track_slow(&mut self, kind: ThreadTrack, task: &Task) -> Result<u64> {
        let key = match kind {
            ThreadTrack::Thread => TrackKey::Thread(task.tid),
            ThreadTrack::OffCpu => TrackKey::OffCpu(task.tid),
        };
        let comm = task.comm.as_str();
        self.tracks.rename_thread(task.tid, &comm);
        let uuid = self.track(
            &key,
            Hint {
                pid: task.pid,
                comm: &comm,
            },
        )?;
        self.tracks.cache_name(kind, task.tid, &task.comm);
        Ok(uuid)
    }

    /// Registers `[ts, ts + duration]` on `track` for a thread that ran `at`: queued on the
    /// main sequence (possibly clamped to nest), written right away on the late one.
    #[inline(always)]
    fn begin_slice(
        &mut self,
        late: bool,
        track: u64,
        ts: u64,
        duration: u64,
        at: Placement,
    ) -> Begun {
        let end = ts.saturating_add(duration);
        if late {
            Begun {
                end: end.max(ts),
                clamped_from_ns: None,
            }
        } else {
            self.open_slice(track, ts, end, at)
        }
    }

    pub(super) fn write_event(&mut self, e: &Event, late: bool) -> Result<()> {
        match e {
            Event::Cuda(c) => self.write_cuda(c, late),
            Event::OffCpu(o) => self.write_off_cpu(o, late),
            Event::Process(p) => self.write_process(p, late),
        }
    }

    #[inline]
    fn write_cuda(&mut self, c: &CudaCall, late: bool) -> Result<()> {
        let track = self.thread_track(ThreadTrack::Thread, &c.task)?;
        let at = placement(&c.task);
        let begun = self.begin_slice(late, track, c.ts_ns, c.duration_ns, at);
        let e = self.event_open(late, c.ts_ns)?;
        let (buf, seq) = self.event_args(&e);
        if call_failed(c.op, c.ret) {
            encode::category(buf, Category::CudaError.iid());
        }
        cuda_args(buf, &mut seq.interner, &c.args);
        if let Some(flow) = c.args.collective_flow() {
            encode::flow_id(buf, flow);
        }
        let kernel_name = call_detail(buf, &mut seq.interner, c);
        if c.ret != 0 {
            encode::arg_int(buf, ArgKey::Ret.iid(), i64::from(c.ret));
            if let Some(name) = call_error_name(c.op, c.ret) {
                string_arg(buf, &mut seq.interner, ArgKey::Error, StrKey::Text(name));
            }
        }
        if let Some(d) = begun.clamped_from_ns {
            encode::arg_uint(buf, ArgKey::ClampedFromNs.iid(), d);
        }
        let name = kernel_name.unwrap_or_else(|| seq.interner.name(EventName::Op(c.op)));
        self.event_close(e, &EventTail::named(event_type::SLICE_BEGIN, name, track))?;
        self.marks.holds(c.ts_ns, begun.end);
        if begun.clamped_from_ns.is_some() {
            self.tap_clamp(begun.end.saturating_sub(c.ts_ns));
        }
        if late {
            self.late_end(track, begun.end, at)?;
        }
        if matches!(c.args, CudaArgs::Alloc { .. } | CudaArgs::Free { .. }) {
            self.track_device_memory(c, late)?;
        }
        Ok(())
    }

    fn track_device_memory(&mut self, c: &CudaCall, late: bool) -> Result<()> {
        if c.ret != 0 {
            return Ok(());
        }
        let delta = match c.args {
            CudaArgs::Alloc { size, .. } => i64::try_from(size).unwrap_or(i64::MAX),
            CudaArgs::Free {
                size: Some(size), ..
            } => -i64::try_from(size).unwrap_or(i64::MAX),
            _ => return Ok(()),
        };
        let total = {
            let t = self.device_memory.entry(c.task.pid).or_insert(0);
            *t = t.saturating_add(delta).max(0);
            *t
        };
        let comm = c.task.comm.as_str();
        let track = self.track(
            &TrackKey::DeviceMemory(c.task.pid),
            Hint {
                pid: c.task.pid,
                comm: &comm,
            },
        )?;
        self.counter(late, track, c.ts_ns, total)?;
        self.marks.holds(c.ts_ns, c.ts_ns);
        Ok(())
    }

    /// The end of a late slice, right after its begin: no restart of the sequences may come
    /// between the two (a reader starting at it would see the end without its begin).
    fn late_end(&mut self, track: u64, end: u64, at: Placement) -> Result<()> {
        self.marks.hold = true;
        let written = self.late_slice_end(track, end, at);
        self.marks.hold = false;
        written
    }

    fn write_off_cpu(&mut self, o: &OffCpu, late: bool) -> Result<()> {
        let track = self.thread_track(ThreadTrack::OffCpu, &o.task)?;
        // The CPU is an argument of every interval (where the thread ran again): the ends
        // state the cgroup alone.
        let at = Placement {
            cpu: 0,
            ..placement(&o.task)
        };
        let begun = self.begin_slice(late, track, o.ts_ns, o.duration_ns, at);
        let e = self.event_open(late, o.ts_ns)?;
        let (buf, seq) = self.event_args(&e);
        encode::category(buf, Category::Sched.iid());
        encode::arg_uint(buf, ArgKey::NextTid.iid(), u64::from(o.next_tid));
        let next = o.next_comm.as_str();
        string_arg(
            buf,
            &mut seq.interner,
            ArgKey::NextComm,
            StrKey::Text(&next),
        );
        encode::arg_int(buf, ArgKey::PrevState.iid(), o.prev_state);
        encode::arg_uint(buf, ArgKey::Cpu.iid(), u64::from(o.task.cpu));
        if let Some(d) = begun.clamped_from_ns {
            encode::arg_uint(buf, ArgKey::ClampedFromNs.iid(), d);
        }
        let name = seq.interner.name(EventName::OffCpu(o.reason));
        self.event_close(e, &EventTail::named(event_type::SLICE_BEGIN, name, track))?;
        self.marks.holds(o.ts_ns, begun.end);
        if begun.clamped_from_ns.is_some() {
            self.tap_clamp(begun.end.saturating_sub(o.ts_ns));
        }
        if late {
            self.late_end(track, begun.end, at)?;
        }
        Ok(())
    }

    /// A process-scoped `rank` label also names the process in the UI (`rank 3` beside its
    /// name, Perfetto's `process_labels`); its descriptor is written again right away.
    pub(super) fn label_process(&mut self, a: &AnnotationRecord) -> Result<()> {
        let Some(scope) = a.scope else {
            return Ok(());
        };
        let rank = ProcessLabel::Rank.text();
        let Some((_, value)) = a.labels.iter().find(|(k, _)| k == rank) else {
            return Ok(());
        };
        self.tracks
            .set_process_labels(scope.pid, vec![format!("{rank} {value}")]);
        let hint = Hint {
            pid: scope.pid,
            comm: "",
        };
        self.track(&TrackKey::Process(scope.pid), hint).map(|_| ())
    }

    fn write_process(&mut self, p: &ProcessEvent, late: bool) -> Result<()> {
        if p.op == ProcessOp::Exec {
            // New image, new name: describe the process and thread again before the instant.
            let comm = p.task.comm.as_str();
            self.tracks.refresh_process(p.task.pid, &comm);
        }
        let track = self.thread_track(ThreadTrack::Thread, &p.task)?;
        let state = self.slices.state_now(track, placement(&p.task));
        let e = self.event_open(late, p.ts_ns)?;
        let (buf, seq) = self.event_args(&e);
        encode::category(buf, Category::Process.iid());
        if let Some(at) = state {
            encode::placement(buf, at);
        }
        encode::arg_uint(buf, ArgKey::OtherPid.iid(), u64::from(p.other_pid));
        encode::arg_bool(buf, ArgKey::CloneFlagsKnown.iid(), p.clone_flags_known);
        if !p.text.is_empty() {
            encode::arg_string(buf, ArgKey::Text.iid(), p.text.as_bytes());
        }
        let name = seq.interner.name(EventName::Lifecycle(p.op));
        self.event_close(e, &EventTail::named(event_type::INSTANT, name, track))?;
        self.marks.holds(p.ts_ns, p.ts_ns);
        match p.op {
            ProcessOp::Exit => {
                let at = if late { self.main.last_ts() } else { p.ts_ns };
                self.with_labels(|l, r| l.end_scope(r, p.task.pid, at))?;
                self.tracks.forget_process(p.task.pid);
                self.device_memory.remove(&p.task.pid);
            }
            ProcessOp::ThreadExit => self.tracks.forget_thread(p.task.tid),
            _ => {}
        }
        Ok(())
    }
}
