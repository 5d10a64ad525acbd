//! Synthetic recordings with planted incidents, written through the real recorder:
//! - [`training`]: steps 40..=49 of a training loop; during step 42 only, a preemption storm
//!   by `stress-ng` slows every launch and keeps the thread off the CPU.
//! - [`serving`]: 30 overlapping `request_id` spans; `r-17` alone overlaps a burst of
//!   synchronisation wait.
//! - [`leaky`]: `leaky` allocates 64 MiB every 100 ms and never frees; `healthy` frees
//!   what it allocates.
//! - [`clean`]: a steady loop with nothing to find.

use std::path::PathBuf;

use ingero_ebpf::{CudaOp, OffCpuReason};

use crate::analyze::{Analysis, SelectionSpec};
use ingero_trace::model::{AnnotationRecord, Scope, TimelineRecord};
use ingero_trace::model::{Comm, CudaArgs, Event, MemcpyKind, OffCpu, Task};
use ingero_trace::model::{CudaCallRecord, FinalStats, SessionInfo, ThreadRef};
use ingero_trace::synth::{cuda, task};
use ingero_trace::write::{Recorder, RecorderConfig};

pub const T0: u64 = 2_000_000_000_000;
pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;
pub const TRAINER: u32 = 6_000_001;
pub const SERVER: u32 = 6_000_002;
pub const LEAKY: u32 = 6_000_003;
pub const HEALTHY: u32 = 6_000_004;
pub const CLEAN: u32 = 6_000_005;

/// Writes `records` (sorted by time here) to a fresh file named after the test.
pub fn write(name: &str, records: Vec<TimelineRecord>) -> PathBuf {
    write_at(name, records, RecorderConfig::default().compression_level)
}

