//! `explain` findings: one rule per file, each with its thresholds as named constants
//! (documented in docs/explain-and-query.md). A rule reads the aggregation and returns
//! [`Finding`]s; [`run_all`] orders them most severe first, deterministically.

mod cold_start;
mod contention;
mod context;
mod errors;
mod gpus;
mod graphs;
mod loop_rules;
mod memory;
mod nccl;
mod pageable;
mod slow_groups;
mod stragglers;
mod tail_latency;
mod xids;

pub use context::{ColdCall, Context, LoopGroups};

pub use cold_start::COLD_MIN_NS;
pub use contention::{CONTENTION_MIN_BINS, CONTENTION_MIN_SHARE};
pub use context::{COLD_CALL_MIN_NS, COLD_MIN_CALLS, COLD_RATIO};
pub use errors::error_name;
pub use memory::{
    LEAK_LATE_GROWTH_SHARE, LEAK_MAX_FREED_SHARE, LEAK_MIN_ALLOCS, LEAK_MIN_BYTES,
    SPIKE_MAX_GAP_CV, SPIKE_MIN_BURSTS, SPIKE_MIN_CALLS_PER_BURST,
};
pub use nccl::{NcclHost, STALL_GAP_RATIO, STALL_MIN_NS, check as nccl_check};
pub use pageable::PAGEABLE_MIN_COPIES;
pub use slow_groups::{
    CAUSE_MIN_PART, LOCAL_PEERS, SLOW_GROUP_KEYS, SLOW_GROUP_MAX_REPORTED, SLOW_MAD_K,
    SLOW_MIN_EXCESS_NS, SLOW_MIN_RATIO, UNUSUAL_MIN_EXTRA, UNUSUAL_RATIO,
};
pub(crate) use stragglers::{PARTS as WORK_PARTS, Work, excess_of, part_causes};
pub use stragglers::{
    STRAGGLER_CAUSE_SHARE, STRAGGLER_HIGH_STEPS, STRAGGLER_KEY, STRAGGLER_MIN_EXCESS_NS,
    STRAGGLER_MIN_STEP_SHARE, STRAGGLER_RATIO, STRAGGLER_WAIT_SHARE,
    grouping as straggler_grouping,
};
pub use tail_latency::{CAUSE_MIN_SHARE, TAIL_MIN_CALLS, TAIL_RATIO};
pub use xids::XID_EVIDENCE_MAX;

use serde::Serialize;
use serde_json::{Map, Value};

use super::Analysis;
use super::aggregate::Aggregate;

/// How much a finding matters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Severity {
    #[default]
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

    /// One level down (for findings about unusual but not slow work, and cold starts).
    pub fn lowered(self) -> Severity {
        match self {
            Severity::High => Severity::Medium,
            _ => Severity::Low,
        }
    }
}

/// An impact of at least this share of the recording's wall time is HIGH.
pub const IMPACT_HIGH_SHARE: f64 = 0.10;
/// At least this share (and under [`IMPACT_HIGH_SHARE`]) is MEDIUM; less is LOW.
pub const IMPACT_MEDIUM_SHARE: f64 = 0.02;
/// An impact under this is LOW whatever its share (a short recording makes any blip a
/// large share).
pub const IMPACT_MIN_NS: u64 = 1_000_000;

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

/// The interval a finding is about, on the trace clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A task that ran while a traced thread was preempted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Culprit {
    pub comm: String,
    pub tid: u32,
    /// Its process, when the recording knows the thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub ns: u64,
}

/// Part of a finding's impact, in the vocabulary of [`CauseKind`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cause {
    pub cause: CauseKind,
    pub ns: u64,
    /// Of the finding's impact (at most 1).
    pub share: f64,
    pub detail: String,
    /// For `preempted`: who ran instead, most first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<Culprit>,
}

/// What time went to: the causes `explain` names (docs/explain-and-query.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// Voluntarily off the CPU outside CUDA calls: I/O, locks, sleeps, the data loader.
    Blocked,
    /// Runnable but not running: another task had the CPU.
    Preempted,
    /// Waiting in synchronisation calls.
    Sync,
    /// In copies and memsets.
    Memcpy,
    /// In allocations and frees.
    Alloc,
    /// In kernel and graph launches.
    Launch,
    /// In NCCL's calls (collectives, point-to-point, groups, communicators).
    Nccl,
    /// In other CUDA calls.
    OtherCuda,
    /// On the CPU between CUDA calls.
    Cpu,
    /// In the first calls of an operation in a process.
    ColdStart,
}

