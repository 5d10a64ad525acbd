//! The memory replay on hand-made records (held, peak and when, the window, unknown frees,
//! kinds, nesting, bounds) and `query --memory` on a recording written by the real recorder.

use std::sync::Arc;

use ingero_ebpf::CudaOp;
use ingero_trace::model::{
    CallDetail, CudaArgs, CudaCallRecord, LifecycleRecord, ProcessOp, ReadRecord, ThreadRef,
};

use super::replay::{Limits, ProcMemory, Replay, ReplayResult, Window};
use ingero_trace::model::MemKind;

pub(super) const MIB: u64 = 1 << 20;

pub(super) fn thread(pid: u32) -> ThreadRef {
    ThreadRef {
        pid,
        tid: pid,
        name: Arc::from(format!("proc{pid}")),
    }
}

pub(super) fn call(pid: u32, ts: u64, op: CudaOp, ret: i32, args: CudaArgs) -> ReadRecord {
    ReadRecord::Cuda(CudaCallRecord {
        ts_ns: ts,
        duration_ns: 10,
        thread: thread(pid),
        op,
        ret,
        args,
        detail: CallDetail::default(),
        clamped_from_ns: None,
        cpu: 0,
        cgroup_id: 0,
    })
}

pub(super) fn alloc(pid: u32, ts: u64, op: CudaOp, size: u64, ptr: u64) -> ReadRecord {
    let args = if MemKind::of_alloc(op) == Some(MemKind::Pinned) {
        CudaArgs::HostAlloc {
            size,
            ptr: Some(ptr),
        }
    } else {
        CudaArgs::Alloc {
            size,
            ptr: Some(ptr),
            stream: None,
        }
    };
    call(pid, ts, op, 0, args)
}

fn free(pid: u32, ts: u64, ptr: u64) -> ReadRecord {
    let args = CudaArgs::Free {
        ptr,
        size: None,
        stream: None,
    };
    call(pid, ts, CudaOp::Free, 0, args)
}

fn nested(mut r: ReadRecord, parent: CudaOp) -> ReadRecord {
    if let ReadRecord::Cuda(c) = &mut r {
        c.detail.parent = Some(parent);
    }
    r
}

pub(super) fn exit(pid: u32, ts: u64) -> ReadRecord {
    ReadRecord::Lifecycle(LifecycleRecord {
        ts_ns: ts,
        thread: thread(pid),
        op: ProcessOp::Exit,
        other_pid: 0,
        clone_flags_known: true,
        text: String::new(),
        cpu: 0,
        cgroup_id: 0,
    })
}

pub(super) fn replay(window: (u64, u64), limits: Limits, recs: &[ReadRecord]) -> ReplayResult {
    let mut r = Replay::new(
        Window {
            start_ns: window.0,
            end_ns: window.1,
        },
        Vec::new(),
        limits,
    );
    for rec in recs {
        r.record(rec);
    }
    r.finish()
}

pub(super) fn proc(r: &ReplayResult, pid: u32) -> &ProcMemory {
    r.procs.iter().find(|p| p.pid == pid).expect("process row")
}

