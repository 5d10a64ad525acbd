//! Cold start: a process's first calls of an operation far slower than its steady state
//! (context creation, module loading, allocator warm-up). Reported when an operation has at
//! least [`COLD_MIN_CALLS`] calls, the mean of a process's first `processes::FIRST_CALLS`
//! calls is at least [`COLD_RATIO`] × the operation's p50 and at least [`COLD_MIN_NS`].

use super::{Finding, Severity, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;

pub const COLD_MIN_CALLS: u64 = 20;
pub const COLD_RATIO: f64 = 10.0;
pub const COLD_MIN_NS: u64 = 1_000_000;
/// Extra startup time at or above which the finding is MEDIUM rather than LOW.
const COLD_MEDIUM_NS: u64 = 1_000_000_000;

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let mut out = Vec::new();
    for (pid, p) in &agg.procs {
        let mut slow_ops: Vec<(String, u64, u64, f64)> = Vec::new();
        let mut extra = 0u64;
        for stats in agg.ops.values() {
            if stats.count < COLD_MIN_CALLS {
                continue;
            }
            let Some(first) = p.first_calls.get(&stats.op) else {
                continue;
            };
            let mean = first.iter().sum::<u64>() / first.len().max(1) as u64;
            let p50 = stats.quantile(0.5).max(1);
            let ratio = mean as f64 / p50 as f64;
            if mean >= COLD_MIN_NS && ratio >= COLD_RATIO {
                extra += first.iter().map(|d| d.saturating_sub(p50)).sum::<u64>();
                slow_ops.push((stats.op.name().to_owned(), mean, p50, ratio));
            }
        }
        if slow_ops.is_empty() {
            continue;
        }
        let who = proc_name(agg, *pid);
        let list = slow_ops
            .iter()
            .map(|(op, mean, p50, r)| {
                format!(
                    "{op} {} vs {} ({})",
                    fmt::dur(*mean),
                    fmt::dur(*p50),
                    fmt::ratio(*r)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        out.push(Finding {
            severity: if extra >= COLD_MEDIUM_NS {
                Severity::Medium
            } else {
                Severity::Low
            },
            kind: "cold_start".into(),
            summary: format!("{who}: first calls far slower than steady state: {list}"),
            evidence: vec![an.evidence(
                p.first_ns,
                extra,
                format!("{who} starts issuing CUDA calls; about {} of extra time in its first calls", fmt::dur(extra)),
            )],
            root_cause: "one-time start-up work (CUDA context creation, module loading, allocator and cuDNN/cuBLAS warm-up) lands on the first calls".into(),
            fixes: vec![
                "Warm up before timing or serving: run a few dummy iterations at start-up.".into(),
                "Load modules eagerly (CUDA_MODULE_LOADING=EAGER) or keep a long-lived worker instead of starting processes per job.".into(),
            ],
        });
    }
    out
}
