//! NCCL communicators as the probes see them: a communicator made while tracing is remembered
//! per process with what its creation said (its identity on every rank, this process's rank,
//! the number of ranks), and every collective on it is told those and numbered in its
//! communicator's order (`seq`, from 1), which NCCL requires to be the same on every rank.
//! With the identity and the number, `explain` finds the calls that make up one collective on
//! every rank and every host, and the rank that called something else or stopped calling.
//!
//! A communicator made before tracing started is unknown: its collectives keep their handle
//! and arguments but get no identity and no number (numbers counted from the middle of a run
//! would not line up across ranks).
//!
//! The map is bounded ([`Bounded`]): past [`MAX_COMMUNICATORS`] the oldest communicator is
//! forgotten (counted), so a program that makes communicators forever costs a fixed amount of
//! memory.

use ingero_ebpf::{CudaLibrary, CudaOp};
use ingero_trace::model::{CudaArgs, CudaCall, nccl_accepted, split_id};

use crate::bounded::Bounded;

/// Most communicators remembered, over every process.
pub const MAX_COMMUNICATORS: usize = 4096;

/// What a communicator's creation said, and how many collectives it has run.
#[derive(Clone, Copy, Debug)]
struct Known {
    id: Option<u64>,
    rank: Option<i32>,
    nranks: Option<i32>,
    collectives: u64,
}

/// The communicators made while tracing, per process and handle.
#[derive(Default)]
pub struct Communicators {
    known: Bounded<Known, MAX_COMMUNICATORS>,
    /// Communicators forgotten because the map was full.
    pub forgotten: u64,
}

impl Communicators {
    /// Learns from a communicator's creation, tells a collective or point-to-point call what
    /// is known of its communicator (numbering collectives), and forgets an ended
    /// communicator.
    pub fn follow(&mut self, c: &mut CudaCall) {
        let pid = c.task.pid;
        let accepted = nccl_accepted(c.ret);
        // A collective made inside another NCCL call is that call's work (none is today:
        // ncclBcast, which calls ncclBroadcast, is not probed).
        let outermost = c
            .detail
            .parent
            .is_none_or(|p| p.library() != CudaLibrary::Nccl);
        match &mut c.args {
            CudaArgs::CommCreate { made, split } if made.comm != 0 => {
                if let Some(split) = split {
                    let parent = self.known.get(&(pid, split.parent)).and_then(|k| k.id);
                    made.id = parent.map(|id| match c.op {
                        // Every survivor passes the same excluded ranks, so their count marks
                        // the new communicator; apart from the splits of the same parent.
                        CudaOp::NcclCommShrink => split_id(!id, split.color),
                        _ => split_id(id, split.color),
                    });
                }
                let known = Known {
                    id: made.id,
                    rank: made.rank,
                    nranks: made.nranks,
                    collectives: 0,
                };
                self.forgotten += u64::from(self.known.insert((pid, made.comm), known));
            }
            CudaArgs::Collective { on, seq, .. } => {
                if let Some(k) = self.known.get_mut(&(pid, on.comm)) {
                    (on.id, on.rank, on.nranks) = (k.id, k.rank, k.nranks);
                    if accepted && outermost {
                        k.collectives += 1;
                        *seq = Some(k.collectives);
                    }
                }
            }
            CudaArgs::PointToPoint { on, .. } => {
                if let Some(k) = self.known.get(&(pid, on.comm)) {
                    (on.id, on.rank, on.nranks) = (k.id, k.rank, k.nranks);
                }
            }
            CudaArgs::CommEnd { comm } if c.op != CudaOp::NcclCommFinalize => {
                // Destroyed or aborted, whatever NCCL returned: the handle is not used again.
                self.known.remove(&(pid, *comm));
            }
            _ => {}
        }
    }

    /// Forgets an exited process's communicators (its pid may be reused).
    pub fn forget_process(&mut self, pid: u32) {
        self.known.retain_pid(pid);
    }
}

#[cfg(test)]
#[path = "nccl_tests.rs"]
mod tests;
