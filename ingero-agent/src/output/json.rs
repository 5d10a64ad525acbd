//! One JSON object per event, the stable `--json` schema documented in docs/json-schema.md.
//!
//! Every event has the same top-level keys: `type`, `op`, `ts_ns`, `duration_ns`, `pid`, `tid`,
//! `comm`, `cgroup_id`, `cpu`, `ret` (null where it does not apply) and `args`. Pointers and
//! handles are hex strings, because 64-bit values do not survive JSON numbers in every reader.
//!
//! Lines are serialised straight from borrowed views of the event (no intermediate
//! `serde_json::Value`), because `--json` output sits on the drain path.

use std::{borrow::Cow, io::Write};

use serde::{Serialize, Serializer, ser::SerializeMap};

use ingero_trace::model::{
    CudaArgs, CudaCall, Event, OffCpu, ProcessEvent, ProcessOp, cuda_error_name,
};

/// A 64-bit value shown as `"0x…"`, formatted without allocating.
struct Hex(u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 18];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        let _ = write!(cursor, "{:#x}", self.0);
        let len = cursor.position() as usize;
        s.serialize_str(std::str::from_utf8(&buf[..len]).unwrap_or("0x?"))
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
}

struct CudaArgsView<'a>(&'a CudaCall);

impl Serialize for CudaArgsView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let mut m = Entries(&mut map);
        match &self.0.args {
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
            CudaArgs::HostAlloc { size } => m.put("size", size)?,
            CudaArgs::HostFree { ptr } => m.put("ptr", &Hex(*ptr))?,
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
            CudaArgs::GraphLaunch { graph_exec, stream } => {
                m.put("graph_exec", &Hex(*graph_exec))?;
                m.put("stream", &Hex(*stream))?;
            }
            CudaArgs::Memcpy {
                count,
                kind,
                stream,
                width_height,
            } => {
                m.put("count", count)?;
                m.put("kind", kind.label())?;
                m.opt_hex("stream", *stream)?;
                if let Some((w, h)) = width_height {
                    m.put("width", w)?;
                    m.put("height", h)?;
                }
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
        }
        if self.0.ret != 0 {
            if let Some(name) = cuda_error_name(self.0.ret) {
                m.put("error", name)?;
            }
        }
        map.end()
    }
}

struct OffCpuArgs<'a>(&'a OffCpu);

impl Serialize for OffCpuArgs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.0;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("reason", o.reason.name())?;
        map.serialize_entry("prev_state", &o.prev_state)?;
        map.serialize_entry("next_tid", &o.next_tid)?;
        map.serialize_entry("next_comm", &o.next_comm.as_str())?;
        map.end()
    }
}

struct ProcessArgs<'a>(&'a ProcessEvent);

impl Serialize for ProcessArgs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut map = s.serialize_map(None)?;
        match p.op {
            ProcessOp::Exec => {
                map.serialize_entry("filename", &p.text)?;
                map.serialize_entry("old_pid", &p.other_pid)?;
            }
            ProcessOp::Fork | ProcessOp::ThreadStart => {
                map.serialize_entry("child_tid", &p.other_pid)?;
                map.serialize_entry("child_comm", &p.text)?;
                map.serialize_entry("clone_flags_known", &p.clone_flags_known)?;
            }
            ProcessOp::Exit | ProcessOp::ThreadExit => {}
        }
        map.end()
    }
}

/// A serialisable view of one event in the `--json` schema.
pub struct EventJson<'a>(pub &'a Event);

impl Serialize for EventJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let event = self.0;
        let task = event.task();
        let mut map = s.serialize_map(Some(11))?;
        let (kind, op, duration, ret): (&str, &str, u64, Option<i32>) = match event {
            Event::Cuda(c) => ("cuda", c.op.name(), c.duration_ns, Some(c.ret)),
            Event::OffCpu(o) => ("sched", "off_cpu", o.duration_ns, None),
            Event::Process(p) => ("process", p.op.text(), 0, None),
        };
        map.serialize_entry("type", kind)?;
        map.serialize_entry("op", op)?;
        map.serialize_entry("ts_ns", &event.ts_ns())?;
        map.serialize_entry("duration_ns", &duration)?;
        map.serialize_entry("pid", &task.pid)?;
        map.serialize_entry("tid", &task.tid)?;
        let comm: Cow<'_, str> = task.comm.as_str();
        map.serialize_entry("comm", &comm)?;
        map.serialize_entry("cgroup_id", &task.cgroup_id)?;
        map.serialize_entry("cpu", &task.cpu)?;
        map.serialize_entry("ret", &ret)?;
        match event {
            Event::Cuda(c) => map.serialize_entry("args", &CudaArgsView(c))?,
            Event::OffCpu(o) => map.serialize_entry("args", &OffCpuArgs(o))?,
            Event::Process(p) => map.serialize_entry("args", &ProcessArgs(p))?,
        }
        map.end()
    }
}

