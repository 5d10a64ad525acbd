//! Synthetic workloads for tests, benchmarks and example recordings, written through the real
//! [`Recorder`] API (`cargo run -p ingero-trace --example synth-trace -- OUT [--events N]`).
//!
//! - [`scenario`]: a short, fixed story with every record kind: a failing `cudaMalloc` of
//!   1048576 bytes (return code 35), a successful one and its free, launches, a memcpy, a
//!   sync, off-CPU intervals, thread and process lifecycle, `step` = 41, 42, 43 and two
//!   overlapping `request_id` spans.
//! - [`launches`]: a launch-dominated stream of any length (the benchmark workload): two
//!   threads launching kernels with a few configurations, a memcpy every 50 calls and a stream
//!   sync every 1000. Generated lazily, so 10 M events need no memory.

use std::path::PathBuf;

use crate::write::Result;
use ingero_ebpf::{CudaOp, OffCpuReason};

use crate::model::{AnnotationRecord, Scope, TimelineRecord};
use crate::model::{
    Comm, CudaArgs, CudaCall, Event, MemcpyKind, OffCpu, ProcessEvent, ProcessOp, Task,
};
use crate::model::{FinalStats, SessionInfo};
use crate::write::{Recorder, RecorderConfig};

/// Pid of the scenario's process: above the kernel's pid_max, so never a real process.
pub const SCENARIO_PID: u32 = 5_000_000;
/// Scenario start (CLOCK_MONOTONIC ns).
pub const SCENARIO_T0: u64 = 1_000_000_000_000;
const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// A task of the synthetic workloads, on CPU `tid % 4`, in cgroup 4242.
pub fn task(pid: u32, tid: u32, comm: &str) -> Task {
    Task {
        pid,
        tid,
        comm: Comm::from_str_lossy(comm),
        cgroup_id: 4242,
        cpu: tid % 4,
    }
}

/// A CUDA call of `t` from `ts_ns`, lasting `duration_ns`, returning `ret`.
pub fn cuda(
    t: Task,
    ts_ns: u64,
    duration_ns: u64,
    op: CudaOp,
    ret: i32,
    args: CudaArgs,
) -> TimelineRecord {
    TimelineRecord::Event(Event::Cuda(CudaCall {
        detail: Default::default(),
        ts_ns,
        duration_ns,
        task: t,
        op,
        ret,
        args,
    }))
}

/// A lifecycle event of `t` at `ts_ns`, with its fork flags known.
pub fn lifecycle(t: Task, ts_ns: u64, op: ProcessOp, other_pid: u32, text: &str) -> TimelineRecord {
    TimelineRecord::Event(Event::Process(ProcessEvent {
        ts_ns,
        task: t,
        op,
        other_pid,
        clone_flags_known: true,
        text: text.into(),
    }))
}

/// An annotation at `ts_ns` (a span when `end_ns` is given) scoped to `scope` (`None`:
/// trace-wide), written by the scenario's process.
pub fn annotation(
    ts_ns: u64,
    end_ns: Option<u64>,
    scope: Option<u32>,
    labels: &[(&str, &str)],
) -> TimelineRecord {
    TimelineRecord::Annotation(AnnotationRecord {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        scope: scope.map(|pid| Scope {
            pid,
            start_time: 4242,
        }),
        ts_ns,
        end_ns,
        provenance_uid: 1000,
        provenance_pid: Some(SCENARIO_PID),
        provenance_gid: 1000,
        received_ns: ts_ns + 1_000,
        realtime_ns: ts_ns + 1_700_000_000_000_000_000,
        end_realtime_ns: end_ns.map(|e| e + 1_700_000_000_000_000_000),
        stamped_by_agent: false,
    })
}

/// A kernel launch's arguments: a `grid`×1×1 grid of 256-thread blocks on `stream`, with a
/// function address that differs per grid size.
pub fn launch_args(grid: u32, stream: u64) -> CudaArgs {
    CudaArgs::Launch {
        func: 0x5555_0000_1000 + u64::from(grid),
        grid: [grid, 1, 1],
        block: [256, 1, 1],
        shared_mem: 0,
        stream,
    }
}

