//! Rules about the loop as a whole (Nsight Systems' expert-system checks, per step): each
//! looks at every iteration of the loop ([`Context::loop_groups`]: steps, epochs or the key
//! of `--by`), adds up the time one pattern costs, and reports it once with the worst
//! iterations as evidence. A pattern must show in at least [`LOOP_MIN_PRESENCE`] of the
//! iterations (a one-off is a slow group's business) and cost at least `IMPACT_MIN_NS`.
//!
//! - `sync_memcpy`: synchronous copies and memsets in the loop (the host waits for each);
//! - `sync_in_loop`: more than [`SYNC_MIN_PER_STEP`] − 1 synchronisations per iteration
//!   (one per step is the usual loss read-back; the rest is time the host could have queued
//!   work); its impact is the synchronisation time beyond one call's share per iteration;
//! - `alloc_churn`: at least [`ALLOC_MIN_PER_STEP`] allocations or frees per iteration;
//! - `host_bound`: iterations mostly on the CPU between CUDA calls ([`HOST_BOUND_CPU_SHARE`]),
//!   launching at least [`HOST_BOUND_MIN_LAUNCHES`] kernels, with little synchronisation wait
//!   ([`HOST_BOUND_MAX_SYNC_SHARE`]: a GPU-bound loop waits there instead);
//! - `blocking`: the loop's threads blocked outside CUDA calls (data loading, I/O, locks) in
//!   many iterations, [`OFF_CPU_MIN_SHARE`] of the loop's time, spread over them rather than
//!   concentrated in a few (those are slow groups);
//! - `cpu_contention`: the loop's threads preempted, by named tasks, in many iterations,
//!   [`OFF_CPU_MIN_SHARE`] of the loop's time (the whole selection when there is no loop).

use super::context::{Context, LoopGroups};
use super::{CAUSE_KINDS, Cause, CauseKind, Finding, IMPACT_MIN_NS, Window, median};
use crate::analyze::fmt;
use crate::analyze::groups::add_preempter;
use crate::analyze::query::GroupRow;
use crate::analyze::work_class::WorkClass;

/// Share of the iterations a pattern must show in.
pub const LOOP_MIN_PRESENCE: f64 = 0.5;
/// Median synchronisations per iteration from which they are a finding.
pub const SYNC_MIN_PER_STEP: u64 = 3;
/// Median allocations and frees per iteration from which they are churn.
pub const ALLOC_MIN_PER_STEP: u64 = 2;
/// Median share of an iteration on the CPU outside CUDA calls that makes it host-bound.
pub const HOST_BOUND_CPU_SHARE: f64 = 0.5;
/// Median launches per iteration a host-bound loop makes.
pub const HOST_BOUND_MIN_LAUNCHES: u64 = 10;
/// Median share of an iteration in synchronisation above which the loop waits for the GPU.
pub const HOST_BOUND_MAX_SYNC_SHARE: f64 = 0.2;
/// Off-CPU time (blocked or preempted) that is a finding: this share of the loop's time...
pub const OFF_CPU_MIN_SHARE: f64 = 0.05;
/// ...in at least this share of the iterations...
pub const OFF_CPU_MIN_PRESENCE: f64 = 0.3;
/// ...each losing at least this share of its time...
pub const OFF_CPU_ITERATION_SHARE: f64 = 0.02;
/// ...and the worst tenth of the iterations holding less than this share of it.
pub const CONCENTRATED_SHARE: f64 = 0.5;
/// Iterations listed as evidence.
const EVIDENCE_ROWS: usize = 3;

pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    match ctx.loop_groups() {
        Some(lg) => {
            let comps: Vec<_> = lg.rows.iter().map(|r| ctx.components(r)).collect();
            let l = Loop { ctx, lg, comps };
            out.extend(l.sync_memcpy());
            out.extend(l.sync_in_loop());
            out.extend(l.alloc_churn());
            out.extend(l.host_bound());
            out.extend(l.blocking());
            out.extend(l.cpu_contention());
        }
        None => out.extend(whole_selection_contention(ctx)),
    }
    out
}

/// The loop's iterations and their time split.
struct Loop<'c> {
    ctx: &'c Context<'c>,
    lg: LoopGroups<'c>,
    comps: Vec<[u64; CAUSE_KINDS.len()]>,
}

/// A pattern's cost in each iteration.
struct Pattern {
    kind: &'static str,
    cause: CauseKind,
    /// Per iteration (same order as the rows).
    parts: Vec<u64>,
    summary: String,
    root_cause: String,
    fixes: Vec<&'static str>,
}

