//! Naming the raw argument words of NCCL's calls (x86-64 System V: rdi, rsi, rdx, rcx, r8, r9,
//! then the stack words the probe read). NCCL's `int` and enum arguments are 32-bit values in
//! 64-bit registers whose upper halves are not the caller's, so they are cut to 32 bits.
//!
//! What only the agent knows (a communicator's identity on every rank, a collective's place in
//! its communicator's order) is left unknown here and filled in by [`crate::nccl`].

use ingero_ebpf::{CudaOp, MAX_ARGS};
use ingero_trace::model::{CommSplit, Communicator, CudaArgs, NcclRedOp, NcclType, unique_id};

/// A 32-bit `int` argument.
fn int(word: u64) -> i32 {
    word as u32 as i32
}

/// A collective: its count and type are always the third and fourth words; what follows
/// depends on the op.
fn collective(
    a: &[u64; MAX_ARGS],
    red_op: Option<u64>,
    root: Option<u64>,
    comm: u64,
    stream: u64,
) -> CudaArgs {
    CudaArgs::Collective {
        count: a[2],
        datatype: NcclType(a[3] as u32),
        red_op: red_op.map(|w| NcclRedOp(w as u32)),
        root: root.map(int),
        on: Communicator {
            comm,
            ..Communicator::default()
        },
        stream,
        seq: None,
    }
}

/// Names the raw argument words of NCCL's `op`; `out` is the communicator the call wrote
/// through its out-pointer on success (0: none). `None` for an op that is not NCCL's.
pub fn nccl_args(op: CudaOp, a: &[u64; MAX_ARGS], ret: i32, out: u64) -> Option<CudaArgs> {
    use CudaOp::*;
    let made = |rank: Option<i32>, nranks: Option<i32>, id: Option<u64>| Communicator {
        comm: if ret == 0 { out } else { 0 },
        id,
        rank,
        nranks,
    };
    Some(match op {
        // (send, recv, count, type, op, comm, stream).
        NcclAllReduce | NcclReduceScatter => collective(a, Some(a[4]), None, a[5], a[6]),
        // (send, recv, count, type, root, comm, stream).
        NcclBroadcast | NcclGather | NcclScatter => collective(a, None, Some(a[4]), a[5], a[6]),
        // (send, recv, count, type, op, root, comm, stream).
        NcclReduce => collective(a, Some(a[4]), Some(a[5]), a[6], a[7]),
        // (send, recv, count, type, comm, stream).
        NcclAllGather | NcclAlltoAll => collective(a, None, None, a[4], a[5]),
        // (buff, count, type, peer, comm, stream).
        NcclSend | NcclRecv => CudaArgs::PointToPoint {
            count: a[1],
            datatype: NcclType(a[2] as u32),
            peer: int(a[3]),
            on: Communicator {
                comm: a[4],
                ..Communicator::default()
            },
            stream: a[5],
        },
        // (comm *, nranks, rank[, config]) with the unique id by value on the stack: the
        // probe read its first 16 bytes, zero when the read failed.
        NcclCommInitRank | NcclCommInitRankConfig => CudaArgs::CommCreate {
            made: made(
                Some(int(a[2])),
                Some(int(a[1])),
                (a[6] != 0 || a[7] != 0).then(|| unique_id([a[6], a[7]])),
            ),
            split: None,
        },
        // (comm *, nranks, rank, nId, ids *, config): the ids are behind a pointer.
        NcclCommInitRankScalable => CudaArgs::CommCreate {
            made: made(Some(int(a[2])), Some(int(a[1])), None),
            split: None,
        },
        // (comms *, ndev, devlist): comms[i] is rank i, and the probe read comms[0].
        NcclCommInitAll => CudaArgs::CommCreate {
            made: made(Some(0), Some(int(a[1])), None),
            split: None,
        },
        // (comm, color, key, newcomm *, config).
        NcclCommSplit => CudaArgs::CommCreate {
            made: made(None, None, None),
            split: Some(CommSplit {
                parent: a[0],
                color: int(a[1]),
                key: int(a[2]),
            }),
        },
        // (comm, excluded ranks *, excluded count, newcomm *, config, flags).
        NcclCommShrink => CudaArgs::CommCreate {
            made: made(None, None, None),
            split: Some(CommSplit {
                parent: a[0],
                color: int(a[2]),
                key: int(a[5]),
            }),
        },
        NcclCommFinalize | NcclCommDestroy | NcclCommAbort => CudaArgs::CommEnd { comm: a[0] },
        NcclGroupStart | NcclGroupEnd => CudaArgs::Group,
        _ => return None,
    })
}
