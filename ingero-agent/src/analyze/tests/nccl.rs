//! NCCL in `query` and `explain`, on synthetic recordings of three ranks (one process each)
//! that label their steps and run three collectives per step on one communicator:
//! - a healthy job: the steps' rows count collectives and bytes, and nothing is found;
//! - a desynchronised one: at one step, rank 2 calls an all-gather where the others call their
//!   second all-reduce (`nccl_desync`, naming rank 2 and the collective's number);
//! - a hung one: rank 2 stops calling collectives while the others go on and then wait
//!   (`nccl_stall`), and the same job cut short, where nobody waited long enough;
//! - the same job split over two hosts' recordings, compared across hosts;
//! - collectives on a communicator made before tracing started, which are only counted.

use std::path::{Path, PathBuf};

use ingero_ebpf::CudaOp;
use serde_json::Value;

use super::fixtures::{self, MS, T0, US, step};
use crate::analyze::fleet::{Fleet, report};
use crate::analyze::{self, QueryMode, SelectionSpec};
use ingero_trace::model::{
    Communicator, CudaArgs, FinalStats, NcclRedOp, NcclType, SessionInfo, TimelineRecord,
};
use ingero_trace::synth::{cuda, task};
use ingero_trace::write::{Recorder, RecorderConfig};

/// The ranks' processes.
pub(super) const PIDS: [u32; 3] = [7_000_010, 7_000_011, 7_000_012];
/// The communicator's identity (the same on every rank).
const COMM_ID: u64 = 0x5f1c_2a9e_81b3_d004;
/// Steps, 100 ms each.
pub(super) const STEPS: u64 = 20;
/// Elements of the first all-reduce (float32).
const COUNT: u64 = 1 << 20;

/// What the job does wrong.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Plan {
    Healthy,
    /// Rank 2's second collective of step 12 is an all-gather.
    Desync,
    /// Rank 2 calls no collective from step 10 on; the others run to step 19, then the
    /// recording goes on for `tail_ms` (rank 0 polls its stream meanwhile).
    Stall {
        tail_ms: u64,
    },
    /// As healthy, but the communicator was made before tracing (no identity, no numbers).
    Unidentified,
}

fn collective(
    rank: usize,
    ts: u64,
    seq: u64,
    op: CudaOp,
    count: u64,
    plan: Plan,
) -> TimelineRecord {
    let known = plan != Plan::Unidentified;
    let red_op = (op != CudaOp::NcclAllGather).then_some(NcclRedOp(0));
    cuda(
        task(PIDS[rank], PIDS[rank], "train"),
        ts,
        50 * US,
        op,
        0,
        CudaArgs::Collective {
            count,
            datatype: NcclType(7),
            red_op,
            root: None,
            on: Communicator {
                comm: 0x5500_0000 + rank as u64,
                id: known.then_some(COMM_ID),
                rank: known.then_some(rank as i32),
                nranks: known.then_some(3),
            },
            stream: 0x10,
            seq: known.then_some(seq),
        },
    )
}

/// The job's records; `ranks` are the ranks this recording holds (a host's).
pub(super) fn job(plan: Plan, ranks: &[usize]) -> Vec<TimelineRecord> {
    let mut v = Vec::new();
    for &rank in ranks {
        let pid = PIDS[rank];
        let mut seq = 0;
        for s in 0..STEPS {
            let ts = T0 + s * 100 * MS + rank as u64 * 10 * US;
            v.push(step(pid, ts, &s.to_string()));
            if let Plan::Stall { .. } = plan {
                if rank == 2 && s >= 10 {
                    continue;
                }
            }
            for k in 0..3u64 {
                seq += 1;
                let (op, count) = match (plan, rank, s, k) {
                    (Plan::Desync, 2, 12, 1) => (CudaOp::NcclAllGather, COUNT / 3),
                    (_, _, _, 0) => (CudaOp::NcclAllReduce, COUNT),
                    _ => (CudaOp::NcclAllReduce, 4096),
                };
                v.push(collective(
                    rank,
                    ts + (10 + 20 * k) * MS,
                    seq,
                    op,
                    count,
                    plan,
                ));
            }
            v.push(fixtures::sync(
                task(pid, pid, "train"),
                ts + 80 * MS,
                10 * MS,
            ));
        }
    }
    if let Plan::Stall { tail_ms } = plan {
        if ranks.contains(&0) {
            let t = task(PIDS[0], PIDS[0], "train");
            let end = T0 + STEPS * 100 * MS;
            for i in 0..tail_ms / 100 {
                v.push(fixtures::sync(t, end + i * 100 * MS, 100 * US));
            }
        }
    }
    v
}