impl Loop<'_> {
    fn rows(&self) -> &[GroupRow] {
        self.lg.rows
    }

    fn window(&self) -> Window {
        let rows = self.rows();
        Window {
            start_ns: rows.iter().map(|r| r.start_ns).min().unwrap_or(0),
            end_ns: rows.iter().map(|r| r.end_ns).max().unwrap_or(0),
        }
    }

    fn loop_ns(&self) -> u64 {
        self.rows().iter().map(|r| r.duration_ns).sum()
    }

    fn presence(&self, parts: &[u64]) -> f64 {
        parts.iter().filter(|p| **p > 0).count() as f64 / parts.len().max(1) as f64
    }

    /// Whether off-CPU time (`parts`) is spread over the loop: in at least
    /// [`OFF_CPU_MIN_PRESENCE`] of the iterations for at least [`OFF_CPU_ITERATION_SHARE`] of
    /// each, and not mostly in the worst tenth of them (time concentrated in a few iterations
    /// is theirs: `slow_group` reports them).
    fn spread(&self, parts: &[u64]) -> bool {
        let n = parts.len().max(1);
        let felt = self
            .rows()
            .iter()
            .zip(parts)
            .filter(|(r, p)| **p as f64 >= OFF_CPU_ITERATION_SHARE * r.duration_ns as f64)
            .count();
        let mut sorted = parts.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let total: u64 = sorted.iter().sum();
        let worst: u64 = sorted.iter().take(n.div_ceil(10)).sum();
        felt as f64 >= OFF_CPU_MIN_PRESENCE * n as f64
            && (worst as f64) < CONCENTRATED_SHARE * total as f64
    }

    fn calls(&self, class: WorkClass) -> Vec<u64> {
        self.rows()
            .iter()
            .map(|r| r.totals.class_calls[class.index()])
            .collect()
    }

    fn comp(&self, kind: CauseKind) -> Vec<u64> {
        self.comps.iter().map(|c| c[kind.index()]).collect()
    }

    /// The finding for a pattern, with the worst iterations as evidence.
    fn finding(&self, p: Pattern, by: &[(u32, u64)]) -> Option<Finding> {
        let impact: u64 = p.parts.iter().sum();
        if impact < IMPACT_MIN_NS {
            return None;
        }
        let key = self.lg.key;
        let mut worst: Vec<(usize, u64)> = p.parts.iter().copied().enumerate().collect();
        worst.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let evidence = worst
            .iter()
            .take(EVIDENCE_ROWS)
            .filter(|(_, ns)| *ns > 0)
            .filter_map(|(i, ns)| {
                let r = self.rows().get(*i)?;
                let value = r.labels.get(key).and_then(|v| v.as_str()).unwrap_or("?");
                Some(self.ctx.an.evidence(
                    r.start_ns,
                    r.duration_ns,
                    format!(
                        "{key}={value}: {} of its {} ({})",
                        fmt::dur(*ns),
                        fmt::dur(r.duration_ns),
                        fmt::pct(*ns, r.duration_ns)
                    ),
                ))
            })
            .collect();
        let by = self.ctx.culprits(by);
        let detail = match p.cause {
            CauseKind::Preempted => by
                .iter()
                .take(3)
                .map(|c| format!("{}[{}] {}", c.comm, c.tid, fmt::dur(c.ns)))
                .collect::<Vec<_>>()
                .join(", "),
            _ => format!(
                "{} over {} {key}s ({} of their time)",
                fmt::dur(impact),
                self.rows().len(),
                fmt::pct(impact, self.loop_ns())
            ),
        };
        Some(Finding {
            severity: self.ctx.an.impact_severity(impact),
            kind: p.kind.into(),
            summary: p.summary,
            window: self.window(),
            impact_ns: impact,
            causes: vec![Cause {
                cause: p.cause,
                ns: impact,
                share: 1.0,
                detail,
                by,
            }],
            evidence,
            root_cause: p.root_cause,
            fixes: p.fixes.into_iter().map(str::to_owned).collect(),
            ..Finding::default()
        })
    }

    fn sync_memcpy(&self) -> Option<Finding> {
        let parts: Vec<u64> = self.rows().iter().map(|r| r.totals.sync_copy_ns).collect();
        if self.presence(&parts) < LOOP_MIN_PRESENCE {
            return None;
        }
        let calls = median(
            self.rows()
                .iter()
                .map(|r| r.totals.sync_copy_calls)
                .collect(),
        );
        let per = median(parts.clone());
        let key = self.lg.key;
        self.finding(
            Pattern {
                kind: "sync_memcpy",
                cause: CauseKind::Memcpy,
                summary: format!(
                    "synchronous memcpy/memset in the {key} loop: {calls} per {key}, {} blocked in them per {key} ({} of the loop)",
                    fmt::dur(per),
                    fmt::pct(parts.iter().sum(), self.loop_ns())
                ),
                root_cause: "cudaMemcpy and cudaMemset (and their driver twins) without a stream return only when the transfer is done, after all GPU work queued before them: the host stalls and the GPU idles while it refills the queue".into(),
                fixes: vec![
                    "Use the Async forms on a stream with pinned host buffers (tensor.to(device, non_blocking=True) from pinned memory), and synchronise once where the result is needed.",
                    "Move read-backs (.item(), .cpu(), .numpy()) out of the loop or batch them every N steps.",
                ],
                parts,
            },
            &[],
        )
    }

    fn sync_in_loop(&self) -> Option<Finding> {
        let counts = self.calls(WorkClass::Sync);
        let per = median(counts.clone());
        if per < SYNC_MIN_PER_STEP {
            return None;
        }
        // Beyond one synchronisation's share per iteration.
        let parts: Vec<u64> = self
            .comp(CauseKind::Sync)
            .iter()
            .zip(&counts)
            .map(|(ns, n)| if *n <= 1 { 0 } else { ns / n * (n - 1) })
            .collect();
        let key = self.lg.key;
        let share = fmt::pct(self.comp(CauseKind::Sync).iter().sum(), self.loop_ns());
        self.finding(
            Pattern {
                kind: "sync_in_loop",
                cause: CauseKind::Sync,
                summary: format!(
                    "{per} synchronisations per {key} (median), {share} of the loop's time waiting in them"
                ),
                root_cause: "the host waits for the GPU several times per iteration, so it cannot queue the next work ahead; in PyTorch, .item(), .cpu(), .tolist(), printing a CUDA tensor and torch.cuda.synchronize() each synchronise".into(),
                fixes: vec![
                    "Keep values on the GPU (accumulate losses and metrics as tensors) and read them back once per iteration or every N iterations.",
                    "Replace device-wide synchronisation with stream events (torch.cuda.Event, cudaStreamWaitEvent).",
                ],
                parts,
            },
            &[],
        )
    }

    fn alloc_churn(&self) -> Option<Finding> {
        let counts = self.calls(WorkClass::Alloc);
        let per = median(counts);
        if per < ALLOC_MIN_PER_STEP {
            return None;
        }
        let parts = self.comp(CauseKind::Alloc);
        if self.presence(&parts) < LOOP_MIN_PRESENCE {
            return None;
        }
        let key = self.lg.key;
        self.finding(
            Pattern {
                kind: "alloc_churn",
                cause: CauseKind::Alloc,
                summary: format!(
                    "allocator churn: {per} malloc/free calls per {key} (median), {} in them per {key}",
                    fmt::dur(median(parts.clone()))
                ),
                root_cause: "device memory is allocated and freed inside the loop: cudaMalloc and cudaFree are slow and cudaFree synchronises the device".into(),
                fixes: vec![
                    "Allocate buffers once before the loop and reuse them, or use a caching or stream-ordered allocator (cudaMallocAsync with a pool).",
                    "In PyTorch: remove torch.cuda.empty_cache() from the loop and keep tensor shapes stable so the caching allocator can reuse blocks.",
                ],
                parts,
            },
            &[],
        )
    }

    fn host_bound(&self) -> Option<Finding> {
        let rows = self.rows();
        let share_of = |kind: CauseKind| {
            let v: Vec<u64> = rows
                .iter()
                .zip(&self.comps)
                .map(|(r, c)| c[kind.index()] * 1000 / r.duration_ns.max(1))
                .collect();
            median(v) as f64 / 1000.0
        };
        let launches = median(self.calls(WorkClass::Launch));
        if share_of(CauseKind::Cpu) < HOST_BOUND_CPU_SHARE
            || launches < HOST_BOUND_MIN_LAUNCHES
            || share_of(CauseKind::Sync) > HOST_BOUND_MAX_SYNC_SHARE
        {
            return None;
        }
        let parts = self.comp(CauseKind::Cpu);
        let cpu: u64 = parts.iter().sum();
        let total_launches: u64 = self.calls(WorkClass::Launch).iter().sum();
        let rate = total_launches as f64 / (self.loop_ns().max(1) as f64 / 1e9);
        let key = self.lg.key;
        self.finding(
            Pattern {
                kind: "host_bound",
                cause: CauseKind::Cpu,
                summary: format!(
                    "host-bound {key}s: {} of the loop on the CPU between CUDA calls, {launches} launches per {key} at {rate:.0}/s, little waiting for the GPU",
                    fmt::pct(cpu, self.loop_ns())
                ),
                root_cause: "the gaps between launches are the host's own work (Python, data preparation, framework overhead): the GPU waits for the next launch".into(),
                fixes: vec![
                    "Capture the steady part of the step in a CUDA graph (torch.cuda.graphs, torch.compile mode=\"reduce-overhead\") so one launch replaces many.",
                    "Fuse small kernels (torch.compile), raise the batch size, and move host-side preparation to data-loader workers.",
                ],
                parts,
            },
            &[],
        )
    }

    fn blocking(&self) -> Option<Finding> {
        let parts = self.comp(CauseKind::Blocked);
        let total: u64 = parts.iter().sum();
        if !self.spread(&parts) || (total as f64) < OFF_CPU_MIN_SHARE * self.loop_ns() as f64 {
            return None;
        }
        let key = self.lg.key;
        self.finding(
            Pattern {
                kind: "blocking",
                cause: CauseKind::Blocked,
                summary: format!(
                    "the {key} loop blocked off-CPU outside CUDA calls for {} ({} of its time, in {} of its {key}s)",
                    fmt::dur(total),
                    fmt::pct(total, self.loop_ns()),
                    fmt::pct(parts.iter().filter(|p| **p > 0).count() as u64, parts.len() as u64)
                ),
                root_cause: "the training thread sleeps waiting for the host (data loading, I/O, locks, logging) between its GPU work".into(),
                fixes: vec![CauseKind::Blocked.fix()],
                parts,
            },
            &[],
        )
    }

    fn cpu_contention(&self) -> Option<Finding> {
        let parts = self.comp(CauseKind::Preempted);
        let total: u64 = parts.iter().sum();
        if !self.spread(&parts) || (total as f64) < OFF_CPU_MIN_SHARE * self.loop_ns() as f64 {
            return None;
        }
        let mut by = Vec::new();
        for r in self.rows() {
            for (who, ns) in &r.totals.preempters {
                add_preempter(&mut by, *who, *ns);
            }
        }
        let key = self.lg.key;
        let names = names_of(self.ctx, &by);
        self.finding(
            Pattern {
                kind: "cpu_contention",
                cause: CauseKind::Preempted,
                summary: format!(
                    "CPU contention: the {key} loop's threads were preempted for {} ({} of its time), mostly by {names}",
                    fmt::dur(total),
                    fmt::pct(total, self.loop_ns())
                ),
                root_cause: format!("other tasks ({names}) ran on the CPUs of the training threads, which waited runnable"),
                fixes: vec![CauseKind::Preempted.fix()],
                parts,
            },
            &by,
        )
    }
}

