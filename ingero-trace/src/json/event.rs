//! [`EventView`]: a CUDA call, an off-CPU interval or a lifecycle event, borrowed from a live
//! [`Event`] or a recorded [`ReadRecord`], and its keys.

use std::borrow::Cow;

use ingero_ebpf::{CudaOp, OffCpuReason};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::Hex;
use crate::model::{
    CallDetail, Communicator, CudaArgs, Event, NcclType, ProcessOp, ReadRecord, call_error_name,
};
use crate::vocab::ArgKey;

/// What kind of event, with what only that kind has.
enum What<'a> {
    Cuda {
        op: CudaOp,
        ret: i32,
        args: &'a CudaArgs,
        detail: &'a CallDetail,
    },
    OffCpu {
        reason: OffCpuReason,
        prev_state: i64,
        next_tid: u32,
        next_comm: Cow<'a, str>,
    },
    Process {
        op: ProcessOp,
        other_pid: u32,
        clone_flags_known: bool,
        text: &'a str,
    },
}

/// One event's line, from either side of a recording.
pub struct EventView<'a> {
    ts_ns: u64,
    duration_ns: u64,
    pid: u32,
    tid: u32,
    comm: Cow<'a, str>,
    cgroup_id: u64,
    cpu: u32,
    what: What<'a>,
}

impl<'a> EventView<'a> {
    /// A live event, as the probes reported it.
    pub fn of_event(e: &'a Event) -> EventView<'a> {
        let t = e.task();
        let (duration_ns, what) = match e {
            Event::Cuda(c) => (
                c.duration_ns,
                What::Cuda {
                    op: c.op,
                    ret: c.ret,
                    args: &c.args,
                    detail: &c.detail,
                },
            ),
            Event::OffCpu(o) => (
                o.duration_ns,
                What::OffCpu {
                    reason: o.reason,
                    prev_state: o.prev_state,
                    next_tid: o.next_tid,
                    next_comm: o.next_comm.as_str(),
                },
            ),
            Event::Process(p) => (
                0,
                What::Process {
                    op: p.op,
                    other_pid: p.other_pid,
                    clone_flags_known: p.clone_flags_known,
                    text: &p.text,
                },
            ),
        };
        EventView {
            ts_ns: e.ts_ns(),
            duration_ns,
            pid: t.pid,
            tid: t.tid,
            comm: t.comm.as_str(),
            cgroup_id: t.cgroup_id,
            cpu: t.cpu,
            what,
        }
    }

    /// A recorded event (with its real duration where the file shortened its slice to
    /// nest); `None` for records that are not events.
    pub fn of_record(r: &'a ReadRecord) -> Option<EventView<'a>> {
        let (ts_ns, duration_ns, thread, cgroup_id, cpu, what) = match r {
            ReadRecord::Cuda(c) => (
                c.ts_ns,
                c.real_duration_ns(),
                &c.thread,
                c.cgroup_id,
                c.cpu,
                What::Cuda {
                    op: c.op,
                    ret: c.ret,
                    args: &c.args,
                    detail: &c.detail,
                },
            ),
            ReadRecord::OffCpu(o) => (
                o.ts_ns,
                o.real_duration_ns(),
                &o.thread,
                o.cgroup_id,
                o.cpu,
                What::OffCpu {
                    reason: o.reason,
                    prev_state: o.prev_state,
                    next_tid: o.next_tid,
                    next_comm: Cow::Borrowed(&o.next_comm),
                },
            ),
            ReadRecord::Lifecycle(l) => (
                l.ts_ns,
                0,
                &l.thread,
                l.cgroup_id,
                l.cpu,
                What::Process {
                    op: l.op,
                    other_pid: l.other_pid,
                    clone_flags_known: l.clone_flags_known,
                    text: &l.text,
                },
            ),
            _ => return None,
        };
        Some(EventView {
            ts_ns,
            duration_ns,
            pid: thread.pid,
            tid: thread.tid,
            comm: Cow::Borrowed(&thread.name),
            cgroup_id,
            cpu,
            what,
        })
    }

    /// The `type` key: `cuda`, `sched` or `process`.
    pub fn kind(&self) -> &'static str {
        match self.what {
            What::Cuda { .. } => "cuda",
            What::OffCpu { .. } => "sched",
            What::Process { .. } => "process",
        }
    }

    /// The `op` key: the CUDA function, `off_cpu`, or the lifecycle op.
    pub fn op(&self) -> &'static str {
        match self.what {
            What::Cuda { op, .. } => op.name(),
            What::OffCpu { .. } => "off_cpu",
            What::Process { op, .. } => op.text(),
        }
    }