#[test]
fn held_peak_and_when_over_the_whole_recording() {
    let recs = [
        alloc(1, 100, CudaOp::Malloc, 10 * MIB, 0xa0),
        alloc(1, 200, CudaOp::Malloc, 30 * MIB, 0xb0),
        free(1, 300, 0xa0),
        alloc(1, 400, CudaOp::Malloc, 5 * MIB, 0xc0),
    ];
    let r = replay((0, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    assert_eq!(p.gpu.held_bytes, 35 * MIB);
    assert_eq!(p.gpu.peak_bytes, 40 * MIB);
    assert_eq!(p.gpu.peak_ns, Some(200));
    assert_eq!(p.gpu.allocated_bytes, 45 * MIB);
    assert_eq!(p.gpu.freed_bytes, 10 * MIB);
    assert_eq!((p.gpu.allocations, p.gpu.frees), (3, 1));
    assert_eq!(p.gpu.live_allocations, 2);
    assert_eq!(&*p.command, "proc1");
    let sizes: Vec<u64> = p.largest.iter().map(|l| l.size).collect();
    assert_eq!(sizes, vec![30 * MIB, 5 * MIB]);
    assert_eq!(p.largest[0].op, CudaOp::Malloc);
}

#[test]
fn memory_from_before_the_window_is_held_but_not_allocated_in_it() {
    let recs = [
        alloc(1, 100, CudaOp::Malloc, 64 * MIB, 0xa0),
        alloc(1, 200, CudaOp::Malloc, 8 * MIB, 0xb0),
        // The window opens at 500.
        free(1, 600, 0xb0),
        alloc(1, 700, CudaOp::Malloc, 4 * MIB, 0xc0),
        // After the window's end: not replayed.
        alloc(1, 2_000, CudaOp::Malloc, 1 << 30, 0xd0),
    ];
    let r = replay((500, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    assert_eq!(p.gpu.held_bytes, 68 * MIB);
    // The peak counts what the window opened with.
    assert_eq!(p.gpu.peak_bytes, 72 * MIB);
    assert_eq!(p.gpu.peak_ns, Some(500));
    assert_eq!(p.gpu.allocated_bytes, 4 * MIB);
    assert_eq!(p.gpu.freed_bytes, 8 * MIB);
    assert_eq!((p.gpu.allocations, p.gpu.frees), (1, 1));
}

#[test]
fn frees_of_unknown_pointers_are_counted_not_ignored() {
    let mut unknown = free(1, 150, 0xdead);
    if let ReadRecord::Cuda(c) = &mut unknown {
        c.args = CudaArgs::Free {
            ptr: 0xdead,
            size: Some(3 * MIB),
            stream: None,
        };
    }
    let recs = [
        alloc(1, 100, CudaOp::Malloc, MIB, 0xa0),
        unknown,
        free(1, 160, 0xbeef),
        // cudaFree(NULL) creates the context; it frees nothing.
        free(1, 170, 0),
        // A failed free released nothing; a failed allocation is counted as failed.
        call(
            1,
            180,
            CudaOp::Free,
            1,
            CudaArgs::Free {
                ptr: 0xa0,
                size: None,
                stream: None,
            },
        ),
        call(
            1,
            190,
            CudaOp::Malloc,
            2,
            CudaArgs::Alloc {
                size: 1 << 40,
                ptr: None,
                stream: None,
            },
        ),
        call(
            1,
            195,
            CudaOp::FreeHost,
            0,
            CudaArgs::HostFree { ptr: 0x7000 },
        ),
    ];
    let r = replay((0, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    assert_eq!(p.unfollowed.unknown_frees, 2);
    assert_eq!(p.unfollowed.unknown_freed_bytes, 3 * MIB);
    assert_eq!(p.unfollowed.unknown_host_frees, 1);
    assert_eq!(p.unfollowed.failed_allocations, 1);
    assert_eq!(p.gpu.held_bytes, MIB);
    assert_eq!(p.gpu.frees, 0);
}

#[test]
fn kinds_are_kept_apart_and_pinned_is_not_gpu_memory() {
    let recs = [
        alloc(1, 100, CudaOp::Malloc, MIB, 0xa0),
        alloc(1, 110, CudaOp::CuMemAllocAsync, 2 * MIB, 0xb0),
        alloc(1, 120, CudaOp::MallocManaged, 4 * MIB, 0xc0),
        alloc(1, 130, CudaOp::MallocHost, 8 * MIB, 0x7000),
        alloc(1, 140, CudaOp::CuMemHostAlloc, 16 * MIB, 0x8000),
        call(
            1,
            150,
            CudaOp::CuMemFreeHost,
            0,
            CudaArgs::HostFree { ptr: 0x8000 },
        ),
    ];
    let r = replay((0, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    let held = |k: MemKind| p.kinds[k.index()].held_bytes;
    assert_eq!(held(MemKind::Device), MIB);
    assert_eq!(held(MemKind::Pool), 2 * MIB);
    assert_eq!(held(MemKind::Managed), 4 * MIB);
    assert_eq!(held(MemKind::Pinned), 8 * MIB);
    assert_eq!(p.kinds[MemKind::Pinned.index()].peak_bytes, 24 * MIB);
    assert_eq!(p.gpu.held_bytes, 7 * MIB);
    assert_eq!(p.gpu.peak_bytes, 7 * MIB);
}

#[test]
fn a_driver_call_inside_a_runtime_memory_call_counts_once() {
    let recs = [
        alloc(1, 100, CudaOp::Malloc, MIB, 0xa0),
        nested(alloc(1, 101, CudaOp::CuMemAlloc, MIB, 0xa0), CudaOp::Malloc),
        // A driver allocation inside a launch is the only record of that memory.
        nested(
            alloc(1, 200, CudaOp::CuMemAlloc, 2 * MIB, 0xb0),
            CudaOp::LaunchKernel,
        ),
        free(1, 300, 0xa0),
        nested(free(1, 301, 0xa0), CudaOp::Free),
    ];
    let r = replay((0, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    assert_eq!(p.gpu.allocations, 2);
    assert_eq!(p.gpu.frees, 1);
    assert_eq!(
        p.unfollowed.unknown_frees, 0,
        "the nested free is not a second free"
    );
    assert_eq!(p.gpu.held_bytes, 2 * MIB);
    assert_eq!(p.gpu.peak_bytes, 3 * MIB);
}

#[test]
fn an_exit_releases_what_the_process_held_and_says_how_much() {
    let recs = [
        alloc(1, 100, CudaOp::Malloc, 6 * MIB, 0xa0),
        alloc(2, 110, CudaOp::Malloc, MIB, 0xb0),
        exit(1, 500),
        // Exited before the window: nothing to report.
        exit(2, 50),
    ];
    let r = replay((0, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    assert_eq!(p.gpu.held_bytes, 0);
    assert_eq!(p.gpu.peak_bytes, 6 * MIB);
    let e = p.exited.as_ref().expect("exit reported");
    assert_eq!((e.ts_ns, e.gpu_held_bytes), (500, 6 * MIB));
    assert_eq!(p.largest.len(), 1, "the largest at exit are kept");
    let late = replay((200, 1_000), Limits::default(), &recs[..3]);
    assert!(
        late.procs
            .iter()
            .all(|p| p.pid != 2 || p.gpu.held_bytes == MIB)
    );
}

#[test]
fn live_allocations_and_processes_are_bounded_and_losses_counted() {
    let limits = Limits {
        live: 3,
        processes: 2,
        top: 2,
    };
    let mut recs: Vec<ReadRecord> = (0..5)
        .map(|i| alloc(1, 100 + i, CudaOp::Malloc, MIB * (i + 1), 0x1000 + i))
        .collect();
    recs.push(alloc(2, 200, CudaOp::Malloc, MIB, 0x9000));
    recs.push(alloc(3, 210, CudaOp::Malloc, MIB, 0x9100));
    let r = replay((0, 1_000), limits, &recs);
    let p = proc(&r, 1);
    assert_eq!(p.gpu.live_allocations, 3);
    assert_eq!(p.gpu.held_bytes, 6 * MIB);
    assert_eq!(p.unfollowed.untracked_allocations, 2);
    assert_eq!(p.unfollowed.untracked_bytes, 9 * MIB);
    // Process 2 found the live bound full too.
    assert_eq!(r.over_limit, 3);
    assert_eq!(r.untracked_process_calls, 1);
    assert!(r.procs.iter().all(|p| p.pid != 3));
    assert_eq!(p.largest.len(), 2, "only the top N are kept");
    assert_eq!(p.largest[0].size, 3 * MIB);
}

mod recorded {
    //! `query --memory` end to end on a recording written by the real recorder.

    use ingero_ebpf::CudaOp;
    use ingero_trace::model::{CudaArgs, TimelineRecord};
    use ingero_trace::synth::{cuda, task};

    use crate::analyze::SelectionSpec;
    use crate::analyze::tests::fixtures::{self, MS, T0, label};

    const A: u32 = 7_000_001;
    const B: u32 = 7_000_002;

    fn alloc(pid: u32, ts: u64, size: u64, ptr: u64) -> TimelineRecord {
        let t = task(pid, pid, &format!("rank{}", pid % 10));
        let args = CudaArgs::Alloc {
            size,
            ptr: Some(ptr),
            stream: None,
        };
        cuda(t, ts, 1_000, CudaOp::Malloc, 0, args)
    }

    fn host(pid: u32, ts: u64, op: CudaOp, args: CudaArgs) -> TimelineRecord {
        cuda(
            task(pid, pid, &format!("rank{}", pid % 10)),
            ts,
            1_000,
            op,
            0,
            args,
        )
    }

    fn free(pid: u32, ts: u64, ptr: u64) -> TimelineRecord {
        let t = task(pid, pid, &format!("rank{}", pid % 10));
        let args = CudaArgs::Free {
            ptr,
            size: None,
            stream: None,
        };
        cuda(t, ts, 1_000, CudaOp::Free, 0, args)
    }

    #[test]
    fn query_memory_reports_held_peak_rank_and_labels_per_process() {
        let recs = vec![
            label(A, T0, "rank", "0"),
            label(B, T0, "rank", "1"),
            label(A, T0 + MS, "step", "1"),
            alloc(A, T0 + 2 * MS, 100 << 20, 0xa000),
            alloc(A, T0 + 3 * MS, 50 << 20, 0xb000),
            free(A, T0 + 4 * MS, 0xa000),
            free(A, T0 + 5 * MS, 0xdead),
            host(
                A,
                T0 + 6 * MS,
                CudaOp::MallocHost,
                CudaArgs::HostAlloc {
                    size: 1 << 20,
                    ptr: Some(0x7f00_0000),
                },
            ),
            host(
                A,
                T0 + 7 * MS,
                CudaOp::FreeHost,
                CudaArgs::HostFree { ptr: 0x7f00_0000 },
            ),
            label(A, T0 + 8 * MS, "step", "2"),
            alloc(A, T0 + 9 * MS, 10 << 20, 0xc000),
            alloc(B, T0 + 2 * MS, 300 << 20, 0xa000),
        ];
        let path = fixtures::write("memory-query", recs);
        let an = fixtures::open(&path, &SelectionSpec::default());
        let report = crate::analyze::memory::query(&an).expect("memory report");
        let v = report.json().value();
        let procs = v["processes"].as_array().expect("processes");
        assert_eq!(procs.len(), 2);
        let (b, a) = (&procs[0], &procs[1]);
        assert_eq!(b["pid"], B, "most held first");
        assert_eq!(b["rank"], 1);
        assert_eq!(b["held_bytes"], 300u64 << 20);
        assert_eq!(a["rank"], 0);
        assert_eq!(a["command"], "rank1");
        assert_eq!(a["held_bytes"], 60u64 << 20);
        assert_eq!(a["peak_bytes"], 150u64 << 20);
        assert_eq!(a["peak_ns"], T0 + 3 * MS);
        assert_eq!(a["kinds"]["device"]["held_bytes"], 60u64 << 20);
        assert_eq!(a["pinned"]["peak_bytes"], 1u64 << 20);
        assert_eq!(a["pinned"]["held_bytes"], 0);
        assert_eq!(a["unknown_frees"], 1);
        assert_eq!(
            a["unknown_host_frees"], 0,
            "the host free found its pointer"
        );
        let largest = a["largest"].as_array().expect("largest");
        assert_eq!(largest[0]["size_bytes"], 50u64 << 20);
        assert_eq!(largest[0]["labels"]["step"], "1");
        assert_eq!(largest[1]["labels"]["step"], "2");
        assert_eq!(largest[1]["op"], "cudaMalloc");
        assert!(
            v["caveat"]
                .as_str()
                .is_some_and(|c| c.contains("before tracing"))
        );
        let text = report.text(an.origin());
        assert!(text.contains("largest live allocations"), "{text}");
        assert!(text.contains("1 unknown free(s)"), "{text}");
        // At a moment: held then, not at the end.
        let at = fixtures::open(
            &path,
            &SelectionSpec {
                at: Some("+3500us".into()),
                pids: vec![A],
                ..Default::default()
            },
        );
        let v = crate::analyze::memory::query(&at)
            .expect("memory at")
            .json()
            .value();
        assert_eq!(v["processes"].as_array().map(Vec::len), Some(1));
        assert_eq!(v["processes"][0]["held_bytes"], 150u64 << 20);
        let bad = fixtures::open(
            &path,
            &SelectionSpec {
                ops: vec!["cudaMalloc".into()],
                ..Default::default()
            },
        );
        assert!(crate::analyze::memory::query(&bad).is_err());
    }
}