/// Writes one event as a JSON line.
pub fn write_event(out: &mut dyn Write, event: &Event) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, &EventJson(event))?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use ingero_ebpf::{CudaOp, OffCpuReason};
    use serde_json::{Value, json};

    use super::*;
    use ingero_trace::model::{Comm, MemcpyKind, Task};

    fn task() -> Task {
        Task {
            pid: 10,
            tid: 11,
            comm: Comm::from_str_lossy("python3"),
            cgroup_id: 5,
            cpu: 1,
        }
    }

    fn line(event: &Event) -> Value {
        let mut out = Vec::new();
        write_event(&mut out, event).expect("write");
        assert_eq!(out.last(), Some(&b'\n'));
        serde_json::from_slice(&out).expect("valid JSON")
    }

    #[test]
    fn cuda_call_has_every_documented_key_in_order() {
        let event = Event::Cuda(CudaCall {
            ts_ns: 100,
            duration_ns: 5,
            task: task(),
            op: CudaOp::Malloc,
            ret: 35,
            args: CudaArgs::Alloc {
                size: 1 << 20,
                ptr: None,
                stream: None,
            },
        });
        let mut raw = Vec::new();
        write_event(&mut raw, &event).expect("write");
        let text = String::from_utf8(raw).expect("utf8");
        assert!(text.starts_with(r#"{"type":"cuda","op":"cudaMalloc","ts_ns":100,"duration_ns":5,"pid":10,"tid":11,"comm":"python3","cgroup_id":5,"cpu":1,"ret":35,"args":"#), "{text}");
        assert_eq!(
            line(&event)["args"],
            json!({"size": 1048576, "ptr": null, "error": "cudaErrorInsufficientDriver"})
        );
    }

    #[test]
    fn launches_and_copies_name_their_arguments() {
        let launch = Event::Cuda(CudaCall {
            ts_ns: 1,
            duration_ns: 1,
            task: task(),
            op: CudaOp::LaunchKernel,
            ret: 0,
            args: CudaArgs::Launch {
                func: 0x1234,
                grid: [16, 4, 1],
                block: [32, 8, 1],
                shared_mem: 1024,
                stream: 0xabcd,
            },
        });
        assert_eq!(
            line(&launch)["args"],
            json!({"func": "0x1234", "grid": [16, 4, 1], "block": [32, 8, 1], "shared_mem": 1024, "stream": "0xabcd"})
        );
        let copy = Event::Cuda(CudaCall {
            ts_ns: 1,
            duration_ns: 1,
            task: task(),
            op: CudaOp::MemcpyAsync,
            ret: 0,
            args: CudaArgs::Memcpy {
                count: 4096,
                kind: MemcpyKind::HostToDevice,
                stream: Some(u64::MAX),
                width_height: None,
            },
        });
        assert_eq!(
            line(&copy)["args"],
            json!({"count": 4096, "kind": "H2D", "stream": "0xffffffffffffffff"})
        );
    }

    #[test]
    fn sched_and_process_events_have_null_ret() {
        let off = Event::OffCpu(OffCpu {
            ts_ns: 1,
            duration_ns: 2,
            task: task(),
            reason: OffCpuReason::Blocked,
            prev_state: 1,
            next_tid: 0,
            next_comm: Comm::from_str_lossy("swapper/0"),
        });
        let v = line(&off);
        assert_eq!(
            (v["type"].as_str(), v["op"].as_str(), &v["ret"]),
            (Some("sched"), Some("off_cpu"), &Value::Null)
        );
        assert_eq!(v["args"]["reason"], "blocked");
        let exec = Event::Process(ProcessEvent {
            ts_ns: 1,
            task: task(),
            op: ProcessOp::Exec,
            other_pid: 10,
            clone_flags_known: true,
            text: "/bin/true".into(),
        });
        assert_eq!(
            line(&exec)["args"],
            json!({"filename": "/bin/true", "old_pid": 10})
        );
    }
}