/// Writes one host's recording.
pub(super) fn write(path: &Path, host: &str, mut records: Vec<TimelineRecord>) {
    records.sort_by_key(TimelineRecord::ts_ns);
    let cfg = RecorderConfig {
        path: Some(path.to_path_buf()),
        session: SessionInfo {
            host: host.to_owned(),
            machine_name: host.to_owned(),
            command_line: "ingero trace --record".into(),
            ..SessionInfo::default()
        },
        chown_to_sudo_user: false,
        machine_id: Some(11),
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false).expect("recorder");
    for r in &records {
        rec.write(r).expect("write");
    }
    rec.finish(&FinalStats::default()).expect("finish");
}

fn one_host(name: &str, plan: Plan) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ingero-nccl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("run.pftrace");
    write(&path, "gpu-node-1", job(plan, &[0, 1, 2]));
    path
}

pub(super) fn explain_json(path: &Path) -> Value {
    let an = fixtures::open(path, &SelectionSpec::default());
    let e = analyze::explain(&an, None).expect("explain");
    serde_json::to_value(&e).expect("json")
}

pub(super) fn of_kind<'a>(e: &'a Value, kind: &str) -> Vec<&'a Value> {
    e["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["kind"] == kind).collect())
        .unwrap_or_default()
}

#[test]
fn steps_count_their_collectives_and_a_healthy_job_has_nothing_to_find() {
    let path = one_host("healthy", Plan::Healthy);
    let an = fixtures::open(&path, &SelectionSpec::default());
    let q = analyze::query(&an, &QueryMode::group_by(&["step"])).expect("query");
    let rows = q.json().value();
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), (STEPS * 3) as usize, "a row per step and rank");
    for r in rows {
        assert_eq!(r["collectives"], 3, "{r}");
        assert_eq!(r["nccl_bytes"], (COUNT + 2 * 4096) * 4, "{r}");
        assert_eq!(r["nccl_time_ns"], 150 * US, "{r}");
    }
    let text = q.text(an.origin());
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.contains("collectives")),
        "{text}"
    );
    let e = explain_json(&path);
    for kind in ["nccl_desync", "nccl_stall", "nccl_error"] {
        assert!(of_kind(&e, kind).is_empty(), "{kind}: {e:#}");
    }
}

#[test]
fn a_rank_calling_another_collective_is_a_desync_naming_it() {
    let e = explain_json(&one_host("desync", Plan::Desync));
    let found = of_kind(&e, "nccl_desync");
    assert_eq!(found.len(), 1, "{e:#}");
    let f = found[0];
    assert_eq!(f["severity"], "HIGH");
    assert_eq!(f["pid"], PIDS[2], "the odd rank out");
    // Step 12's second collective: 12 steps of three before it, then its second.
    let summary = f["summary"].as_str().expect("summary");
    assert!(
        summary.starts_with("Collective #38 on NCCL communicator 5f1c2a9e81b3d004 (3 ranks)"),
        "{summary}"
    );
    assert!(
        summary.contains("rank 0, rank 1 called ncclAllReduce(4096 × float32, sum)")
            && summary.contains("rank 2 called ncclAllGather(349525 × float32)"),
        "{summary}"
    );
    assert_eq!(f["evidence"].as_array().map(Vec::len), Some(3), "{f:#}");
}