/// The top preempters' names.
fn names_of(ctx: &Context<'_>, by: &[(u32, u64)]) -> String {
    let culprits = ctx.culprits(by);
    let mut names: Vec<&str> = Vec::new();
    for c in &culprits {
        if !names.contains(&c.comm.as_str()) {
            names.push(&c.comm);
        }
    }
    names.truncate(3);
    names.join(", ")
}

/// Without a loop: CPU contention over the whole selection.
fn whole_selection_contention(ctx: &Context<'_>) -> Option<Finding> {
    let t = &ctx.agg.total;
    let wall = ctx.an.wall_ns();
    if t.preempted_ns < IMPACT_MIN_NS || (t.preempted_ns as f64) < OFF_CPU_MIN_SHARE * wall as f64 {
        return None;
    }
    let by = ctx.culprits(&t.preempters);
    let names = names_of(ctx, &t.preempters);
    Some(Finding {
        severity: ctx.an.impact_severity(t.preempted_ns),
        kind: "cpu_contention".into(),
        summary: format!(
            "CPU contention: traced threads were preempted for {} ({} of the time), mostly by {names}",
            fmt::dur(t.preempted_ns),
            fmt::pct(t.preempted_ns, wall)
        ),
        window: Window {
            start_ns: t.first_ns,
            end_ns: t.last_ns,
        },
        impact_ns: t.preempted_ns,
        causes: vec![Cause {
            cause: CauseKind::Preempted,
            ns: t.preempted_ns,
            share: 1.0,
            detail: by
                .iter()
                .take(3)
                .map(|c| format!("{}[{}] {}", c.comm, c.tid, fmt::dur(c.ns)))
                .collect::<Vec<_>>()
                .join(", "),
            by,
        }],
        evidence: vec![ctx.an.evidence(
            t.first_ns,
            t.last_ns.saturating_sub(t.first_ns),
            format!("preempted {} in all", fmt::dur(t.preempted_ns)),
        )],
        root_cause: format!("other tasks ({names}) ran on the CPUs of the traced threads"),
        fixes: vec![CauseKind::Preempted.fix().to_owned()],
        ..Finding::default()
    })
}