/// Every cause, in the order of [`CauseKind::index`].
pub const CAUSE_KINDS: [CauseKind; 10] = [
    CauseKind::Blocked,
    CauseKind::Preempted,
    CauseKind::Sync,
    CauseKind::Memcpy,
    CauseKind::Alloc,
    CauseKind::Launch,
    CauseKind::Nccl,
    CauseKind::OtherCuda,
    CauseKind::Cpu,
    CauseKind::ColdStart,
];

impl CauseKind {
    /// Its place in per-cause arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Its name in JSON (`serde`'s snake case; a test keeps the two equal).
    pub const fn name(self) -> &'static str {
        match self {
            CauseKind::Blocked => "blocked",
            CauseKind::Preempted => "preempted",
            CauseKind::Sync => "sync",
            CauseKind::Memcpy => "memcpy",
            CauseKind::Alloc => "alloc",
            CauseKind::Launch => "launch",
            CauseKind::Nccl => "nccl",
            CauseKind::OtherCuda => "other_cuda",
            CauseKind::Cpu => "cpu",
            CauseKind::ColdStart => "cold_start",
        }
    }

    /// How the cause reads in a sentence.
    pub const fn text(self) -> &'static str {
        match self {
            CauseKind::Blocked => "blocked off-CPU",
            CauseKind::Preempted => "preempted",
            CauseKind::Sync => "in synchronisation",
            CauseKind::Memcpy => "in memcpy",
            CauseKind::Alloc => "in malloc/free",
            CauseKind::Launch => "in kernel launches",
            CauseKind::Nccl => "in NCCL calls",
            CauseKind::OtherCuda => "in other CUDA calls",
            CauseKind::Cpu => "on the CPU outside CUDA calls",
            CauseKind::ColdStart => "in first calls (cold start)",
        }
    }

    /// What to do about it.
    pub const fn fix(self) -> &'static str {
        match self {
            CauseKind::Blocked => {
                "The thread slept outside CUDA: look for host-side waits in this interval (data loading, I/O, locks, checkpoints); give the data loader more workers or prefetch."
            }
            CauseKind::Preempted => {
                "Another task had the CPU: pin the workload to dedicated cores (taskset, cpuset), or move or deprioritise the tasks named (nice, cgroup cpu.weight)."
            }
            CauseKind::Sync => {
                "The host waited for the GPU: compare this interval's kernels and batch sizes with the others, and avoid host synchronisation (.item(), .cpu(), torch.cuda.synchronize) where a stream event would do."
            }
            CauseKind::Memcpy => {
                "Transfers took the time: use pinned host memory, overlap copies with compute on separate streams (non_blocking=True), or move less data."
            }
            CauseKind::Alloc => {
                "cudaMalloc and cudaFree are slow and synchronise: preallocate buffers or use a caching allocator (PyTorch's default; check PYTORCH_CUDA_ALLOC_CONF and torch.cuda.empty_cache calls)."
            }
            CauseKind::Launch => {
                "More or slower launches than usual: check for a different code path here, fuse small kernels, or capture the steady part in a CUDA graph."
            }
            CauseKind::Nccl => {
                "NCCL calls held the host: a communicator's creation (ncclCommInitRank, ncclCommSplit) waits for every rank, and a communicator's first collectives set up its connections; a collective that blocks waits for its peers. Create communicators once, before the loop; if one rank is late, see the straggler and NCCL findings for which."
            }
            CauseKind::OtherCuda => {
                "Other CUDA calls (events, streams, module loads) took longer: move their setup out of the loop."
            }
            CauseKind::Cpu => {
                "The thread was busy on the CPU between CUDA calls: profile the host side (py-spy, perf) for data preparation, Python overhead or logging."
            }
            CauseKind::ColdStart => {
                "One-time start-up work: warm up before timing or serving, load modules eagerly (CUDA_MODULE_LOADING=EAGER)."
            }
        }
    }
}

/// Every rule's `kind`, as docs/explain.schema.json lists them (a test keeps them equal).
pub const KINDS: [&str; 23] = [
    "slow_group",
    "unusual_group",
    "sync_memcpy",
    "pageable_memcpy",
    "sync_in_loop",
    "alloc_churn",
    "host_bound",
    "blocking",
    "cpu_contention",
    "tail_latency",
    "straggler",
    "memory_leak",
    "allocation_spikes",
    "failed_allocation",
    "contention",
    "cold_start",
    "cuda_error",
    "cuda_graphs",
    "slow_host",
    "nccl_error",
    "nccl_desync",
    "nccl_stall",
    "gpu_xid",
];