    /// Writes the keys into `map`, in the documented order.
    pub(super) fn entries<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        let ret = match self.what {
            What::Cuda { ret, .. } => Some(ret),
            _ => None,
        };
        map.serialize_entry("type", self.kind())?;
        map.serialize_entry("op", self.op())?;
        map.serialize_entry("ts_ns", &self.ts_ns)?;
        map.serialize_entry("duration_ns", &self.duration_ns)?;
        map.serialize_entry("pid", &self.pid)?;
        map.serialize_entry("tid", &self.tid)?;
        map.serialize_entry("comm", &self.comm)?;
        map.serialize_entry("cgroup_id", &self.cgroup_id)?;
        map.serialize_entry("cpu", &self.cpu)?;
        map.serialize_entry("ret", &ret)?;
        match &self.what {
            What::Cuda {
                op,
                args,
                ret,
                detail,
            } => map.serialize_entry("args", &CudaArgsView(args, *ret, detail, *op)),
            What::OffCpu {
                reason,
                prev_state,
                next_tid,
                next_comm,
            } => map.serialize_entry(
                "args",
                &OffCpuArgs {
                    reason: reason.name(),
                    prev_state: *prev_state,
                    next_tid: *next_tid,
                    next_comm,
                },
            ),
            What::Process {
                op,
                other_pid,
                clone_flags_known,
                text,
            } => map.serialize_entry(
                "args",
                &ProcessArgs {
                    op: *op,
                    other_pid: *other_pid,
                    clone_flags_known: *clone_flags_known,
                    text,
                },
            ),
        }
    }
}

/// Writes map entries, skipping those whose value is `None`.
struct Entries<'a, M: SerializeMap>(&'a mut M);

impl<M: SerializeMap> Entries<'_, M> {
    fn put<V: Serialize + ?Sized>(&mut self, key: &'static str, value: &V) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }

    fn opt_hex(&mut self, key: &'static str, value: Option<u64>) -> Result<(), M::Error> {
        match value {
            Some(v) => self.0.serialize_entry(key, &Hex(v)),
            None => Ok(()),
        }
    }

    /// An NCCL call's elements, their type and the bytes they make (absent for a type NCCL
    /// does not define).
    fn transfer(
        &mut self,
        count: u64,
        datatype: NcclType,
        bytes: Option<u64>,
    ) -> Result<(), M::Error> {
        self.put("count", &count)?;
        self.put("datatype", &datatype.text())?;
        match bytes {
            Some(b) => self.put("bytes", &b),
            None => Ok(()),
        }
    }

    /// The communicator an NCCL call ran on or made (`comm` is null when a creation failed),
    /// with what the agent knew of it: `comm_id` (16 hex digits, the same on every rank),
    /// `rank`, `nranks`.
    fn communicator(&mut self, on: &Communicator) -> Result<(), M::Error> {
        self.put("comm", &(on.comm != 0).then_some(Hex(on.comm)))?;
        if let Some(id) = on.id {
            self.put("comm_id", &format!("{id:016x}"))?;
        }
        if let Some(rank) = on.rank {
            self.put("rank", &rank)?;
        }
        if let Some(n) = on.nranks {
            self.put("nranks", &n)?;
        }
        Ok(())
    }
}

