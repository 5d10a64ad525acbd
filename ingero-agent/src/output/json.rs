//! One JSON object per event, the stable `--json` schema documented in docs/json-schema.md.
//!
//! Every event has the same top-level keys: `type`, `op`, `ts_ns`, `duration_ns`, `pid`, `tid`,
//! `comm`, `cgroup_id`, `cpu`, `ret` (null where it does not apply) and `args`. Pointers and
//! handles are hex strings, because 64-bit values do not survive JSON numbers in every reader.

use serde_json::{Map, Value, json};

use crate::decode::{CudaArgs, Event, cuda_error_name};

fn hex(v: u64) -> Value {
    Value::String(format!("{v:#x}"))
}

fn opt_hex(v: Option<u64>) -> Value {
    v.map_or(Value::Null, hex)
}

fn cuda_args(args: &CudaArgs) -> Value {
    match args {
        CudaArgs::Alloc { size, ptr, stream } => {
            let mut m = json!({"size": size, "ptr": opt_hex(*ptr)});
            if let Some(s) = stream {
                m["stream"] = hex(*s);
            }
            m
        }
        CudaArgs::Free { ptr, size, stream } => {
            let mut m = json!({"ptr": hex(*ptr), "size": size});
            if let Some(s) = stream {
                m["stream"] = hex(*s);
            }
            m
        }
        CudaArgs::HostAlloc { size } => json!({"size": size}),
        CudaArgs::HostFree { ptr } => json!({"ptr": hex(*ptr)}),
        CudaArgs::Launch {
            func,
            grid,
            block,
            shared_mem,
            stream,
        } => json!({
            "func": hex(*func), "grid": grid, "block": block,
            "shared_mem": shared_mem, "stream": hex(*stream),
        }),
        CudaArgs::GraphLaunch { graph_exec, stream } => {
            json!({"graph_exec": hex(*graph_exec), "stream": hex(*stream)})
        }
        CudaArgs::Memcpy {
            count,
            kind,
            stream,
            width_height,
        } => {
            let mut m = json!({"count": count, "kind": kind.label()});
            if let Some(s) = stream {
                m["stream"] = hex(*s);
            }
            if let Some((w, h)) = width_height {
                m["width"] = json!(w);
                m["height"] = json!(h);
            }
            m
        }
        CudaArgs::MemcpyPeer {
            count,
            dst_device,
            src_device,
            stream,
        } => {
            let mut m = json!({"count": count, "dst_device": dst_device, "src_device": src_device});
            if let Some(s) = stream {
                m["stream"] = hex(*s);
            }
            m
        }
        CudaArgs::Memset { count, stream } => {
            let mut m = json!({"count": count});
            if let Some(s) = stream {
                m["stream"] = hex(*s);
            }
            m
        }
        CudaArgs::Sync { stream, event } => {
            let mut m = Map::new();
            if stream.is_some() {
                m.insert("stream".into(), opt_hex(*stream));
            }
            if event.is_some() {
                m.insert("event".into(), opt_hex(*event));
            }
            Value::Object(m)
        }
    }
}

/// The JSON object of one event.
pub fn event_json(event: &Event) -> Value {
    let task = event.task();
    let (kind, op, duration, ret, args) = match event {
        Event::Cuda(c) => {
            let mut args = cuda_args(&c.args);
            if let Some(name) = cuda_error_name(c.ret).filter(|_| c.ret != 0) {
                args["error"] = json!(name);
            }
            (
                "cuda",
                c.op.name(),
                json!(c.duration_ns),
                json!(c.ret),
                args,
            )
        }
        Event::OffCpu(o) => (
            "sched",
            "off_cpu",
            json!(o.duration_ns),
            Value::Null,
            json!({
                "reason": o.reason.name(), "prev_state": o.prev_state,
                "next_tid": o.next_tid, "next_comm": o.next_comm.as_str(),
            }),
        ),
        Event::Process(p) => {
            let args = match p.op {
                crate::decode::ProcessOp::Exec => {
                    json!({"filename": p.text, "old_pid": p.other_pid})
                }
                crate::decode::ProcessOp::Fork | crate::decode::ProcessOp::ThreadStart => json!({
                    "child_tid": p.other_pid, "child_comm": p.text,
                    "clone_flags_known": p.clone_flags_known,
                }),
                _ => json!({}),
            };
            ("process", p.op.name(), json!(0), Value::Null, args)
        }
    };
    json!({
        "type": kind,
        "op": op,
        "ts_ns": event.ts_ns(),
        "duration_ns": duration,
        "pid": task.pid,
        "tid": task.tid,
        "comm": task.comm.as_str(),
        "cgroup_id": task.cgroup_id,
        "cpu": task.cpu,
        "ret": ret,
        "args": args,
    })
}
