//! Tests of the communicator map: identities on every rank, collective numbers, splits, ends,
//! exits and the bound.

use super::*;
use ingero_trace::model::{CommSplit, Communicator, NcclRedOp, NcclType, unique_id};

fn call(pid: u32, op: CudaOp, ret: i32, args: CudaArgs) -> CudaCall {
    CudaCall {
        ts_ns: 1,
        duration_ns: 1,
        task: ingero_trace::synth::task(pid, pid, "rank"),
        op,
        ret,
        args,
        detail: Default::default(),
    }
}

/// `ncclCommInitRank` as the decoder names it: handle `comm`, rank `rank` of 4.
fn init(pid: u32, comm: u64, rank: i32, id: u64) -> CudaCall {
    call(
        pid,
        CudaOp::NcclCommInitRank,
        0,
        CudaArgs::CommCreate {
            made: Communicator {
                comm,
                id: Some(id),
                rank: Some(rank),
                nranks: Some(4),
            },
            split: None,
        },
    )
}

fn all_reduce(pid: u32, comm: u64, ret: i32) -> CudaCall {
    call(
        pid,
        CudaOp::NcclAllReduce,
        ret,
        CudaArgs::Collective {
            count: 1024,
            datatype: NcclType(7),
            red_op: Some(NcclRedOp(0)),
            root: None,
            on: Communicator {
                comm,
                ..Communicator::default()
            },
            stream: 0,
            seq: None,
        },
    )
}

/// What a collective was told: its communicator and its number.
fn told(c: &CudaCall) -> (Communicator, Option<u64>) {
    match c.args {
        CudaArgs::Collective { on, seq, .. } => (on, seq),
        CudaArgs::PointToPoint { on, .. } => (on, None),
        _ => panic!("not a collective: {:?}", c.args),
    }
}

fn followed(comms: &mut Communicators, mut c: CudaCall) -> CudaCall {
    comms.follow(&mut c);
    c
}

#[test]
fn collectives_are_told_their_communicator_and_numbered_in_its_order() {
    let id = unique_id([0xfeed, 0x0200_93d9_c000_0202]);
    let mut comms = Communicators::default();
    // Two ranks in two processes: each holds its own handle for the one communicator.
    followed(&mut comms, init(10, 0xa0, 0, id));
    followed(&mut comms, init(11, 0xb0, 1, id));
    for n in 1..=3 {
        for (pid, comm, rank) in [(10, 0xa0, 0), (11, 0xb0, 1)] {
            let (on, seq) = told(&followed(&mut comms, all_reduce(pid, comm, 0)));
            assert_eq!(on.id, Some(id), "the same identity on every rank");
            assert_eq!((on.comm, on.rank, on.nranks), (comm, Some(rank), Some(4)));
            assert_eq!(seq, Some(n));
        }
    }
    // A refused call (invalid argument) queued nothing and takes no number; ncclInProgress
    // (a non-blocking communicator) did queue its work.
    assert_eq!(told(&followed(&mut comms, all_reduce(10, 0xa0, 4))).1, None);
    assert_eq!(
        told(&followed(&mut comms, all_reduce(10, 0xa0, 7))).1,
        Some(4)
    );
    // A point-to-point call is told its communicator, but never numbered.
    let send = call(
        10,
        CudaOp::NcclSend,
        0,
        CudaArgs::PointToPoint {
            count: 1,
            datatype: NcclType(0),
            peer: 1,
            on: Communicator {
                comm: 0xa0,
                ..Communicator::default()
            },
            stream: 0,
        },
    );
    assert_eq!(told(&followed(&mut comms, send)).0.rank, Some(0));
    assert_eq!(
        told(&followed(&mut comms, all_reduce(10, 0xa0, 0))).1,
        Some(5)
    );
}

#[test]
fn a_communicator_made_before_tracing_stays_unknown() {
    let mut comms = Communicators::default();
    let (on, seq) = told(&followed(&mut comms, all_reduce(10, 0xa0, 0)));
    assert_eq!((on.id, on.rank, seq), (None, None, None));
    // A failed creation wrote no handle: nothing is learned from it.
    let mut failed = init(10, 0xa0, 0, 1);
    if let CudaArgs::CommCreate { made, .. } = &mut failed.args {
        made.comm = 0;
    }
    followed(&mut comms, failed);
    assert!(comms.known.is_empty());
}

