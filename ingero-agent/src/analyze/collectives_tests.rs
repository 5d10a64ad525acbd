//! Tests of the collective log: placement by number, gaps, unknown communicators, hosts and
//! the bound.

use super::*;
use crate::analyze::tests::fixtures::call_record;
use ingero_trace::model::Communicator;

/// An all-reduce of `pid` on communicator `id`, number `seq`, at `ts`.
fn all_reduce(pid: u32, id: Option<u64>, seq: Option<u64>, count: u64, ts: u64) -> CudaCallRecord {
    let mut c = call_record(
        CudaOp::NcclAllReduce,
        CudaArgs::Collective {
            count,
            datatype: NcclType(7),
            red_op: Some(NcclRedOp(0)),
            root: None,
            on: Communicator {
                comm: 0xc0 + u64::from(pid),
                id,
                rank: Some(pid as i32),
                nranks: Some(2),
            },
            stream: 0,
            seq,
        },
        ts,
        10,
    );
    c.thread.pid = pid;
    c
}

#[test]
fn collectives_are_placed_by_number_per_process() {
    let mut log = CollectiveLog::default();
    for seq in 1..=3 {
        log.add(&all_reduce(0, Some(9), Some(seq), 8, seq * 100));
        log.add(&all_reduce(1, Some(9), Some(seq), 8, seq * 100 + 5));
    }
    // A lost call: number 5 comes after 3, 4 stays unknown.
    log.add(&all_reduce(0, Some(9), Some(5), 8, 500));
    let members = &log.comms[&9];
    assert_eq!(members.len(), 2);
    let rank0 = &members[0];
    assert_eq!((rank0.first_seq, rank0.last_seq()), (1, 5));
    assert_eq!(rank0.get(4).map(|i| i.sig), Some(None));
    assert_eq!(rank0.get(5).map(|i| i.ts_ns), Some(500));
    assert_eq!(rank0.get(6), None);
    assert_eq!(members[1].last_seq(), 3);
    assert_eq!(members[1].rank_text(), "rank 1");
    assert_eq!(
        rank0
            .get(1)
            .and_then(|i| i.sig)
            .map(|s| s.text())
            .as_deref(),
        Some("ncclAllReduce(8 × float32, sum)")
    );
    assert_eq!(log.kept(), 8, "the gap counts as kept");
}

#[test]
fn what_cannot_be_compared_is_counted() {
    let mut log = CollectiveLog::default();
    log.add(&all_reduce(0, None, None, 8, 1));
    log.add(&all_reduce(0, Some(9), None, 8, 1));
    assert_eq!(log.unidentified, 2);
    log.add(&all_reduce(0, Some(9), Some(10), 8, 2));
    // Before the first number kept, and far past the last one.
    log.add(&all_reduce(0, Some(9), Some(3), 8, 3));
    log.add(&all_reduce(0, Some(9), Some(10 + MAX_GAP + 2), 8, 4));
    assert_eq!(log.uncompared, 2);
    assert_eq!(log.comms[&9][0].issued.len(), 1);
    // Not a collective: ignored.
    log.add(&call_record(
        CudaOp::Memset,
        CudaArgs::Memset {
            count: 1,
            stream: None,
        },
        5,
        1,
    ));
    assert_eq!(log.kept(), 1);
}

#[test]
fn hosts_are_absorbed_into_one_log() {
    let mut a = CollectiveLog::default();
    a.add(&all_reduce(7, Some(9), Some(1), 8, 1));
    let mut b = CollectiveLog::default();
    b.add(&all_reduce(7, Some(9), Some(1), 8, 1));
    b.add(&all_reduce(7, None, None, 8, 1));
    // Taken out of each host's log, the counts of what was not compared stay there.
    let taken = b.take_comms();
    assert!(b.comms.is_empty() && b.kept() == 0);
    assert_eq!((taken.unidentified, b.unidentified), (0, 1));
    let mut all = CollectiveLog::default();
    all.absorb(a.take_comms(), 0);
    all.absorb(taken, 1);
    let hosts: Vec<usize> = all.comms[&9].iter().map(|m| m.host).collect();
    assert_eq!(hosts, [0, 1], "the same pid on two hosts is two members");
    assert_eq!((all.kept(), all.unidentified), (2, 0));
}

#[test]
fn the_log_is_bounded() {
    let mut log = CollectiveLog::default();
    for seq in 1..=(MAX_KEPT as u64 + 5) {
        log.add(&all_reduce(0, Some(9), Some(seq), 8, seq));
    }
    assert_eq!(log.kept(), MAX_KEPT);
    assert_eq!(log.uncompared, 5);
}
