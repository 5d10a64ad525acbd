//! Stragglers: which rank was the slow one. For every step that several processes share
//! (ranks of a job: processes with a `rank` label, or any processes carrying the same
//! `step`), the processes' steps are compared.
//!
//! In synchronous data-parallel training the ranks' step times come out equal: the fast ranks
//! wait in a collective or a synchronisation for the slow one. So a rank is judged by its
//! **own work** (the step's wall time minus its synchronisation wait: on-CPU time, off-CPU
//! time, memcpy, launches and other CUDA calls), not its step time. The straggler is the
//! process with the most own work, when that is at least [`STRAGGLER_RATIO`] × the median of
//! the others, [`STRAGGLER_MIN_EXCESS_NS`] more, and that excess at least
//! [`STRAGGLER_MIN_STEP_SHARE`] of the step's wall time; where steps differ outright (nobody
//! waits), this is simply the slowest. What made up the excess is named like the slow-group
//! rule does, part by part against the others' medians ([`STRAGGLER_CAUSE_SHARE`]).
//!
//! Synchronisation wait is CUDA synchronisation (`CudaOp::is_sync`) and the time in NCCL's
//! calls (a collective that blocks, a communicator's creation, waits for the other ranks; a
//! non-blocking one is its short enqueue). A thread waiting on the device usually sleeps, so
//! off-CPU time up to the sync wait is counted as waiting, not as own work.
//!
//! The same process straggling at several steps is one finding listing them; HIGH from
//! [`STRAGGLER_HIGH_STEPS`] steps (a systematic straggler: its data shard, its host, its GPU).

use std::collections::BTreeMap;