#[test]
fn a_rank_that_stops_calling_collectives_is_a_stall_the_others_wait_for() {
    let e = explain_json(&one_host("stall", Plan::Stall { tail_ms: 8_000 }));
    let found = of_kind(&e, "nccl_stall");
    assert_eq!(found.len(), 1, "{e:#}");
    let f = found[0];
    assert_eq!(f["severity"], "HIGH");
    assert_eq!(f["pid"], PIDS[2]);
    let summary = f["summary"].as_str().expect("summary");
    assert!(
        summary.contains(
            "rank 2 stopped at collective #30 while the other ranks called #31 and went on to #60"
        ),
        "{summary}"
    );
    // Rank 0 called #31 at step 10 (+1.010 s); the recording ends with its last poll, at
    // +2 s + 7.9 s, lasting 100 µs.
    assert_eq!(
        f["impact_ns"].as_u64(),
        Some(9_900 * MS + 100 * US - 1_010 * MS)
    );
    assert!(of_kind(&e, "nccl_desync").is_empty(), "{e:#}");
}

#[test]
fn a_recording_cut_before_anyone_waited_long_reports_no_stall() {
    // The same rank stops, but the recording ends 2 s later: under the 5 s bound.
    let e = explain_json(&one_host("cut", Plan::Stall { tail_ms: 0 }));
    assert!(of_kind(&e, "nccl_stall").is_empty(), "{e:#}");
}

#[test]
fn ranks_on_several_hosts_are_compared_across_hosts() {
    let dir = std::env::temp_dir().join(format!("ingero-nccl-{}-hosts", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write(
        &dir.join("gpu-node-1/run.pftrace"),
        "gpu-node-1",
        job(Plan::Desync, &[0, 1]),
    );
    write(
        &dir.join("gpu-node-2/run.pftrace"),
        "gpu-node-2",
        job(Plan::Desync, &[2]),
    );
    let fleet = Fleet::open(Some(&dir), &SelectionSpec::default(), &[]).expect("opens");
    let e = report::explain(&fleet, None).expect("explain");
    let found: Vec<_> = e
        .findings
        .iter()
        .filter(|f| f.kind == "nccl_desync")
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one finding over both hosts: {:#?}",
        e.findings
    );
    assert_eq!(found[0].host.as_deref(), Some("gpu-node-2"));
    assert_eq!(found[0].pid, Some(PIDS[2]));
    assert!(found[0].summary.contains("#38"), "{}", found[0].summary);
    assert!(
        found[0]
            .evidence
            .iter()
            .any(|ev| ev.what.contains("on gpu-node-1")),
        "{:#?}",
        found[0].evidence
    );
}

#[test]
fn collectives_of_a_communicator_made_before_tracing_are_counted_not_compared() {
    let e = explain_json(&one_host("unidentified", Plan::Unidentified));
    assert!(of_kind(&e, "nccl_desync").is_empty() && of_kind(&e, "nccl_stall").is_empty());
    let limits = e["losses"][0]["limits"].to_string();
    assert!(
        limits.contains("180 NCCL collectives ran on communicators made before tracing started"),
        "{e:#}"
    );
}

#[test]
fn ranks_of_one_node_run_one_per_gpu_so_they_do_not_contend() {
    // Unlabelled, three processes issuing GPU work at once may share one GPU: contention.
    let e = explain_json(&one_host("contended", Plan::Healthy));
    assert_eq!(of_kind(&e, "contention").len(), 1, "{e:#}");
    // Labelled by their launcher (as the agent labels ranks from their environment), the
    // ranks of one run with their own local ranks are on their own GPUs.
    let mut records = job(Plan::Healthy, &[0, 1, 2]);
    for (rank, pid) in PIDS.iter().enumerate() {
        records.push(fixtures::label(*pid, T0, "local_rank", &rank.to_string()));
        records.push(fixtures::label(*pid, T0, "run_id", "job-7"));
    }
    let dir = std::env::temp_dir().join(format!("ingero-nccl-{}-gpus", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write(&dir.join("run.pftrace"), "gpu-node-1", records);
    let e = explain_json(&dir.join("run.pftrace"));
    assert!(of_kind(&e, "contention").is_empty(), "{e:#}");
    for f in of_kind(&e, "tail_latency") {
        assert!(
            !f["root_cause"]
                .as_str()
                .unwrap_or_default()
                .contains("concurrent GPU activity"),
            "{f:#}"
        );
    }
}