/// The fixed scenario, in timestamp order.
pub fn scenario() -> Vec<TimelineRecord> {
    let p = SCENARIO_PID;
    let main = task(p, p, "python3");
    let worker = task(p, p + 1, "pt_worker");
    // Later on, the main thread runs on another CPU: the records after that say so.
    let moved = Task { cpu: 3, ..main };
    let t = |ms: u64| SCENARIO_T0 + ms * MS;
    vec![
        lifecycle(main, t(0), ProcessOp::Exec, p, "/usr/bin/python3"),
        lifecycle(main, t(1), ProcessOp::ThreadStart, p + 1, "pt_worker"),
        annotation(t(2), None, Some(p), &[("step", "41")]),
        annotation(t(2) + 1, None, None, &[("phase", "train")]),
        cuda(
            main,
            t(3),
            50 * US,
            CudaOp::Malloc,
            35,
            CudaArgs::Alloc {
                size: 1_048_576,
                ptr: None,
                stream: None,
            },
        ),
        cuda(
            main,
            t(4),
            20 * US,
            CudaOp::Malloc,
            0,
            CudaArgs::Alloc {
                size: 4096,
                ptr: Some(0x7f00_0000_0000),
                stream: None,
            },
        ),
        cuda(
            worker,
            t(5),
            5 * US,
            CudaOp::LaunchKernel,
            0,
            launch_args(1024, 0x5600_0000_0010),
        ),
        annotation(t(6), Some(t(16)), Some(p), &[("request_id", "req-a")]),
        TimelineRecord::Event(Event::OffCpu(OffCpu {
            ts_ns: t(7),
            duration_ns: 2 * MS,
            task: main,
            reason: OffCpuReason::Preempted,
            prev_state: 0,
            next_tid: 77,
            next_comm: Comm::from_str_lossy("kworker/0:1"),
        })),
        annotation(
            t(8),
            Some(t(12)),
            Some(p),
            &[("request_id", "req-b"), ("user", "u7")],
        ),
        annotation(t(10), None, Some(p), &[("step", "42")]),
        cuda(
            worker,
            t(11),
            300 * US,
            CudaOp::MemcpyAsync,
            0,
            CudaArgs::Memcpy {
                count: 1 << 20,
                kind: MemcpyKind::HostToDevice,
                stream: Some(0x5600_0000_0010),
                width_height: None,
                host_ptr: None,
            },
        ),
        TimelineRecord::Event(Event::OffCpu(OffCpu {
            ts_ns: t(12),
            duration_ns: MS,
            task: worker,
            reason: OffCpuReason::Blocked,
            prev_state: 1,
            next_tid: 0,
            next_comm: Comm::from_str_lossy("swapper/1"),
        })),
        cuda(
            main,
            t(13),
            10 * US,
            CudaOp::Free,
            0,
            CudaArgs::Free {
                ptr: 0x7f00_0000_0000,
                size: Some(4096),
                stream: None,
            },
        ),
        annotation(t(14), None, Some(p), &[("step", "43")]),
        cuda(
            moved,
            t(15),
            2 * MS,
            CudaOp::DeviceSynchronize,
            0,
            CudaArgs::Sync {
                stream: None,
                event: None,
            },
        ),
        lifecycle(worker, t(20), ProcessOp::ThreadExit, 0, ""),
        lifecycle(moved, t(25), ProcessOp::Exit, 0, ""),
    ]
}

/// `n` launch-dominated CUDA calls from `start_ns` on, lazily.
pub fn launches(n: u64, start_ns: u64) -> impl Iterator<Item = TimelineRecord> {
    let pid = SCENARIO_PID + 100;
    let threads = [task(pid, pid, "train"), task(pid, pid + 1, "train_dl")];
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut ts = start_ns;
    (0..n).map(move |i| {
        // xorshift: deterministic jitter, so every run writes the same bytes.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        ts += 1_500 + rng % 1_000;
        let t = threads[(i % 2) as usize];
        let stream = 0x5600_0000_0010 + (i % 2) * 0x100;
        if i % 1000 == 999 {
            cuda(
                t,
                ts,
                20 * US,
                CudaOp::StreamSynchronize,
                0,
                CudaArgs::Sync {
                    stream: Some(stream),
                    event: None,
                },
            )
        } else if i % 50 == 49 {
            let args = CudaArgs::Memcpy {
                count: 4096,
                kind: MemcpyKind::DeviceToHost,
                stream: Some(stream),
                width_height: None,
                host_ptr: None,
            };
            cuda(t, ts, 3 * US, CudaOp::MemcpyAsync, 0, args)
        } else {
            let grid = [128, 256, 1024, 4096][(rng % 4) as usize];
            cuda(
                t,
                ts,
                1_200 + rng % 500,
                CudaOp::LaunchKernel,
                0,
                launch_args(grid, stream),
            )
        }
    })
}