use super::{Cause, CauseKind, Finding, Severity, Window, median, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;
use crate::analyze::groups::{GroupSpec, Grouping, PID_KEY};
use crate::analyze::labels::LabelIndex;
use crate::analyze::query::{GroupRow, RANK_KEY, group_rows};

/// The label whose groups are compared across processes.
pub const STRAGGLER_KEY: &str = "step";
/// The straggler's own work is at least this many times the others' median.
pub const STRAGGLER_RATIO: f64 = 1.5;
/// … and at least this much more (scheduling jitter is not a straggler) …
pub const STRAGGLER_MIN_EXCESS_NS: u64 = 5_000_000;
/// … and at least this share of the step's wall time (the median over its processes).
pub const STRAGGLER_MIN_STEP_SHARE: f64 = 0.1;
/// A part of the straggler's own work is named when its excess over the others' median is
/// at least this share of the whole excess.
pub const STRAGGLER_CAUSE_SHARE: f64 = 0.25;
/// The others "waited" for the straggler when their median synchronisation wait is at least
/// this share of its excess.
pub const STRAGGLER_WAIT_SHARE: f64 = 0.5;
/// Straggling at this many steps makes the finding HIGH.
pub const STRAGGLER_HIGH_STEPS: usize = 3;
/// Steps listed in a finding's summary and evidence (the rest are counted).
const STRAGGLER_LISTED: usize = 10;

/// The grouping the rule reads: steps per process. `None` without step labels.
pub fn grouping(labels: &LabelIndex) -> Option<GroupSpec> {
    labels.key(STRAGGLER_KEY).map(|_| GroupSpec {
        keys: vec![STRAGGLER_KEY.to_owned(), PID_KEY.to_owned()],
        per_process: false,
    })
}

/// A step of one process, in the terms of the rule (the slow-host rule of several hosts'
/// recordings judges hosts by the same measure).
pub(crate) struct Work {
    pub(crate) row: GroupRow,
    /// Synchronisation wait.
    pub(crate) wait: u64,
    /// The parts of its own work, in [`PARTS`] order.
    pub(crate) parts: [u64; PARTS.len()],
}

impl Work {
    pub(crate) fn own(&self) -> u64 {
        self.parts.iter().sum()
    }
}

/// The parts of own work, with the fix for a rank whose excess is mostly that part.
pub(crate) const PARTS: [(&str, &str); 6] = [
    (
        "blocked off-CPU",
        "Its CUDA thread slept where the others did not: look for host-side waits on that rank alone (data loading from a slower disk or remote store, I/O, locks, a checkpoint or log written by one rank).",
    ),
    (
        "preempted off-CPU",
        "Other tasks ran on its cores: pin each rank to dedicated cores (taskset, cpuset, the launcher's binding options) or move the preempting tasks away.",
    ),
    (
        "CPU time outside CUDA calls",
        "It computed longer on the CPU: profile that rank's host side (py-spy dump --pid PID) for uneven data preparation, rank-specific logging or evaluation.",
    ),
    (
        "memcpy",
        "It moved more or slower data: check that its batches are the same size as the others' and that its host memory is pinned.",
    ),
    (
        "kernel launches",
        "It launched more or slower: look for a code path only that rank takes, or uneven shapes (sequence lengths) in its batch.",
    ),
    (
        "other CUDA calls",
        "Its other CUDA calls (allocations, frees, events) took longer: keep cudaMalloc out of the step with preallocated buffers or a caching allocator.",
    ),
];

impl Work {
    pub(crate) fn of(row: GroupRow) -> Work {
        let t = &row.totals;
        let wait = t.sync_time_ns + t.nccl_time_ns;
        // Off-CPU time up to the wait is the wait itself (the thread sleeps on the device).
        let blocked_in_wait = t.blocked_ns.min(wait);
        let preempted_in_wait = t.preempted_ns.min(wait - blocked_in_wait);
        let blocked = t.blocked_ns - blocked_in_wait;
        let preempted = t.preempted_ns - preempted_in_wait;
        let memcpy = t.memcpy_time_ns;
        let launches = t.launch_time_ns;
        let other = t.api_time_ns.saturating_sub(wait + memcpy + launches);
        let own = row.duration_ns.saturating_sub(wait);
        let cpu = own.saturating_sub(blocked + preempted + memcpy + launches + other);
        Work {
            wait,
            parts: [blocked, preempted, cpu, memcpy, launches, other],
            row,
        }
    }
}

/// One step at which one process straggled.
struct Straggle {
    step: String,
    start_ns: u64,
    duration_ns: u64,
    own: u64,
    wait: u64,
    excess: u64,
    others: usize,
    others_own: u64,
    others_wait: u64,
    /// Parts carrying the excess, largest first.
    causes: Vec<(usize, u64)>,
    waited: bool,
}

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let is_ours = |g: &&Grouping| g.keys == [STRAGGLER_KEY, PID_KEY];
    let Some(g) = agg.groupings.iter().find(is_ours) else {
        return Vec::new();
    };
    let mut steps: BTreeMap<String, Vec<Work>> = BTreeMap::new();
    for row in group_rows(an, &agg.names, g) {
        let step = row.labels.get(STRAGGLER_KEY).and_then(|v| v.as_str());
        if let (Some(step), Some(_)) = (step.map(str::to_owned), row.pid) {
            steps.entry(step).or_default().push(Work::of(row));
        }
    }
    // By process: its steps, and whether it is a rank.
    let mut by_pid: BTreeMap<u32, (Option<u32>, Vec<Straggle>)> = BTreeMap::new();
    for (step, works) in steps {
        if works.len() < 2 {
            continue;
        }
        if let Some((pid, rank, s)) = straggler(step, &works) {
            by_pid.entry(pid).or_insert((rank, Vec::new())).1.push(s);
        }
    }
    by_pid
        .into_iter()
        .map(|(pid, (rank, list))| finding(an, agg, pid, rank, list))
        .collect()
}

/// How the participant with the most own work in a step (a rank here, a host in
/// `fleet/slow_hosts.rs`) stands against the others: the one judgement both rules make.
pub(crate) struct Excess {
    /// Where the slowest is in the slice it was judged in.
    pub(crate) at: usize,
    pub(crate) own: u64,
    /// Its own work beyond the others' median.
    pub(crate) excess: u64,
    pub(crate) others: usize,
    pub(crate) others_own: u64,
    pub(crate) others_wait: u64,
    /// The parts of the excess worth naming (index into [`PARTS`], ns), largest first.
    pub(crate) causes: Vec<(usize, u64)>,
    /// The others waited in synchronisation for much of the excess.
    pub(crate) waited: bool,
}

