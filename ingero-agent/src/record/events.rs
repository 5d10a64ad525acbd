//! Encoding of probe events: CUDA calls as slices on their thread's track (arguments as debug
//! annotations, errors in the `cuda,error` category), off-CPU intervals on the thread's
//! `off-CPU` child track, lifecycle as instants, and device memory per process as a counter.

use anyhow::Result;

use super::interner::{Arg, Cat, Name, StrKey};
use super::proto::{DebugAnnotation, TrackEvent};
use super::recorder::Recorder;
use super::tracks::{Hint, TrackKey};
use crate::decode::{
    CudaArgs, CudaCall, Event, MemcpyKind, OffCpu, ProcessEvent, ProcessOp, cuda_error_name,
};

fn uint(arg: Arg, v: u64) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(arg.iid()),
        uint_value: Some(v),
        ..Default::default()
    }
}

fn int(arg: Arg, v: i64) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(arg.iid()),
        int_value: Some(v),
        ..Default::default()
    }
}

fn pointer(arg: Arg, v: u64) -> DebugAnnotation {
    DebugAnnotation {
        name_iid: Some(arg.iid()),
        pointer_value: Some(v),
        ..Default::default()
    }
}

/// `MemcpyKind` as written: its label, or `unknown:<raw>`.
pub fn memcpy_kind_text(kind: MemcpyKind) -> String {
    match kind {
        MemcpyKind::Unknown(v) => format!("unknown:{v}"),
        k => k.label().to_owned(),
    }
}

impl Recorder {
    /// A string value through the sequence's interning table (inline past its cap).
    fn string_arg(&mut self, late: bool, arg: Arg, key: StrKey<'_>) -> DebugAnnotation {
        let seq = if late { &mut self.late } else { &mut self.main };
        match seq.interner.string(key.clone()) {
            Some(iid) => DebugAnnotation {
                name_iid: Some(arg.iid()),
                string_value_iid: Some(iid),
                ..Default::default()
            },
            None => DebugAnnotation {
                name_iid: Some(arg.iid()),
                string_value: Some(key.render()),
                ..Default::default()
            },
        }
    }

    pub(super) fn write_event(&mut self, e: &Event, late: bool) -> Result<()> {
        match e {
            Event::Cuda(c) => self.write_cuda(c, late),
            Event::OffCpu(o) => self.write_off_cpu(o, late),
            Event::Process(p) => self.write_process(p, late),
        }
    }

    fn write_cuda(&mut self, c: &CudaCall, late: bool) -> Result<()> {
        let comm = c.task.comm.as_str();
        let track = self.track(
            &TrackKey::Thread(c.task.tid),
            Hint {
                pid: c.task.pid,
                comm: &comm,
            },
        )?;
        let mut args = std::mem::take(&mut self.args);
        self.cuda_args(late, &c.args, &mut args);
        let mut category_iids = Vec::new();
        if c.ret != 0 {
            category_iids.push(Cat::CudaError.iid());
            args.push(int(Arg::Ret, i64::from(c.ret)));
            if let Some(name) = cuda_error_name(c.ret) {
                let a = self.string_arg(late, Arg::Error, StrKey::Text(name));
                args.push(a);
            }
        }
        let seq = if late { &self.late } else { &self.main };
        let te = TrackEvent {
            name_iid: Some(seq.interner.name(Name::Op(c.op))),
            category_iids,
            debug_annotations: args,
            ..Default::default()
        };
        self.slice(
            late,
            track,
            c.ts_ns,
            c.ts_ns.saturating_add(c.duration_ns),
            te,
        )?;
        self.track_device_memory(c, late)
    }