/// [`write`] at a compression level (0: no chunks, the first pass reads everything).
pub fn write_at(name: &str, mut records: Vec<TimelineRecord>, compression_level: u32) -> PathBuf {
    records.sort_by_key(TimelineRecord::ts_ns);
    let dir = std::env::temp_dir().join(format!("ingero-analyze-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join(format!("{name}.pftrace"));
    let cfg = RecorderConfig {
        path: Some(path.clone()),
        session: SessionInfo {
            command_line: format!("analyze fixture {name}"),
            ..SessionInfo::default()
        },
        chown_to_sudo_user: false,
        machine_id: Some(7),
        compression_level,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false).expect("recorder");
    for r in &records {
        rec.write(r).expect("write");
    }
    rec.finish(&FinalStats::default()).expect("finish");
    path
}

/// A successful call of process 1's thread `p` as a reader yields it, for tests of the
/// accounting that takes read calls: `op` with `args` at `ts_ns`, lasting `duration_ns`.
pub fn call_record(op: CudaOp, args: CudaArgs, ts_ns: u64, duration_ns: u64) -> CudaCallRecord {
    CudaCallRecord {
        ts_ns,
        duration_ns,
        thread: ThreadRef {
            pid: 1,
            tid: 1,
            name: std::sync::Arc::from("p"),
        },
        op,
        ret: 0,
        args,
        detail: Default::default(),
        clamped_from_ns: None,
        cpu: 0,
        cgroup_id: 0,
    }
}

/// Opens a fixture with a selection.
pub fn open(path: &std::path::Path, spec: &SelectionSpec) -> Analysis {
    Analysis::open(Some(path), spec).expect("analysis opens")
}

/// An instant label `key=value` scoped to `pid`, written by the process itself.
pub fn label(pid: u32, ts: u64, key: &str, value: &str) -> TimelineRecord {
    TimelineRecord::Annotation(AnnotationRecord {
        labels: vec![(key.into(), value.into())],
        scope: Some(Scope { pid, start_time: 1 }),
        ts_ns: ts,
        end_ns: None,
        provenance_uid: 1000,
        provenance_pid: Some(pid),
        ..Default::default()
    })
}

pub fn step(pid: u32, ts: u64, value: &str) -> TimelineRecord {
    label(pid, ts, "step", value)
}

pub fn span(pid: u32, start: u64, end: u64, id: &str) -> TimelineRecord {
    TimelineRecord::Annotation(AnnotationRecord {
        labels: vec![("request_id".into(), id.into())],
        scope: Some(Scope { pid, start_time: 1 }),
        ts_ns: start,
        end_ns: Some(end),
        provenance_uid: 1000,
        provenance_pid: Some(pid),
        ..Default::default()
    })
}

pub fn off_cpu(t: Task, ts: u64, dur: u64, reason: OffCpuReason, who: &str) -> TimelineRecord {
    TimelineRecord::Event(Event::OffCpu(OffCpu {
        ts_ns: ts,
        duration_ns: dur,
        task: t,
        reason,
        prev_state: i64::from(reason == OffCpuReason::Blocked),
        next_tid: 7777,
        next_comm: Comm::from_str_lossy(who),
    }))
}

pub fn launch(t: Task, ts: u64, dur: u64) -> TimelineRecord {
    cuda(
        t,
        ts,
        dur,
        CudaOp::LaunchKernel,
        0,
        CudaArgs::Launch {
            func: 0x1000,
            grid: [256, 1, 1],
            block: [128, 1, 1],
            shared_mem: 0,
            stream: 0x10,
        },
    )
}

pub fn sync(t: Task, ts: u64, dur: u64) -> TimelineRecord {
    cuda(
        t,
        ts,
        dur,
        CudaOp::StreamSynchronize,
        0,
        CudaArgs::Sync {
            stream: Some(0x10),
            event: None,
        },
    )
}

pub fn memcpy(t: Task, ts: u64, dur: u64, bytes: u64) -> TimelineRecord {
    cuda(
        t,
        ts,
        dur,
        CudaOp::MemcpyAsync,
        0,
        CudaArgs::Memcpy {
            count: bytes,
            kind: MemcpyKind::HostToDevice,
            stream: Some(0x10),
            width_height: None,
            host_ptr: None,
        },
    )
}

pub fn malloc(t: Task, ts: u64, size: u64, ptr: u64, ret: i32) -> TimelineRecord {
    cuda(
        t,
        ts,
        50 * US,
        CudaOp::Malloc,
        ret,
        CudaArgs::Alloc {
            size,
            ptr: (ret == 0).then_some(ptr),
            stream: None,
        },
    )
}

pub fn free(t: Task, ts: u64, ptr: u64) -> TimelineRecord {
    cuda(
        t,
        ts,
        20 * US,
        CudaOp::Free,
        0,
        CudaArgs::Free {
            ptr,
            size: None,
            stream: None,
        },
    )
}

/// Steps 40..=49, 100 ms each except step 42 (400 ms, a preemption storm by `stress-ng`); each
/// ends in a 45 ms synchronisation.
pub fn training() -> Vec<TimelineRecord> {
    let t = task(TRAINER, TRAINER, "trainer");
    let mut v = Vec::new();
    let mut ts = T0;
    for s in 40..=49u32 {
        let storm = s == 42;
        v.push(step(TRAINER, ts, &s.to_string()));
        v.push(memcpy(t, ts + 100 * US, 200 * US, 1 << 20));
        let mut at = ts + MS;
        for _ in 0..50 {
            if storm {
                // The launch is stretched by a preemption inside it, and the thread loses the
                // CPU again before the next one.
                v.push(launch(t, at, 300 * US));
                v.push(off_cpu(
                    t,
                    at + 20 * US,
                    250 * US,
                    OffCpuReason::Preempted,
                    "stress-ng",
                ));
                v.push(off_cpu(
                    t,
                    at + 400 * US,
                    6 * MS,
                    OffCpuReason::Preempted,
                    "stress-ng",
                ));
                at += 7 * MS;
            } else {
                v.push(launch(t, at, 20 * US));
                at += MS;
            }
        }
        // GPU-bound: the host waits for the queued work.
        v.push(sync(t, at, 45 * MS));
        ts += if storm { 400 * MS } else { 100 * MS };
    }
    v.push(step(TRAINER, ts, "50"));
    v
}

/// 30 requests, each 30 ms, one every 20 ms (so they overlap in pairs); a launch every
/// millisecond and a 1 ms sync every 10 ms; in the 10 ms that belong to `r-17` alone, a burst
/// of four 2.4 ms syncs during which the thread sleeps.
pub fn serving() -> Vec<TimelineRecord> {
    let t = task(SERVER, SERVER, "server");
    let mut v = Vec::new();
    for i in 1..=30u64 {
        let start = T0 + (i - 1) * 20 * MS;
        v.push(span(SERVER, start, start + 30 * MS, &format!("r-{i}")));
    }
    let end = T0 + 610 * MS;
    let burst = (T0 + 330 * MS, T0 + 340 * MS);
    let mut at = T0 + 100 * US;
    let mut n = 0u64;
    while at < end {
        if at >= burst.0 && at < burst.1 {
            for k in 0..4 {
                let s = burst.0 + 200 * US + k * 2_500 * US;
                v.push(sync(t, s, 2_400 * US));
                v.push(off_cpu(
                    t,
                    s + 50 * US,
                    2_300 * US,
                    OffCpuReason::Blocked,
                    "swapper/3",
                ));
            }
            at = burst.1 + 100 * US;
            continue;
        }
        if n % 10 == 9 {
            v.push(sync(t, at, MS));
        } else {
            v.push(launch(t, at, 10 * US));
        }
        n += 1;
        at += 1_100 * US;
    }
    v
}

/// `leaky` allocates 64 MiB every 100 ms for 5 s and never frees; `healthy` allocates and
/// frees the same amount.
pub fn leaky() -> Vec<TimelineRecord> {
    let l = task(LEAKY, LEAKY, "leaky");
    let h = task(HEALTHY, HEALTHY, "healthy");
    let mut v = Vec::new();
    for i in 0..50u64 {
        let ts = T0 + i * 100 * MS;
        v.push(malloc(
            l,
            ts,
            64 << 20,
            0x7000_0000_0000 + i * (64 << 20),
            0,
        ));
        v.push(launch(l, ts + MS, 20 * US));
        let p = 0x6000_0000_0000 + i * (64 << 20);
        v.push(malloc(h, ts + 50 * MS, 64 << 20, p, 0));
        v.push(launch(h, ts + 51 * MS, 20 * US));
        v.push(free(h, ts + 60 * MS, p));
    }
    v
}

/// Ten 100 ms steps of 100 launches, a sync and a balanced malloc/free each: nothing to find.
pub fn clean() -> Vec<TimelineRecord> {
    let t = task(CLEAN, CLEAN, "clean");
    let mut v = Vec::new();
    for s in 0..10u64 {
        let ts = T0 + s * 100 * MS;
        v.push(step(CLEAN, ts, &s.to_string()));
        let p = 0x5000_0000_0000 + s * 4096;
        v.push(malloc(t, ts + 10 * US, 1 << 20, p, 0));
        // GPU-bound: the launches queue ahead and the host waits in the sync.
        for k in 0..90 {
            v.push(launch(t, ts + MS + k * 20 * US, 10 * US));
        }
        v.push(sync(t, ts + 3 * MS, 90 * MS));
        v.push(free(t, ts + 95 * MS, p));
    }
    v
}

/// A successful call of CUDA's virtual memory management API, 5 µs long.
fn vmm(t: Task, ts: u64, op: CudaOp, args: CudaArgs) -> TimelineRecord {
    cuda(t, ts, 5 * US, op, 0, args)
}

/// As [`leaky`], allocating by handle as PyTorch's expandable segments do: `leaky` creates
/// and maps a 64 MiB segment every 100 ms and never gives one back; `healthy` unmaps and
/// releases each of its own.
pub fn leaky_by_handle() -> Vec<TimelineRecord> {
    use ingero_trace::model::MemLocation;
    let create = |handle| CudaArgs::PhysicalCreate {
        size: 64 << 20,
        handle: Some(handle),
        location: MemLocation::Device(0),
    };
    let range = |ptr, handle| CudaArgs::AddressRange {
        ptr: Some(ptr),
        size: 64 << 20,
        handle,
    };
    let l = task(LEAKY, LEAKY, "leaky");
    let h = task(HEALTHY, HEALTHY, "healthy");
    let mut v = Vec::new();
    for i in 0..50u64 {
        let ts = T0 + i * 100 * MS;
        let (va, handle) = (0x7000_0000_0000 + i * (64 << 20), 0x5100 + i);
        v.push(vmm(l, ts, CudaOp::CuMemCreate, create(handle)));
        v.push(vmm(
            l,
            ts + 10 * US,
            CudaOp::CuMemMap,
            range(va, Some(handle)),
        ));
        v.push(launch(l, ts + MS, 20 * US));
        let (va, handle) = (0x6000_0000_0000 + i * (64 << 20), 0x9100 + i);
        v.push(vmm(h, ts + 50 * MS, CudaOp::CuMemCreate, create(handle)));
        v.push(vmm(
            h,
            ts + 50 * MS + 10 * US,
            CudaOp::CuMemMap,
            range(va, Some(handle)),
        ));
        v.push(launch(h, ts + 51 * MS, 20 * US));
        v.push(vmm(h, ts + 60 * MS, CudaOp::CuMemUnmap, range(va, None)));
        let release = CudaArgs::PhysicalHandle {
            handle: Some(handle),
            ptr: None,
        };
        v.push(vmm(
            h,
            ts + 60 * MS + 10 * US,
            CudaOp::CuMemRelease,
            release,
        ));
    }
    v
}