/// Calls per training step in [`labelled`].
pub const CALLS_PER_STEP: u64 = 2_000;
/// Calls between the ends of two request spans in [`labelled`].
pub const CALLS_PER_REQUEST: u64 = 500;

/// `calls` with the labels a training or serving job writes: a `step` annotation (scoped to
/// the calls' process) every [`CALLS_PER_STEP`] calls and a `request_id` span every
/// [`CALLS_PER_REQUEST`], each covering the calls since the previous one (spans arrive when
/// they end, as the client sends them).
pub fn labelled(
    calls: impl Iterator<Item = TimelineRecord>,
) -> impl Iterator<Item = TimelineRecord> {
    let pid = SCENARIO_PID + 100;
    let mut request_start = None;
    calls.enumerate().flat_map(move |(i, call)| {
        let i = i as u64;
        let ts = call.ts_ns();
        let mut out = Vec::with_capacity(3);
        if i.is_multiple_of(CALLS_PER_STEP) {
            let step = (i / CALLS_PER_STEP).to_string();
            out.push(annotation(ts, None, Some(pid), &[("step", &step)]));
        }
        if i.is_multiple_of(CALLS_PER_REQUEST) {
            if let Some(start) = request_start {
                let id = format!("r-{}", i / CALLS_PER_REQUEST);
                out.push(annotation(
                    start,
                    Some(ts),
                    Some(pid),
                    &[("request_id", &id)],
                ));
            }
            request_start = Some(ts);
        }
        out.push(call);
        out
    })
}

/// What [`write_trace`] writes.
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// Launch-dominated calls after the scenario.
    pub events: u64,
    /// `RecorderConfig::max_file_size`.
    pub max_file_size: u64,
    /// `RecorderConfig::restart_bytes`.
    pub restart_bytes: u64,
    /// [`labelled`] calls.
    pub labels: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            events: 0,
            max_file_size: crate::write::DEFAULT_MAX_FILE_SIZE,
            restart_bytes: crate::write::DEFAULT_RESTART_BYTES,
            labels: false,
        }
    }
}

/// Writes the scenario followed by `o.events` launch-dominated calls to `path` ([`labelled`]
/// when `o.labels`), returning the files written.
pub fn write_trace(path: PathBuf, o: &TraceOptions) -> Result<Vec<PathBuf>> {
    let (events, labels) = (o.events, o.labels);
    let cfg = RecorderConfig {
        path: Some(path),
        max_file_size: o.max_file_size,
        restart_bytes: o.restart_bytes,
        session: SessionInfo {
            command_line: "synth-trace".into(),
            targets: vec![format!("pid {SCENARIO_PID}")],
            probes: vec!["cuda".into(), "sched".into()],
            ..SessionInfo::this_host()
        },
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false)?;
    let mut count = 0u64;
    for r in scenario().iter() {
        rec.write(r)?;
        count += 1;
    }
    let calls = launches(events, SCENARIO_T0 + 30 * MS);
    let records: Box<dyn Iterator<Item = TimelineRecord>> = if labels {
        Box::new(labelled(calls))
    } else {
        Box::new(calls)
    };
    for r in records {
        rec.write(&r)?;
        count += 1;
    }
    rec.record_drops(SCENARIO_T0 + 30 * MS + events * 3_000, 0)?;
    let stats = FinalStats {
        events: vec![("total".into(), count)],
        drops: vec![("ring_full".into(), 0)],
        rejected: vec![("too_long".into(), 0)],
        recorder: Vec::new(),
    };
    rec.finish(&stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labelled_calls_carry_steps_and_request_spans() {
        let out: Vec<_> = labelled(launches(2 * CALLS_PER_STEP, SCENARIO_T0)).collect();
        let labels: Vec<&AnnotationRecord> = out
            .iter()
            .filter_map(|r| match r {
                TimelineRecord::Annotation(a) => Some(a),
                _ => None,
            })
            .collect();
        let steps: Vec<_> = labels.iter().filter(|a| a.end_ns.is_none()).collect();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[1].labels, vec![("step".to_owned(), "1".to_owned())]);
        let spans: Vec<_> = labels.iter().filter(|a| a.end_ns.is_some()).collect();
        assert_eq!(
            spans.len() as u64,
            2 * CALLS_PER_STEP / CALLS_PER_REQUEST - 1
        );
        assert!(spans.iter().all(|a| a.end_ns > Some(a.ts_ns)));
        assert_eq!(out.len() - labels.len(), 2 * CALLS_PER_STEP as usize);
    }
}