/// One finding of `explain`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Finding {
    /// Stable for the same recording: the rule, the group and the window, hashed.
    pub id: String,
    pub severity: Severity,
    /// The rule: `slow_group`, `sync_in_loop`, `memory_leak`, ...
    pub kind: String,
    /// The host it is about, when the recordings read are several hosts' (its `window` and
    /// evidence times are on that host's trace clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub summary: String,
    /// The group the finding is about (its label values), when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Map<String, Value>>,
    /// The process it is about, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub window: Window,
    /// The wall-clock time the finding explains.
    pub impact_ns: u64,
    /// `impact_ns` over the selection's wall time.
    pub share: f64,
    /// What the impact went to, largest first (the parts carrying at least
    /// `CAUSE_MIN_PART` of it).
    pub causes: Vec<Cause>,
    pub evidence: Vec<Evidence>,
    pub root_cause: String,
    pub fixes: Vec<String>,
    /// Drops the recording counted in the stretches (about a second each) that overlap the
    /// window: an upper bound on what the trace lost there (`analyze::losses`); absent when
    /// none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops_overlapping: Option<u64>,
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

    /// The selection's wall time: its range within the recording's extent.
    pub fn wall_ns(&self) -> u64 {
        let start = self.selection.range.start_ns.max(self.index.clock.start_ns);
        self.selection_end_ns().saturating_sub(start)
    }

    /// Where the selection ends within what the recording holds (trace clock).
    pub fn selection_end_ns(&self) -> u64 {
        self.selection.range.end_ns.min(self.index.clock.end_ns)
    }

    /// The severity of an impact: by its share of the selection's wall time
    /// ([`IMPACT_HIGH_SHARE`], [`IMPACT_MEDIUM_SHARE`], [`IMPACT_MIN_NS`]).
    pub fn impact_severity(&self, impact_ns: u64) -> Severity {
        let share = impact_ns as f64 / self.wall_ns().max(1) as f64;
        if impact_ns < IMPACT_MIN_NS {
            Severity::Low
        } else if share >= IMPACT_HIGH_SHARE {
            Severity::High
        } else if share >= IMPACT_MEDIUM_SHARE {
            Severity::Medium
        } else {
            Severity::Low
        }
    }
}

/// Every rule; most severe first, then most impact (for the rules whose severity follows
/// their impact, the same as by impact), then by rule and summary so the order is stable.
pub fn run_all(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let ctx = Context::new(an, agg);
    let mut out = Vec::new();
    out.extend(slow_groups::check(&ctx));
    out.extend(loop_rules::check(&ctx));
    out.extend(tail_latency::check(an, agg));
    out.extend(stragglers::check(an, agg));
    out.extend(memory::check(
        an,
        agg,
        ctx.loop_groups().map(|l| (l.key, l.rows.len())),
    ));
    out.extend(pageable::check(an, agg));
    out.extend(contention::check(an, agg));
    out.extend(cold_start::check(&ctx));
    out.extend(errors::check(an, agg));
    out.extend(graphs::check(an, agg));
    out.extend(nccl::check_one(an, agg));
    out.extend(xids::check(an, agg));
    let wall = an.wall_ns().max(1);
    for f in &mut out {
        f.share = f.impact_ns as f64 / wall as f64;
        f.id = finding_id(f);
    }
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| b.impact_ns.cmp(&a.impact_ns))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.summary.cmp(&b.summary))
    });
    out
}

/// `KIND-HASH`: FNV-1a over the rule, the host, the labels, the process and the window (the same
/// recording and selection give the same ids; the wording of a summary does not matter).
pub(crate) fn finding_id(f: &Finding) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    eat(f.kind.as_bytes());
    // Only with several hosts, so one host's ids stay what they were.
    if let Some(host) = &f.host {
        eat(host.as_bytes());
    }
    if let Some(labels) = &f.labels {
        for (k, v) in labels {
            eat(k.as_bytes());
            eat(v.as_str().unwrap_or_default().as_bytes());
        }
    }
    eat(&f.pid.unwrap_or(u32::MAX).to_le_bytes());
    eat(&f.window.start_ns.to_le_bytes());
    eat(&f.window.end_ns.to_le_bytes());
    eat(f.summary.split(':').next().unwrap_or_default().as_bytes());
    format!("{}-{h:016x}", f.kind)
}

/// The median of a list (the lower middle for even lengths, so it is a real value); linear
/// time (a selection, not a sort: slow groups take one per group and part).
pub fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mid = (v.len() - 1) / 2;
    *v.select_nth_unstable(mid).1
}

/// `name[pid]` of a process.
pub fn proc_name(agg: &Aggregate, pid: u32) -> String {
    match agg.procs.get(&pid).map(|p| p.name.as_str()) {
        Some(n) if !n.is_empty() => format!("{n}[{pid}]"),
        _ => format!("pid {pid}"),
    }
}
