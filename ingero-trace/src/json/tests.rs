//! The line of each kind of event, and the same line from a recording as from the live
//! event.

use ingero_ebpf::{CudaOp, OffCpuReason};
use serde_json::{Value, json};

use super::*;
use crate::model::{
    Comm, CudaArgs, CudaCall, MemcpyKind, OffCpu, ProcessEvent, ProcessOp, Task, TimelineRecord,
};
use crate::read::{TimeRange, TraceReader};
use crate::synth;
use crate::write::{Recorder, RecorderConfig};

fn write_event(out: &mut Vec<u8>, e: &Event) -> io::Result<()> {
    write_line(out, &Line::of_event(e))
}

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
        detail: Default::default(),
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
        detail: Default::default(),
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
        detail: Default::default(),
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
            host_ptr: None,
        },
    });
    assert_eq!(
        line(&copy)["args"],
        json!({"count": 4096, "kind": "H2D", "stream": "0xffffffffffffffff"}),
        "no host_ptr key when the copy names none"
    );
    let call = |op, args| {
        Event::Cuda(CudaCall {
            detail: Default::default(),
            ts_ns: 1,
            duration_ns: 1,
            task: task(),
            op,
            ret: 0,
            args,
        })
    };
    let pageable = call(
        CudaOp::MemcpyAsync,
        CudaArgs::Memcpy {
            count: 4096,
            kind: MemcpyKind::HostToDevice,
            stream: None,
            width_height: None,
            host_ptr: Some(0x5555_0000),
        },
    );
    assert_eq!(
        line(&pageable)["args"],
        json!({"count": 4096, "kind": "H2D", "host_ptr": "0x55550000"})
    );
    let register = call(
        CudaOp::HostRegister,
        CudaArgs::HostRegister {
            ptr: 0x5555_0000,
            size: 1 << 20,
            flags: 2,
        },
    );
    assert_eq!(
        line(&register)["args"],
        json!({"ptr": "0x55550000", "size": 1048576, "flags": 2})
    );
    let unregister = call(
        CudaOp::CuMemHostUnregister,
        CudaArgs::HostUnregister { ptr: 0x5555_0000 },
    );
    assert_eq!(line(&unregister)["args"], json!({"ptr": "0x55550000"}));
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

/// Every event and annotation of the synthetic scenario, written and read back: each recorded
/// line equals the live one, key for key.
#[test]
fn a_recorded_line_is_the_live_line() {
    let dir = std::env::temp_dir().join(format!("ingero-json-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("run.pftrace");
    let mut input = synth::scenario();
    // A thread renamed and moved to another cgroup after its first calls.
    let t = Task {
        comm: Comm::from_str_lossy("pt_loader"),
        cgroup_id: 7,
        cpu: 2,
        ..synth::task(synth::SCENARIO_PID, synth::SCENARIO_PID + 1, "x")
    };
    input.push(synth::cuda(
        t,
        synth::SCENARIO_T0 + 19_000_000,
        1_000,
        CudaOp::Memset,
        0,
        CudaArgs::Memset {
            count: 64,
            stream: Some(1),
        },
    ));
    input.sort_by_key(TimelineRecord::ts_ns);
    let mut rec = Recorder::create_with(
        RecorderConfig {
            path: Some(path.clone()),
            chown_to_sudo_user: false,
            ..Default::default()
        },
        false,
    )
    .expect("recorder");
    for r in &input {
        rec.write(r).expect("write");
    }
    rec.finish(&Default::default()).expect("finish");
    let mut live: Vec<String> = input
        .iter()
        .map(|r| {
            let line = Line::of_timeline(r);
            serde_json::to_string(&line).expect("json")
        })
        .collect();
    let mut recorded: Vec<String> = TraceReader::open(&path, TimeRange::all())
        .expect("open")
        .map(|r| r.expect("read"))
        .filter_map(|r| Line::of_record(&r).map(|l| serde_json::to_string(&l).expect("json")))
        .collect();
    live.sort();
    recorded.sort();
    assert_eq!(recorded.len(), live.len());
    for (r, l) in recorded.iter().zip(&live) {
        assert_eq!(r, l);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn labels_come_last_on_events_only() {
    let e = Event::Cuda(CudaCall {
        detail: Default::default(),
        ts_ns: 1,
        duration_ns: 1,
        task: task(),
        op: CudaOp::DeviceSynchronize,
        ret: 0,
        args: CudaArgs::Sync {
            stream: None,
            event: None,
        },
    });
    let mut labels = Map::new();
    labels.insert("step".into(), Value::String("7".into()));
    let text = serde_json::to_string(&Labeled {
        line: Line::of_event(&e),
        labels: Some(&labels),
    })
    .expect("json");
    assert!(
        text.ends_with(r#""args":{},"labels":{"step":"7"}}"#),
        "{text}"
    );
    let a = AnnotationRecord {
        labels: vec![("step".into(), "8".into())],
        ..Default::default()
    };
    let text = serde_json::to_string(&Labeled {
        line: Line::Annotation(&a),
        labels: Some(&labels),
    })
    .expect("json");
    assert!(text.contains(r#""labels":{"step":"8"}"#), "{text}");
    assert!(!text.contains(r#""7""#), "{text}");
}

/// A line without labels is the labelled line with none, byte for byte, for an event and an
/// annotation (both serialise through one body).
#[test]
fn a_plain_line_is_a_labeled_line_without_labels() {
    let e = Event::Cuda(CudaCall {
        detail: Default::default(),
        ts_ns: 1,
        duration_ns: 1,
        task: task(),
        op: CudaOp::DeviceSynchronize,
        ret: 0,
        args: CudaArgs::Sync {
            stream: None,
            event: None,
        },
    });
    let a = AnnotationRecord {
        labels: vec![("step".into(), "8".into())],
        ..Default::default()
    };
    for line in [Line::of_event(&e), Line::Annotation(&a)] {
        let plain = serde_json::to_string(&line).expect("json");
        let labeled = serde_json::to_string(&Labeled { line, labels: None }).expect("json");
        assert_eq!(plain, labeled);
    }
}

/// A recorded off-CPU interval whose slice the writer shortened shows its real duration.
#[test]
fn a_clamped_off_cpu_record_shows_its_real_duration() {
    let r = ReadRecord::OffCpu(crate::model::OffCpuRecord {
        ts_ns: 10,
        duration_ns: 3,
        thread: crate::model::ThreadRef {
            pid: 10,
            tid: 11,
            name: "python3".into(),
        },
        reason: OffCpuReason::Preempted,
        prev_state: 0,
        next_tid: 0,
        next_comm: String::new(),
        cpu: 1,
        cgroup_id: 5,
        clamped_from_ns: Some(8),
    });
    let line = Line::of_record(&r).expect("an event");
    let v: Value = serde_json::to_value(&line).expect("json");
    assert_eq!(v["duration_ns"], json!(8));
}
