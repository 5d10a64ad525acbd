//! `explain` findings: one rule per file, each with its thresholds as named constants
//! (documented in docs/explain-and-query.md). A rule reads the aggregation and returns
//! [`Finding`]s; [`run_all`] orders them most severe first, deterministically.

mod cold_start;
mod contention;
mod errors;
mod graphs;
mod memory;
mod slow_groups;
mod stragglers;
mod tail_latency;

pub use cold_start::{COLD_MIN_CALLS, COLD_MIN_NS, COLD_RATIO};
pub use contention::{CONTENTION_MIN_BINS, CONTENTION_MIN_SHARE};
pub use errors::error_name;
pub use memory::{
    LEAK_LATE_GROWTH_SHARE, LEAK_MAX_FREED_SHARE, LEAK_MIN_ALLOCS, LEAK_MIN_BYTES,
    SPIKE_MAX_GAP_CV, SPIKE_MIN_BURSTS, SPIKE_MIN_CALLS_PER_BURST,
};
pub use slow_groups::{
    SLOW_GROUP_KEYS, SLOW_GROUP_MAX_REPORTED, SLOW_GROUP_MIN_GROUPS, SLOW_GROUP_RATIO,
};
pub use stragglers::{
    STRAGGLER_CAUSE_SHARE, STRAGGLER_HIGH_STEPS, STRAGGLER_KEY, STRAGGLER_MIN_EXCESS_NS,
    STRAGGLER_MIN_STEP_SHARE, STRAGGLER_RATIO, STRAGGLER_WAIT_SHARE,
    grouping as straggler_grouping,
};
pub use tail_latency::{CAUSE_MIN_SHARE, TAIL_HIGH_RATIO, TAIL_MIN_CALLS, TAIL_RATIO};

use serde::Serialize;

use super::Analysis;
use super::aggregate::Aggregate;

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Low => "LOW",
            Severity::Medium => "MEDIUM",
            Severity::High => "HIGH",
        }
    }
}

/// One line of a finding's timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// Trace clock (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// After the recording's start.
    pub offset_ns: u64,
    /// Wall clock (RFC 3339, UTC), when the recording has a reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall: Option<String>,
    pub duration_ns: u64,
    pub what: String,
}

/// One finding of `explain`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// The rule: `tail_latency`, `slow_group`, `memory_leak`, ...
    pub kind: String,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    pub root_cause: String,
    pub fixes: Vec<String>,
}

impl Analysis {
    /// An evidence line at `ts_ns`.
    pub fn evidence(&self, ts_ns: u64, duration_ns: u64, what: String) -> Evidence {
        Evidence {
            ts_ns,
            offset_ns: ts_ns.saturating_sub(self.index.clock.start_ns),
            wall: self.index.clock.wall_text(ts_ns),
            duration_ns,
            what,
        }
    }
}

/// Every rule, most severe first; equal severities by rule, then summary.
pub fn run_all(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(tail_latency::check(an, agg));
    out.extend(slow_groups::check(an, agg));
    out.extend(stragglers::check(an, agg));
    out.extend(memory::check(an, agg));
    out.extend(contention::check(an, agg));
    out.extend(cold_start::check(an, agg));
    out.extend(errors::check(an, agg));
    out.extend(graphs::check(an, agg));
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.summary.cmp(&b.summary))
    });
    out
}

/// The median of a list (the lower middle for even lengths, so it is a real value).
pub fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// `name[pid]` of a process.
pub fn proc_name(agg: &Aggregate, pid: u32) -> String {
    match agg.procs.get(&pid).map(|p| p.name.as_str()) {
        Some(n) if !n.is_empty() => format!("{n}[{pid}]"),
        _ => format!("pid {pid}"),
    }
}
