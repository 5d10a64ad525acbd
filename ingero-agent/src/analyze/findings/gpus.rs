//! Which processes may share a GPU, as far as a recording tells. No call the probes see names
//! the device a process runs on, but a distributed job's launcher does: torchrun, Slurm and MPI
//! give each rank of a node its `local_rank` (recorded as a process label, docs/annotations.md),
//! and the ranks of one node run one per GPU by that number. So two ranks of the same run with
//! different local ranks do not share a GPU; anything else may.

use crate::analyze::labels::LabelIndex;
use ingero_trace::vocab::ProcessLabel;

/// Whether processes `a` and `b` may be on the same GPU: not when they are ranks of the same run
/// (the same `run_id`, or neither has one) with different `local_rank`s.
pub fn may_share_gpu(labels: &LabelIndex, a: u32, b: u32) -> bool {
    let value = |key: ProcessLabel, pid: u32| labels.process_value(key.text(), pid);
    let (Some(la), Some(lb)) = (
        value(ProcessLabel::LocalRank, a),
        value(ProcessLabel::LocalRank, b),
    ) else {
        return true;
    };
    la == lb || value(ProcessLabel::RunId, a) != value(ProcessLabel::RunId, b)
}