/// The participant of one step whose own work stands out, if one does: the most own work
/// (ties to the one `tie` orders first), at least [`STRAGGLER_RATIO`] × the others' median,
/// [`STRAGGLER_MIN_EXCESS_NS`] more, and that excess at least [`STRAGGLER_MIN_STEP_SHARE`] of
/// the step's median wall time.
pub(crate) fn excess_of<T>(
    works: &[T],
    work: impl Fn(&T) -> &Work,
    tie: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> Option<Excess> {
    let (at, slow) = works
        .iter()
        .enumerate()
        .max_by(|a, b| work(a.1).own().cmp(&work(b.1).own()).then(tie(b.1, a.1)))?;
    let slow = work(slow);
    let others: Vec<&Work> = works
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != at)
        .map(|(_, w)| work(w))
        .collect();
    let others_own = median(others.iter().map(|w| w.own()).collect());
    let others_wait = median(others.iter().map(|w| w.wait).collect());
    let own = slow.own();
    let excess = own.saturating_sub(others_own);
    let step_ns = median(works.iter().map(|w| work(w).row.duration_ns).collect());
    if excess < STRAGGLER_MIN_EXCESS_NS
        || (excess as f64) < STRAGGLER_MIN_STEP_SHARE * step_ns as f64
        || (own as f64) < STRAGGLER_RATIO * others_own as f64
    {
        return None;
    }
    let bar = (excess as f64 * STRAGGLER_CAUSE_SHARE).max(1.0);
    let mut causes: Vec<(usize, u64)> = (0..PARTS.len())
        .map(|p| {
            let m = median(others.iter().map(|w| w.parts[p]).collect());
            (p, slow.parts[p].saturating_sub(m))
        })
        .filter(|(_, d)| *d as f64 >= bar)
        .collect();
    causes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Some(Excess {
        at,
        own,
        excess,
        others: others.len(),
        others_own,
        others_wait,
        causes,
        waited: others_wait as f64 >= STRAGGLER_WAIT_SHARE * excess as f64,
    })
}

/// The straggler of one step, if one stands out.
fn straggler(step: String, works: &[Work]) -> Option<(u32, Option<u32>, Straggle)> {
    let e = excess_of(works, |w| w, |a, b| a.row.pid.cmp(&b.row.pid))?;
    let slow = &works[e.at];
    let pid = slow.row.pid?;
    Some((
        pid,
        slow.row.rank,
        Straggle {
            step,
            start_ns: slow.row.start_ns,
            duration_ns: slow.row.duration_ns,
            own: e.own,
            wait: slow.wait,
            excess: e.excess,
            others: e.others,
            others_own: e.others_own,
            others_wait: e.others_wait,
            causes: e.causes,
            waited: e.waited,
        },
    ))
}

/// Steps in their natural order (numbers as numbers).
fn step_order(a: &Straggle, b: &Straggle) -> std::cmp::Ordering {
    match (a.step.parse::<u64>(), b.step.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.step.cmp(&b.step),
    }
}

