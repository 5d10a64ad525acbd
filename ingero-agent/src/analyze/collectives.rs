//! NCCL's collectives as `explain`'s second pass collects them ([`CollectiveLog`]): per
//! communicator (its identity, the same on every rank), per member process, what each
//! collective was, by its number in the communicator's order (`seq`).
//!
//! NCCL requires every rank of a communicator to call the same collectives in the same order,
//! with the same count, type, operator and root. So the n-th collective of one communicator is
//! one operation on every rank: comparing what the ranks called at the same number finds a
//! rank that called something else (a desynchronised job, which hangs or computes garbage),
//! and comparing how far each rank got finds the rank the others wait for (a hang). The rules
//! are `findings/nccl.rs`.
//!
//! Collectives without a communicator identity or number (on a communicator made before
//! tracing started) cannot be compared and are only counted. Bounded: [`MAX_KEPT`]
//! collectives are kept in all (each a few dozen bytes); past it they are counted
//! ([`CollectiveLog::uncompared`]) and `explain` names the bound.

use std::collections::BTreeMap;

use ingero_ebpf::CudaOp;
use ingero_trace::model::{CudaArgs, CudaCallRecord, NcclRedOp, NcclType};

/// Collectives kept for comparison, over every communicator and process.
pub const MAX_KEPT: usize = 1 << 20;
/// A collective numbered this far past the last one of its process is not placed (a gap that
/// large would be lost records or a corrupt number; filling it would cost memory for nothing).
const MAX_GAP: u64 = 1 << 16;

/// What a collective was: every part that must be the same on every rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    pub op: CudaOp,
    pub count: u64,
    pub datatype: NcclType,
    pub red_op: Option<NcclRedOp>,
    pub root: Option<i32>,
}

impl Signature {
    /// `ncclAllReduce(1048576 × float32, sum)`, `ncclBroadcast(64 × int8, root 0)`.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}({} × {}",
            self.op.name(),
            self.count,
            self.datatype.text()
        );
        if let Some(op) = self.red_op {
            s.push_str(", ");
            s.push_str(&op.text());
        }
        if let Some(root) = self.root {
            s.push_str(&format!(", root {root}"));
        }
        s.push(')');
        s
    }
}

/// One collective of one process: what it was (`None`: a number skipped, its call not in the
/// recording) and when it started (trace clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub sig: Option<Signature>,
    pub ts_ns: u64,
}

/// One process's part in one communicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Which host's recording it is in (an index into the hosts a check is given; 0 for one
    /// recording).
    pub host: usize,
    pub pid: u32,
    /// Its rank in the communicator and the communicator's size, when the agent saw it made.
    pub rank: Option<i32>,
    pub nranks: Option<i32>,
    /// The number of its first collective in the selection.
    pub first_seq: u64,
    /// `issued[i]` is collective `first_seq + i`.
    pub issued: Vec<Issued>,
}

impl Member {
    /// The number of its last collective in the selection.
    pub fn last_seq(&self) -> u64 {
        self.first_seq + self.issued.len().saturating_sub(1) as u64
    }

    /// Its collective number `seq`, when the selection holds it.
    pub fn get(&self, seq: u64) -> Option<&Issued> {
        let i = usize::try_from(seq.checked_sub(self.first_seq)?).ok()?;
        self.issued.get(i)
    }

    /// `rank 3`, or `pid 1234` when its rank is unknown.
    pub fn rank_text(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r}"),
            None => format!("pid {}", self.pid),
        }
    }
}

/// The collectives of the selection, by communicator identity.
#[derive(Clone, Debug, Default)]
pub struct CollectiveLog {
    /// Members in the order first seen.
    pub comms: BTreeMap<u64, Vec<Member>>,
    kept: usize,
    /// Collectives not kept: past [`MAX_KEPT`], numbered far past their predecessor, or
    /// numbered before the first one kept of their process.
    pub uncompared: u64,
    /// Collectives on communicators without an identity or number (made before tracing).
    pub unidentified: u64,
}

impl CollectiveLog {
    /// Takes a collective (any other call is ignored).
    pub fn add(&mut self, c: &CudaCallRecord) {
        let CudaArgs::Collective {
            count,
            datatype,
            red_op,
            root,
            on,
            seq,
            ..
        } = c.args
        else {
            return;
        };
        let (Some(id), Some(seq)) = (on.id, seq) else {
            self.unidentified += 1;
            return;
        };
        let sig = Signature {
            op: c.op,
            count,
            datatype,
            red_op,
            root,
        };
        let members = self.comms.entry(id).or_default();
        let pid = c.thread.pid;
        let m = match members.iter().position(|m| m.pid == pid) {
            Some(i) => &mut members[i],
            None => {
                members.push(Member {
                    host: 0,
                    pid,
                    rank: on.rank,
                    nranks: on.nranks,
                    first_seq: seq,
                    issued: Vec::new(),
                });
                let last = members.len() - 1;
                &mut members[last]
            }
        };
        let next = m.first_seq + m.issued.len() as u64;
        let fill = seq.saturating_sub(next);
        let fits = seq >= m.first_seq && fill <= MAX_GAP;
        if !fits || self.kept + fill as usize + 1 > MAX_KEPT {
            self.uncompared += 1;
            return;
        }
        let issued = Issued {
            sig: Some(sig),
            ts_ns: c.ts_ns,
        };
        if seq < next {
            // Seen before (the same number twice: a restarted numbering); the later stays.
            m.issued[(seq - m.first_seq) as usize] = issued;
            return;
        }
        let gap = Issued {
            sig: None,
            ts_ns: c.ts_ns,
        };
        m.issued.extend(std::iter::repeat_n(gap, fill as usize));
        m.issued.push(issued);
        self.kept += fill as usize + 1;
    }

    /// Collectives kept.
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// Takes the communicators out (to compare several hosts' together), leaving the counts
    /// of what was not compared.
    pub fn take_comms(&mut self) -> CollectiveLog {
        CollectiveLog {
            comms: std::mem::take(&mut self.comms),
            kept: std::mem::take(&mut self.kept),
            ..CollectiveLog::default()
        }
    }

    /// Moves `other`'s communicators in, its members marked as host `host` (several hosts'
    /// recordings compared together).
    pub fn absorb(&mut self, other: CollectiveLog, host: usize) {
        for (id, members) in other.comms {
            self.comms
                .entry(id)
                .or_default()
                .extend(members.into_iter().map(|m| Member { host, ..m }));
        }
        self.kept += other.kept;
        self.uncompared += other.uncompared;
        self.unidentified += other.unidentified;
    }
}

#[cfg(test)]
#[path = "collectives_tests.rs"]
mod tests;
