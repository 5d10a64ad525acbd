//! Where a thread ran and what it was called, read back: a call's CPU and cgroup and its
//! thread's name are the ones its event carried, when the thread moves, changes cgroup or
//! renames itself, across restarts of the chunked sequences, after a damaged chunk, and for
//! late records.

use ingero_ebpf::{CudaOp, OffCpuReason};

use super::chunk_tests::{chunk_offsets, read_damaged};
use super::tests::{config, read_all, tmp_dir};
use super::{Recorder, RecorderConfig};
use crate::model::{
    Comm, CudaArgs, Event, FinalStats, OffCpu, ProcessOp, ReadRecord, Task, TimelineRecord,
};
use crate::synth::{self, SCENARIO_PID as P, SCENARIO_T0 as T0};

/// What a record says about where its thread ran: `(ts, tid, name, cpu, cgroup)`.
type Seen = (u64, u32, String, u32, u64);

fn seen(r: &ReadRecord) -> Option<Seen> {
    match r {
        ReadRecord::Cuda(c) => Some((
            c.ts_ns,
            c.thread.tid,
            c.thread.name.to_string(),
            c.cpu,
            c.cgroup_id,
        )),
        ReadRecord::OffCpu(o) => Some((
            o.ts_ns,
            o.thread.tid,
            o.thread.name.to_string(),
            o.cpu,
            o.cgroup_id,
        )),
        ReadRecord::Lifecycle(l) => Some((
            l.ts_ns,
            l.thread.tid,
            l.thread.name.to_string(),
            l.cpu,
            l.cgroup_id,
        )),
        _ => None,
    }
}

fn expected(t: &TimelineRecord) -> Option<Seen> {
    let TimelineRecord::Event(e) = t else {
        return None;
    };
    let k = e.task();
    Some((
        e.ts_ns(),
        k.tid,
        k.comm.as_str().into_owned(),
        k.cpu,
        k.cgroup_id,
    ))
}

/// Two threads making launch-sized calls every 2 µs; every `period` calls the first one moves
/// to another CPU, changes cgroup every third move, and renames itself once, half-way; the
/// second blocks now and then and forks once.
fn wandering(calls: u64, period: u64) -> Vec<TimelineRecord> {
    let mut a = synth::task(P, P, "python3");
    let b = synth::task(P, P + 1, "pt_worker");
    let mut out = Vec::new();
    for i in 0..calls {
        let ts = T0 + i * 2_000;
        if i > 0 && i.is_multiple_of(period) {
            a.cpu = (a.cpu + 1) % 8;
            if (i / period).is_multiple_of(3) {
                a.cgroup_id += 1;
            }
        }
        if i == calls / 2 {
            a.comm = Comm::from_str_lossy("pt_main");
        }
        let (t, args) = if i % 2 == 0 {
            (a, synth::launch_args(128, 0x5600))
        } else {
            (b, synth::launch_args(64, 0x5601))
        };
        out.push(synth::cuda(t, ts, 500, CudaOp::LaunchKernel, 0, args));
        if i % 997 == 1 {
            out.push(TimelineRecord::Event(Event::OffCpu(OffCpu {
                ts_ns: ts + 600,
                duration_ns: 300,
                task: Task { cpu: 5, ..b },
                reason: OffCpuReason::Blocked,
                prev_state: 1,
                next_tid: 0,
                next_comm: Comm::from_str_lossy("swapper/5"),
            })));
        }
        if i == calls / 3 {
            out.push(synth::lifecycle(
                Task { cpu: 6, ..b },
                ts + 700,
                ProcessOp::Fork,
                P + 9,
                "child",
            ));
        }
    }
    out
}

fn write(dir: &std::path::Path, name: &str, cfg: RecorderConfig, records: &[TimelineRecord]) {
    let mut rec = Recorder::create_with(
        RecorderConfig {
            path: Some(dir.join(name)),
            ..cfg
        },
        false,
    )
    .expect("create");
    for r in records {
        rec.write(r).expect("write");
    }
    rec.finish(&FinalStats::default()).expect("finish");
}

fn sorted(mut v: Vec<Seen>) -> Vec<Seen> {
    v.sort();
    v
}

#[test]
fn every_record_carries_the_cpu_cgroup_and_name_of_its_event() {
    let dir = tmp_dir("placement");
    let records = wandering(60_000, 500);
    let want = sorted(records.iter().filter_map(expected).collect());
    // Plain packets; chunks restarting every chunk; chunks never restarting.
    for (name, level, restart_bytes) in [
        ("plain.pftrace", 0, 1),
        ("each.pftrace", 1, 1),
        ("never.pftrace", 1, u64::MAX),
    ] {
        let cfg = RecorderConfig {
            compression_level: level,
            restart_bytes,
            ..config(None, None)
        };
        write(&dir, name, cfg, &records);
        let got = sorted(
            read_all(vec![dir.join(name)])
                .iter()
                .filter_map(seen)
                .collect(),
        );
        assert_eq!(got.len(), want.len(), "{name}");
        if let Some(i) = (0..got.len()).find(|i| got[*i] != want[*i]) {
            panic!("{name}: record {i}: got {:?}, want {:?}", got[i], want[i]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn after_a_damaged_chunk_the_next_restart_states_every_placement_again() {
    let dir = tmp_dir("placement-damage");
    let records = wandering(120_000, 7_000);
    let want: std::collections::HashSet<Seen> = records.iter().filter_map(expected).collect();
    let cfg = RecorderConfig {
        restart_bytes: 1,
        ..config(None, None)
    };
    write(&dir, "good.pftrace", cfg, &records);
    let bytes = std::fs::read(dir.join("good.pftrace")).expect("read");
    assert!(chunk_offsets(&bytes).len() > 4, "several chunks");
    // The first thread moves every 7,000 calls, inside the damaged chunk among others: without
    // the restatement at the next chunk's restart, the records after the damage would carry
    // where it ran before (checked: they then do).
    let (got, lost, _, _) = read_damaged(&dir, "bad.pftrace", &bytes, 2);
    assert_eq!(lost, 1);
    let got: Vec<Seen> = got.iter().filter_map(seen).collect();
    assert!(got.len() > records.len() / 2, "{} records", got.len());
    for s in &got {
        assert!(want.contains(s), "{s:?} is not what its event said");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn late_records_carry_their_placement_too() {
    let dir = tmp_dir("placement-late");
    let mut records = wandering(2_000, 100);
    // Written after later ones: the late sequence.
    let t = Task {
        cpu: 7,
        cgroup_id: 99,
        ..synth::task(P, P + 1, "pt_worker")
    };
    records.push(synth::cuda(
        t,
        T0 + 1_000,
        100,
        CudaOp::Malloc,
        0,
        CudaArgs::Alloc {
            size: 64,
            ptr: Some(0x7f00),
            stream: None,
        },
    ));
    let want = sorted(records.iter().filter_map(expected).collect());
    write(&dir, "late.pftrace", config(None, None), &records);
    let got = sorted(
        read_all(vec![dir.join("late.pftrace")])
            .iter()
            .filter_map(seen)
            .collect(),
    );
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}