fn finding(
    an: &Analysis,
    agg: &Aggregate,
    pid: u32,
    rank: Option<u32>,
    mut list: Vec<Straggle>,
) -> Finding {
    list.sort_by(step_order);
    let who = match rank {
        Some(r) => format!("rank {r}"),
        None => proc_name(agg, pid),
    };
    let kind = if rank.is_some() { "rank" } else { "process" };
    // "the other rank", "the other 7 ranks".
    let others = |n: usize| match n {
        1 => format!("the other {kind}"),
        n => format!(
            "the other {n} {kind}{}",
            if kind == "rank" { "s" } else { "es" }
        ),
    };
    // The worst step speaks for the finding.
    let worst = list
        .iter()
        .max_by(|a, b| a.excess.cmp(&b.excess).then(b.start_ns.cmp(&a.start_ns)));
    let (made_of, waited_note, main_cause) = match worst {
        Some(w) => {
            let made_of = if w.causes.is_empty() {
                format!(
                    "+{} own work, no single part stands out",
                    fmt::dur(w.excess)
                )
            } else {
                w.causes
                    .iter()
                    .take(3)
                    .map(|(p, d)| format!("+{} {}", fmt::dur(*d), PARTS[*p].0))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let note = if w.waited {
                format!("{} waited in synchronisation", others(w.others))
            } else {
                format!(
                    "its step took longer outright; {} did not wait for it",
                    others(w.others)
                )
            };
            (made_of, note, w.causes.first().map(|(p, _)| *p))
        }
        None => (String::new(), String::new(), None),
    };
    let steps: Vec<&str> = list.iter().map(|s| s.step.as_str()).collect();
    let listed = steps
        .iter()
        .take(STRAGGLER_LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = steps.len().saturating_sub(STRAGGLER_LISTED);
    let at = match (steps.len(), more) {
        (1, _) => format!("step {listed}"),
        (n, 0) => format!("{n} steps ({listed})"),
        (n, m) => format!("{n} steps ({listed} and {m} more)"),
    };
    let total: u64 = list.iter().map(|s| s.excess).sum();
    let summary = if list.len() == 1 {
        format!("{who} was the straggler at {at}: {made_of} ({waited_note})")
    } else {
        format!(
            "{who} was the straggler at {at}, +{} in all; at its worst: {made_of} ({waited_note})",
            fmt::dur(total)
        )
    };
    let evidence = list
        .iter()
        .take(STRAGGLER_LISTED)
        .map(|s| {
            an.evidence(
                s.start_ns,
                s.duration_ns,
                format!(
                    "step {}: {who} worked {} and waited {}; {} worked {} and waited {} (medians)",
                    s.step,
                    fmt::dur(s.own),
                    fmt::dur(s.wait),
                    others(s.others),
                    fmt::dur(s.others_own),
                    fmt::dur(s.others_wait)
                ),
            )
        })
        .collect();
    let root_cause = if worst.is_some_and(|w| w.waited) {
        format!(
            "In synchronous training every rank waits for the slowest at each collective or synchronisation: {who} did more work of its own than the others ({made_of}), and they spent that time waiting for it, so the whole job ran at {who}'s pace."
        )
    } else {
        format!(
            "{who}'s steps took longer than the others' ({made_of}); they did not wait for it in traced synchronisation, so the steps are not synchronised or they wait elsewhere."
        )
    };
    let mut fixes: Vec<String> = main_cause
        .map(|p| PARTS[p].1.replace("PID", &pid.to_string()))
        .into_iter()
        .collect();
    fixes.push(format!(
        "Give every rank the same work (even data shards, sequence lengths, rank-0-only work moved off the step); if it is always {who}, check its host and GPU (clocks and throttling, a slower link, a noisy neighbour)."
    ));
    Finding {
        severity: if list.len() >= STRAGGLER_HIGH_STEPS {
            Severity::High
        } else {
            Severity::Medium
        },
        kind: "straggler".into(),
        summary,
        labels: rank.map(|r| {
            let mut m = serde_json::Map::new();
            m.insert(
                RANK_KEY.to_owned(),
                serde_json::Value::String(r.to_string()),
            );
            m
        }),
        pid: Some(pid),
        window: Window {
            start_ns: list.iter().map(|s| s.start_ns).min().unwrap_or(0),
            end_ns: list
                .iter()
                .map(|s| s.start_ns + s.duration_ns)
                .max()
                .unwrap_or(0),
        },
        impact_ns: total,
        causes: straggler_causes(&list, total),
        evidence,
        root_cause,
        fixes,
        ..Finding::default()
    }
}

/// The causes of a straggler's excess, summed over its steps.
fn straggler_causes(list: &[Straggle], total: u64) -> Vec<Cause> {
    let parts: Vec<Vec<(usize, u64)>> = list.iter().map(|s| s.causes.clone()).collect();
    part_causes(&parts, total, "the other ranks' median")
}

/// Causes from the parts (index into [`PARTS`], ns beyond the others) of each compared step,
/// summed; `others` says what they are beyond.
pub(crate) fn part_causes(steps: &[Vec<(usize, u64)>], total: u64, others: &str) -> Vec<Cause> {
    const KINDS: [CauseKind; PARTS.len()] = [
        CauseKind::Blocked,
        CauseKind::Preempted,
        CauseKind::Cpu,
        CauseKind::Memcpy,
        CauseKind::Launch,
        CauseKind::OtherCuda,
    ];
    let mut sums = [0u64; PARTS.len()];
    for causes in steps {
        for (p, ns) in causes {
            if let Some(x) = sums.get_mut(*p) {
                *x += ns;
            }
        }
    }
    let mut out: Vec<Cause> = sums
        .iter()
        .zip(KINDS)
        .zip(PARTS)
        .filter(|((ns, _), _)| **ns > 0)
        .map(|((ns, kind), (text, _))| Cause {
            cause: kind,
            ns: *ns,
            share: (*ns as f64 / total.max(1) as f64).min(1.0),
            detail: format!("{text} beyond {others}"),
            by: Vec::new(),
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.cause.cmp(&b.cause)));
    out
}