    fn cuda_args(&mut self, late: bool, a: &CudaArgs, out: &mut Vec<DebugAnnotation>) {
        let stream = |me: &mut Self, out: &mut Vec<DebugAnnotation>, s: Option<u64>| {
            if let Some(s) = s {
                out.push(me.string_arg(late, Arg::Stream, StrKey::Ptr(s)));
            }
        };
        match a {
            CudaArgs::Alloc {
                size,
                ptr,
                stream: s,
            } => {
                out.push(uint(Arg::Size, *size));
                if let Some(p) = ptr {
                    out.push(pointer(Arg::Ptr, *p));
                }
                stream(self, out, *s);
            }
            CudaArgs::Free {
                ptr,
                size,
                stream: s,
            } => {
                out.push(pointer(Arg::Ptr, *ptr));
                if let Some(size) = size {
                    out.push(uint(Arg::Size, *size));
                }
                stream(self, out, *s);
            }
            CudaArgs::HostAlloc { size } => out.push(uint(Arg::Size, *size)),
            CudaArgs::HostFree { ptr } => out.push(pointer(Arg::Ptr, *ptr)),
            CudaArgs::Launch {
                func,
                grid,
                block,
                shared_mem,
                stream: s,
            } => {
                out.push(self.string_arg(late, Arg::Func, StrKey::Ptr(*func)));
                out.push(self.string_arg(late, Arg::Grid, StrKey::Dim(*grid)));
                out.push(self.string_arg(late, Arg::Block, StrKey::Dim(*block)));
                if *shared_mem != 0 {
                    out.push(uint(Arg::SharedMem, *shared_mem));
                }
                stream(self, out, Some(*s));
            }
            CudaArgs::GraphLaunch {
                graph_exec,
                stream: s,
            } => {
                out.push(self.string_arg(late, Arg::GraphExec, StrKey::Ptr(*graph_exec)));
                stream(self, out, Some(*s));
            }
            CudaArgs::Memcpy {
                count,
                kind,
                stream: s,
                width_height,
            } => {
                out.push(uint(Arg::Count, *count));
                let k = memcpy_kind_text(*kind);
                out.push(self.string_arg(late, Arg::Kind, StrKey::Text(&k)));
                if let Some((w, h)) = width_height {
                    out.push(uint(Arg::Width, *w));
                    out.push(uint(Arg::Height, *h));
                }
                stream(self, out, *s);
            }
            CudaArgs::MemcpyPeer {
                count,
                dst_device,
                src_device,
                stream: s,
            } => {
                out.push(uint(Arg::Count, *count));
                out.push(int(Arg::DstDevice, i64::from(*dst_device)));
                out.push(int(Arg::SrcDevice, i64::from(*src_device)));
                stream(self, out, *s);
            }
            CudaArgs::Memset { count, stream: s } => {
                out.push(uint(Arg::Count, *count));
                stream(self, out, *s);
            }
            CudaArgs::Sync { stream: s, event } => {
                stream(self, out, *s);
                if let Some(ev) = event {
                    out.push(self.string_arg(late, Arg::Event, StrKey::Ptr(*ev)));
                }
            }
        }
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
        self.counter(late, track, c.ts_ns, total)
    }

    fn write_off_cpu(&mut self, o: &OffCpu, late: bool) -> Result<()> {
        let comm = o.task.comm.as_str();
        let track = self.track(
            &TrackKey::OffCpu(o.task.tid),
            Hint {
                pid: o.task.pid,
                comm: &comm,
            },
        )?;
        let mut args = std::mem::take(&mut self.args);
        args.push(uint(Arg::NextTid, u64::from(o.next_tid)));
        let next = o.next_comm.as_str();
        args.push(self.string_arg(late, Arg::NextComm, StrKey::Text(&next)));
        args.push(int(Arg::PrevState, o.prev_state));
        args.push(uint(Arg::Cpu, u64::from(o.task.cpu)));
        let seq = if late { &self.late } else { &self.main };
        let te = TrackEvent {
            name_iid: Some(seq.interner.name(Name::OffCpu(o.reason))),
            category_iids: vec![Cat::Sched.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        self.slice(
            late,
            track,
            o.ts_ns,
            o.ts_ns.saturating_add(o.duration_ns),
            te,
        )
    }

    fn write_process(&mut self, p: &ProcessEvent, late: bool) -> Result<()> {
        let comm = p.task.comm.as_str();
        let hint = Hint {
            pid: p.task.pid,
            comm: &comm,
        };
        if p.op == ProcessOp::Exec {
            // New image, new name: describe the process and thread again before the instant.
            self.tracks.refresh_process(p.task.pid, &comm);
        }
        let track = self.track(&TrackKey::Thread(p.task.tid), hint)?;
        let mut args = std::mem::take(&mut self.args);
        args.push(uint(Arg::OtherPid, u64::from(p.other_pid)));
        args.push(DebugAnnotation {
            name_iid: Some(Arg::CloneFlagsKnown.iid()),
            bool_value: Some(p.clone_flags_known),
            ..Default::default()
        });
        if !p.text.is_empty() {
            args.push(DebugAnnotation {
                name_iid: Some(Arg::Text.iid()),
                string_value: Some(p.text.clone()),
                ..Default::default()
            });
        }
        let seq = if late { &self.late } else { &self.main };
        let te = TrackEvent {
            name_iid: Some(seq.interner.name(Name::Lifecycle(p.op))),
            category_iids: vec![Cat::Process.iid()],
            debug_annotations: args,
            ..Default::default()
        };
        self.instant(late, track, p.ts_ns, te)?;
        match p.op {
            ProcessOp::Exit => {
                let at = if late { self.main.last_ts() } else { p.ts_ns };
                self.end_scope(p.task.pid, at)?;
                self.tracks.forget_process(p.task.pid);
                self.device_memory.remove(&p.task.pid);
            }
            ProcessOp::ThreadExit => self.tracks.forget_thread(p.task.tid),
            _ => {}
        }
        Ok(())
    }
}
