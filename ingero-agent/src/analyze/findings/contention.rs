//! Multi-process contention: several traced processes issuing GPU work at the same time. Time
//! is cut into `activity::BINS` bins across the selection; a bin is contended when two or more
//! processes that may share a GPU spent API time in it (the ranks of a distributed job run one
//! per GPU: [`super::gpus`]). Reported when at least [`CONTENTION_MIN_BINS`] bins and
//! [`CONTENTION_MIN_SHARE`] of the active bins are contended, with each process's share of the
//! API time in the contended bins.

use super::gpus::may_share_gpu;
use super::{Finding, Severity, proc_name};
use crate::analyze::Analysis;
use crate::analyze::activity::BINS;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;

pub const CONTENTION_MIN_BINS: usize = 5;
pub const CONTENTION_MIN_SHARE: f64 = 0.10;

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let procs: Vec<(u32, &Vec<u64>)> = agg
        .activity
        .procs
        .iter()
        .map(|(p, b)| (*p, &b.api_ns))
        .filter(|(_, b)| b.iter().any(|v| *v > 0))
        .collect();
    if procs.len() < 2 {
        return Vec::new();
    }
    let mut active = 0usize;
    let mut contended: Vec<usize> = Vec::new();
    let labels = &an.index.labels;
    let mut busy: Vec<u32> = Vec::with_capacity(procs.len());
    for b in 0..BINS {
        busy.clear();
        busy.extend(
            procs
                .iter()
                .filter(|(_, bins)| bins[b] > 0)
                .map(|(p, _)| *p),
        );
        if !busy.is_empty() {
            active += 1;
        }
        let shared = busy
            .iter()
            .enumerate()
            .any(|(i, a)| busy[i + 1..].iter().any(|b| may_share_gpu(labels, *a, *b)));
        if shared {
            contended.push(b);
        }
    }
    if contended.len() < CONTENTION_MIN_BINS
        || (contended.len() as f64) < CONTENTION_MIN_SHARE * active as f64
    {
        return Vec::new();
    }
    let mut shares: Vec<(u32, u64)> = procs
        .iter()
        .map(|(p, bins)| (*p, contended.iter().map(|b| bins[*b]).sum::<u64>()))
        .filter(|(_, ns)| *ns > 0)
        .collect();
    shares.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: u64 = shares.iter().map(|s| s.1).sum();
    let list = shares
        .iter()
        .map(|(p, ns)| format!("{} {}", proc_name(agg, *p), fmt::pct(*ns, total)))
        .collect::<Vec<_>>()
        .join(", ");
    let bin = agg.activity.bin_ns;
    let first = contended.first().copied().unwrap_or(0);
    let last = contended.last().copied().unwrap_or(0);
    let mut evidence = vec![an.evidence(
        agg.activity.bin_start(first),
        bin,
        "first interval with GPU API calls from more than one process".into(),
    )];
    for (p, ns) in &shares {
        evidence.push(an.evidence(
            agg.activity.bin_start(first),
            agg.activity.bin_start(last) + bin - agg.activity.bin_start(first),
            format!(
                "{} spent {} in GPU API calls while others were active ({})",
                proc_name(agg, *p),
                fmt::dur(*ns),
                fmt::pct(*ns, total)
            ),
        ));
    }
    vec![Finding {
        severity: Severity::Medium,
        kind: "contention".into(),
        summary: format!(
            "{} processes issued GPU work at the same time in {} of the active time: {list}",
            shares.len(),
            fmt::pct(contended.len() as u64, active as u64)
        ),
        evidence,
        root_cause: "several processes share the GPU concurrently, so their work is time-sliced and each one's calls wait for the others'".into(),
        fixes: vec![
            "Give each process its own GPU (CUDA_VISIBLE_DEVICES), or partition one with MIG.".into(),
            "If they must share, use MPS with per-client limits, or schedule them so they do not overlap.".into(),
        ],
        ..Finding::default()
    }]
}