#[test]
fn a_split_takes_its_identity_from_its_parent_and_color() {
    let id = unique_id([1, 2]);
    let mut comms = Communicators::default();
    let split = |pid: u32, parent: u64, new: u64, color: i32, op: CudaOp| {
        call(
            pid,
            op,
            0,
            CudaArgs::CommCreate {
                made: Communicator {
                    comm: new,
                    ..Communicator::default()
                },
                split: Some(CommSplit {
                    parent,
                    color,
                    key: 0,
                }),
            },
        )
    };
    let made_id = |c: CudaCall| match c.args {
        CudaArgs::CommCreate { made, .. } => made.id,
        _ => None,
    };
    followed(&mut comms, init(10, 0xa0, 0, id));
    followed(&mut comms, init(11, 0xb0, 1, id));
    let a = made_id(followed(
        &mut comms,
        split(10, 0xa0, 0xa1, 3, CudaOp::NcclCommSplit),
    ));
    let b = made_id(followed(
        &mut comms,
        split(11, 0xb0, 0xb1, 3, CudaOp::NcclCommSplit),
    ));
    let other = made_id(followed(
        &mut comms,
        split(11, 0xb0, 0xb2, 4, CudaOp::NcclCommSplit),
    ));
    let shrunk = made_id(followed(
        &mut comms,
        split(11, 0xb0, 0xb3, 3, CudaOp::NcclCommShrink),
    ));
    assert_eq!(a, Some(split_id(id, 3)));
    assert_eq!(a, b, "both members of color 3 name it alike");
    assert_ne!(a, other);
    assert_ne!(a, shrunk, "a shrink is not the split of the same number");
    // Its collectives are numbered on their own, from 1.
    followed(&mut comms, all_reduce(10, 0xa0, 0));
    let (on, seq) = told(&followed(&mut comms, all_reduce(10, 0xa1, 0)));
    assert_eq!((on.id, seq), (a, Some(1)));
    // A split of an unknown parent is remembered, without an identity.
    let orphan = made_id(followed(
        &mut comms,
        split(12, 0xc0, 0xc1, 0, CudaOp::NcclCommSplit),
    ));
    assert_eq!(orphan, None);
    assert_eq!(
        told(&followed(&mut comms, all_reduce(12, 0xc1, 0))).1,
        Some(1)
    );
}

#[test]
fn a_destroyed_communicator_and_an_exited_process_are_forgotten() {
    let mut comms = Communicators::default();
    followed(&mut comms, init(10, 0xa0, 0, 1));
    followed(&mut comms, init(11, 0xb0, 1, 1));
    let end = |pid: u32, op: CudaOp| call(pid, op, 0, CudaArgs::CommEnd { comm: 0xa0 });
    followed(&mut comms, end(10, CudaOp::NcclCommFinalize));
    assert_eq!(comms.known.len(), 2, "finalized, not yet destroyed");
    followed(&mut comms, end(10, CudaOp::NcclCommDestroy));
    assert_eq!(comms.known.len(), 1);
    assert_eq!(told(&followed(&mut comms, all_reduce(10, 0xa0, 0))).1, None);
    comms.forget_process(11);
    assert!(comms.known.is_empty());
}

#[test]
fn the_map_is_bounded_and_forgets_the_oldest() {
    let mut comms = Communicators::default();
    for comm in 0..(MAX_COMMUNICATORS as u64 + 3) {
        followed(&mut comms, init(10, comm + 1, 0, 1));
    }
    assert_eq!(comms.known.len(), MAX_COMMUNICATORS);
    assert_eq!(comms.forgotten, 3);
    assert_eq!(told(&followed(&mut comms, all_reduce(10, 1, 0))).1, None);
    let newest = MAX_COMMUNICATORS as u64 + 3;
    assert_eq!(
        told(&followed(&mut comms, all_reduce(10, newest, 0))).1,
        Some(1)
    );
}