/// A call's arguments by op, its context (kernel, export, parent), and the error's name for a
/// non-zero `ret` with a known name (which depends on the op's library).
struct CudaArgsView<'a>(&'a CudaArgs, i32, &'a CallDetail, CudaOp);

impl Serialize for CudaArgsView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let mut m = Entries(&mut map);
        match self.0 {
            CudaArgs::Alloc { size, ptr, stream } => {
                m.put("size", size)?;
                m.put("ptr", &ptr.map(Hex))?;
                m.opt_hex("stream", *stream)?;
            }
            CudaArgs::Free { ptr, size, stream } => {
                m.put("ptr", &Hex(*ptr))?;
                m.put("size", size)?;
                m.opt_hex("stream", *stream)?;
            }
            CudaArgs::HostAlloc { size, ptr } => {
                m.put("size", size)?;
                m.put("ptr", &ptr.map(Hex))?;
            }
            CudaArgs::HostFree { ptr } | CudaArgs::HostUnregister { ptr } => {
                m.put("ptr", &Hex(*ptr))?
            }
            CudaArgs::PhysicalCreate {
                size,
                handle,
                location,
            } => {
                m.put("size", size)?;
                m.put(ArgKey::Handle.text(), &handle.map(Hex))?;
                m.put(ArgKey::Location.text(), &location.text())?;
            }
            CudaArgs::PhysicalHandle { handle, ptr } => {
                m.put(ArgKey::Handle.text(), &handle.map(Hex))?;
                m.opt_hex("ptr", *ptr)?;
            }
            CudaArgs::AddressRange { ptr, size, handle } => {
                m.put("ptr", &ptr.map(Hex))?;
                m.put("size", size)?;
                m.opt_hex(ArgKey::Handle.text(), *handle)?;
            }
            CudaArgs::HostRegister { ptr, size, flags } => {
                m.put("ptr", &Hex(*ptr))?;
                m.put("size", size)?;
                m.put(ArgKey::Flags.text(), flags)?;
            }
            CudaArgs::Launch {
                func,
                grid,
                block,
                shared_mem,
                stream,
            } => {
                m.put("func", &Hex(*func))?;
                m.put("grid", grid)?;
                m.put("block", block)?;
                m.put("shared_mem", shared_mem)?;
                m.put("stream", &Hex(*stream))?;
            }
            CudaArgs::GraphLaunch {
                graph_exec,
                stream,
                captured,
            } => {
                m.put("graph_exec", &Hex(*graph_exec))?;
                m.put("stream", &Hex(*stream))?;
                if let Some(c) = captured {
                    m.put(ArgKey::KernelNodes.text(), &c.kernel_nodes)?;
                    m.put(ArgKey::CaptureStream.text(), &Hex(c.stream))?;
                }
            }
            CudaArgs::CaptureBegin { stream, mode } => {
                m.put("stream", &Hex(*stream))?;
                if let Some(mode) = mode {
                    m.put(ArgKey::CaptureMode.text(), mode)?;
                }
            }
            CudaArgs::CaptureEnd {
                stream,
                graph,
                kernel_nodes,
            } => {
                m.put("stream", &Hex(*stream))?;
                m.put(ArgKey::Graph.text(), &graph.map(Hex))?;
                if let Some(n) = kernel_nodes {
                    m.put(ArgKey::KernelNodes.text(), n)?;
                }
            }
            CudaArgs::GraphInstantiate { graph, graph_exec } => {
                m.put(ArgKey::Graph.text(), &Hex(*graph))?;
                m.put("graph_exec", &graph_exec.map(Hex))?;
            }
            CudaArgs::ModuleLoad { module } => m.put(ArgKey::Module.text(), &module.map(Hex))?,
            CudaArgs::GetFunction { owner, function } => {
                m.put(ArgKey::Owner.text(), &Hex(*owner))?;
                m.put(ArgKey::Function.text(), &function.map(Hex))?;
            }
            CudaArgs::Memcpy {
                count,
                kind,
                stream,
                width_height,
                host_ptr,
            } => {
                m.put("count", count)?;
                m.put("kind", kind.label())?;
                m.opt_hex("stream", *stream)?;
                if let Some((w, h)) = width_height {
                    m.put("width", w)?;
                    m.put("height", h)?;
                }
                m.opt_hex(ArgKey::HostPtr.text(), *host_ptr)?;
            }
            CudaArgs::MemcpyPeer {
                count,
                dst_device,
                src_device,
                stream,
            } => {
                m.put("count", count)?;
                m.put("dst_device", dst_device)?;
                m.put("src_device", src_device)?;
                m.opt_hex("stream", *stream)?;
            }
            CudaArgs::Memset { count, stream } => {
                m.put("count", count)?;
                m.opt_hex("stream", *stream)?;
            }
            CudaArgs::Sync { stream, event } => {
                m.opt_hex("stream", *stream)?;
                m.opt_hex("event", *event)?;
            }
            CudaArgs::Collective {
                count,
                datatype,
                red_op,
                root,
                on,
                stream,
                seq,
            } => {
                m.transfer(*count, *datatype, self.0.nccl_bytes())?;
                if let Some(op) = red_op {
                    m.put("red_op", &op.text())?;
                }
                if let Some(root) = root {
                    m.put("root", root)?;
                }
                m.communicator(on)?;
                m.put("stream", &Hex(*stream))?;
                if let Some(seq) = seq {
                    m.put(ArgKey::Seq.text(), seq)?;
                }
            }
            CudaArgs::PointToPoint {
                count,
                datatype,
                peer,
                on,
                stream,
            } => {
                m.transfer(*count, *datatype, self.0.nccl_bytes())?;
                m.put("peer", peer)?;
                m.communicator(on)?;
                m.put("stream", &Hex(*stream))?;
            }
            CudaArgs::CommCreate { made, split } => {
                m.communicator(made)?;
                if let Some(split) = split {
                    m.put("parent_comm", &Hex(split.parent))?;
                    m.put("color", &split.color)?;
                    m.put("key", &split.key)?;
                }
            }
            // Null for a NULL handle, as for the other NCCL calls.
            CudaArgs::CommEnd { comm } => m.put("comm", &(*comm != 0).then_some(Hex(*comm)))?,
            CudaArgs::Group => {}
        }
        let detail = self.2;
        if let Some(k) = &detail.kernel {
            m.put(ArgKey::Kernel.text(), &*k.demangled)?;
            m.put(ArgKey::KernelMangled.text(), &*k.mangled)?;
            m.put(ArgKey::KernelSource.text(), k.source.as_str())?;
        }
        if let Some(symbol) = detail.symbol {
            m.put(ArgKey::Symbol.text(), symbol)?;
        }
        if let Some(parent) = detail.parent {
            m.put(ArgKey::Parent.text(), parent.name())?;
        }
        if self.1 != 0 {
            if let Some(name) = call_error_name(self.3, self.1) {
                m.put("error", name)?;
            }
        }
        map.end()
    }
}

#[derive(Serialize)]
struct OffCpuArgs<'a> {
    reason: &'static str,
    prev_state: i64,
    next_tid: u32,
    next_comm: &'a str,
}

/// A lifecycle event's arguments: what `other_pid` and `text` mean depends on the op.
struct ProcessArgs<'a> {
    op: ProcessOp,
    other_pid: u32,
    clone_flags_known: bool,
    text: &'a str,
}

impl Serialize for ProcessArgs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.op {
            ProcessOp::Exec => {
                map.serialize_entry("filename", self.text)?;
                map.serialize_entry("old_pid", &self.other_pid)?;
            }
            ProcessOp::Fork | ProcessOp::ThreadStart => {
                map.serialize_entry("child_tid", &self.other_pid)?;
                map.serialize_entry("child_comm", self.text)?;
                map.serialize_entry("clone_flags_known", &self.clone_flags_known)?;
            }
            ProcessOp::Exit | ProcessOp::ThreadExit => {}
        }
        map.end()
    }
}
