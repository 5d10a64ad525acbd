//! Cold start: a process's first calls of an operation far slower than its steady state
//! (context creation, module loading, allocator warm-up): the cold calls of
//! [`super::context`] (a first call at least `COLD_RATIO` × its operation's median and
//! `COLD_CALL_MIN_NS` slower, for operations with `COLD_MIN_CALLS` calls). Reported per
//! process when their extra time adds up to [`COLD_MIN_NS`]; its impact is that time, its
//! severity one level under what the impact would give (start-up costs are expected; they
//! matter when they are a large part of a short job). Slow groups leave this time here.

use std::collections::BTreeMap;

use super::context::{ColdCall, Context};
use super::{Cause, CauseKind, Finding, Window, proc_name};
use crate::analyze::fmt;

/// Extra start-up time a process must reach to be reported.
pub const COLD_MIN_NS: u64 = 1_000_000;

pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let mut by_pid: BTreeMap<u32, Vec<&ColdCall>> = BTreeMap::new();
    for c in &ctx.cold {
        by_pid.entry(c.pid).or_default().push(c);
    }
    let mut out = Vec::new();
    for (pid, calls) in by_pid {
        let extra: u64 = calls.iter().map(|c| c.extra_ns).sum();
        if extra < COLD_MIN_NS {
            continue;
        }
        let who = proc_name(ctx.agg, pid);
        // Per operation: its cold calls' extra time, largest first.
        let mut ops: Vec<(&str, u64, usize)> = Vec::new();
        for c in &calls {
            match ops.iter_mut().find(|(n, ..)| *n == c.op.name()) {
                Some(e) => {
                    e.1 += c.extra_ns;
                    e.2 += 1;
                }
                None => ops.push((c.op.name(), c.extra_ns, 1)),
            }
        }
        ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let list = ops
            .iter()
            .map(|(op, ns, n)| {
                format!(
                    "{op} +{} ({n} call{})",
                    fmt::dur(*ns),
                    if *n == 1 { "" } else { "s" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let first = calls.first().map_or(0, |c| c.ts_ns);
        let last = calls
            .iter()
            .map(|c| c.ts_ns + c.duration_ns)
            .max()
            .unwrap_or(first);
        let evidence = calls
            .iter()
            .take(5)
            .map(|c| {
                ctx.an.evidence(
                    c.ts_ns,
                    c.duration_ns,
                    format!(
                        "first {} of {who}: +{} over its median",
                        c.op.name(),
                        fmt::dur(c.extra_ns)
                    ),
                )
            })
            .collect();
        out.push(Finding {
            severity: ctx.an.impact_severity(extra).lowered(),
            kind: "cold_start".into(),
            summary: format!("{who}: first calls far slower than steady state, +{}: {list}", fmt::dur(extra)),
            pid: Some(pid),
            window: Window { start_ns: first, end_ns: last },
            impact_ns: extra,
            causes: vec![Cause {
                cause: CauseKind::ColdStart,
                ns: extra,
                share: 1.0,
                detail: format!("first calls of {}", ops.iter().map(|o| o.0).collect::<Vec<_>>().join(", ")),
                by: Vec::new(),
            }],
            evidence,
            root_cause: "one-time start-up work (CUDA context creation, module loading, allocator and cuDNN/cuBLAS warm-up) lands on the first calls".into(),
            fixes: vec![
                "Warm up before timing or serving: run a few dummy iterations at start-up.".into(),
                "Load modules eagerly (CUDA_MODULE_LOADING=EAGER) or keep a long-lived worker instead of starting processes per job.".into(),
            ],
            ..Finding::default()
        });
    }
    out
}
