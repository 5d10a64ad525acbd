//! CUDA graphs: how much of the GPU work was replayed from graphs and how much launched
//! eagerly. Reported (LOW: it is context, not a problem) whenever the selection has graph
//! launches, with the replays per graph and the kernel nodes each replays when its capture
//! was traced. A replay is one `cudaGraphLaunch` for many kernels, so eager launch counts and
//! launch API time are not comparable across the two.

use super::{Finding, Severity};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;

/// Graphs named in the summary at most (the most API time first).
pub const GRAPHS_LISTED: usize = 5;

pub fn check(_an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let k = &agg.kernels;
    if k.graph_launches == 0 {
        return Vec::new();
    }
    let graphs: Vec<_> = k.rows().into_iter().filter(|r| r.kind == "graph").collect();
    let listed = graphs
        .iter()
        .take(GRAPHS_LISTED)
        .map(|g| {
            let nodes = g
                .kernel_nodes
                .map_or_else(String::new, |n| format!(", {n} kernels each"));
            format!(
                "{} replayed {}x ({}{nodes})",
                g.kernel,
                g.launches,
                fmt::dur(g.api_time_ns)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let replayed = if k.graph_kernels > 0 {
        format!(" replaying {} kernels", k.graph_kernels)
    } else {
        String::new()
    };
    vec![Finding {
        severity: Severity::Low,
        kind: "cuda_graphs".into(),
        summary: format!(
            "{} graph launches of {} graphs{replayed}; {} eager kernel launches",
            k.graph_launches,
            graphs.len(),
            k.eager_launches
        ),
        evidence: Vec::new(),
        root_cause: format!(
            "Graph replays launch their captured kernels without a launch call each: {listed}."
        ),
        fixes: vec![
            "Compare eager launch API time with the replays' before moving more work into graphs (torch.compile mode=\"reduce-overhead\", torch.cuda.CUDAGraph)".into(),
        ],
        ..Finding::default()
    }]
}
