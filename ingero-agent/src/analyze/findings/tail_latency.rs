//! Tail latency: an operation whose p99 is at least [`TAIL_RATIO`] × its p50 over at least
//! [`TAIL_MIN_CALLS`] calls. Causes are looked for around the slowest calls (those at or above
//! p99, up to `slow_calls::TOP_K`), not across the whole trace: involuntary preemption of the
//! calling thread (naming who ran instead), voluntary blocking (not for synchronisations, whose
//! sleep is the GPU wait itself), and other traced processes' GPU API activity in the same
//! window. A cause counts when it covers at least
//! [`CAUSE_MIN_SHARE`] of the slow calls' excess over p50; with none the tail is reported as
//! unexplained, at LOW.

use super::context::culprits;
use super::gpus::may_share_gpu;
use super::{Cause, CauseKind, Evidence, Finding, Severity, Window, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;
use crate::analyze::slow_calls::{CAUSE_WINDOW_NS, SlowCall};

/// p99 / p50 at or above which an operation has a tail.
pub const TAIL_RATIO: f64 = 3.0;
/// Fewer calls than this say nothing about a tail.
pub const TAIL_MIN_CALLS: u64 = 10;
/// A cause must cover this share of the slow calls' time above p50.
pub const CAUSE_MIN_SHARE: f64 = 0.25;
/// Slow calls listed as evidence.
const EVIDENCE_CALLS: usize = 5;

struct Causes {
    excess: u64,
    preempted: u64,
    blocked: u64,
    preempters: Vec<(u32, u64)>,
    /// Other processes' API time in the slow calls' windows.
    concurrent: Vec<(u32, u64)>,
}

fn causes(an: &Analysis, agg: &Aggregate, slow: &[SlowCall], p50: u64) -> Causes {
    let mut c = Causes {
        excess: 0,
        preempted: 0,
        blocked: 0,
        preempters: Vec::new(),
        concurrent: Vec::new(),
    };
    for s in slow {
        c.excess += s.duration_ns.saturating_sub(p50);
        c.preempted += s.preempted_ns;
        c.blocked += s.blocked_ns;
        for (who, ns) in &s.preempters {
            add(&mut c.preempters, *who, *ns);
        }
        let a = s.ts_ns.saturating_sub(CAUSE_WINDOW_NS);
        for (pid, ns) in agg
            .activity
            .others_api_ns(s.pid, a, s.ts_ns + s.duration_ns)
        {
            // A rank on another GPU (ranks of a job run one per GPU) slows no call of this one.
            if may_share_gpu(&an.index.labels, s.pid, pid) {
                add(&mut c.concurrent, pid, ns);
            }
        }
    }
    let order = |v: &mut Vec<(u32, u64)>| v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    order(&mut c.preempters);
    order(&mut c.concurrent);
    c
}

fn add(v: &mut Vec<(u32, u64)>, k: u32, ns: u64) {
    match v.iter_mut().find(|(x, _)| *x == k) {
        Some(e) => e.1 += ns,
        None => v.push((k, ns)),
    }
}

fn shares(list: &[(u32, u64)], name: impl Fn(u32) -> String) -> String {
    let total: u64 = list.iter().map(|x| x.1).sum();
    list.iter()
        .take(3)
        .map(|(k, ns)| format!("{} ({})", name(*k), fmt::pct(*ns, total)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let mut out = Vec::new();
    for stats in agg.ops.values() {
        if stats.count < TAIL_MIN_CALLS {
            continue;
        }
        let (p50, p99) = (stats.quantile(0.50), stats.quantile(0.99));
        if p50 == 0 || (p99 as f64) < TAIL_RATIO * p50 as f64 {
            continue;
        }
        let ratio = p99 as f64 / p50 as f64;
        let slow: Vec<SlowCall> = agg
            .slow
            .of(stats.op)
            .into_iter()
            .filter(|s| s.duration_ns >= p99)
            .collect();
        let mut c = causes(an, agg, &slow, p50);
        // A synchronisation that sleeps is waiting for the GPU: its blocked time is the wait
        // itself, not a cause of it.
        if stats.op.is_sync() {
            c.blocked = 0;
        }
        let need = (c.excess as f64 * CAUSE_MIN_SHARE) as u64;
        let mut found = Vec::new();
        let mut fixes = Vec::new();
        if c.preempted > 0 && c.preempted >= need {
            found.push(format!(
                "involuntary preemption of the calling thread: preempted {} in and up to {} before the {} slowest calls (their excess over p50: {}), by {}",
                fmt::dur(c.preempted),
                fmt::dur(CAUSE_WINDOW_NS),
                slow.len(),
                fmt::dur(c.excess),
                shares(&c.preempters, |w| agg.names.get(w).to_owned())
            ));
            let top = c
                .preempters
                .first()
                .map_or("the other tasks", |(w, _)| agg.names.get(*w));
            fixes.push(format!(
                "Keep {top} off the CPUs of the CUDA threads: pin the workload with taskset or a cpuset cgroup, or lower {top}'s priority (nice, cpu.weight)."
            ));
        }
        if c.blocked > 0 && c.blocked >= need {
            found.push(format!(
                "voluntary blocking of the calling thread: asleep {} in and up to {} before the {} slowest calls",
                fmt::dur(c.blocked),
                fmt::dur(CAUSE_WINDOW_NS),
                slow.len()
            ));
            fixes.push("Find what the thread waits for around these calls (locks, page faults, I/O, a data loader) and move it off the CUDA thread.".into());
        }
        let conc: u64 = c.concurrent.iter().map(|x| x.1).sum();
        if conc > 0 && conc >= need {
            found.push(format!(
                "concurrent GPU activity of other processes: {} of API time by {}",
                fmt::dur(conc),
                shares(&c.concurrent, |p| proc_name(agg, p))
            ));
            fixes.push("Give the processes separate GPUs, or serialise them (MPS limits, a scheduler) so they do not share one device at the same time.".into());
        }
        // An unexplained tail is LOW; an explained one matters as much as its excess.
        let severity = if found.is_empty() {
            Severity::Low
        } else {
            an.impact_severity(c.excess)
        };
        let mut cause_list = Vec::new();
        for (kind, ns) in [
            (CauseKind::Preempted, c.preempted),
            (CauseKind::Blocked, c.blocked),
        ] {
            if ns > 0 && ns >= need {
                let by = if kind == CauseKind::Preempted {
                    culprits(agg, &c.preempters)
                } else {
                    Vec::new()
                };
                // The window reaches before the calls: what it holds can exceed their
                // excess, which is all a cause can explain.
                let ns = ns.min(c.excess);
                cause_list.push(Cause {
                    cause: kind,
                    ns,
                    share: (ns as f64 / c.excess.max(1) as f64).min(1.0),
                    detail: format!(
                        "in and up to {} before the slowest calls",
                        fmt::dur(CAUSE_WINDOW_NS)
                    ),
                    by,
                });
            }
        }
        cause_list.sort_by_key(|c| std::cmp::Reverse(c.ns));
        let window = Window {
            start_ns: slow.iter().map(|s| s.ts_ns).min().unwrap_or(0),
            end_ns: slow
                .iter()
                .map(|s| s.ts_ns + s.duration_ns)
                .max()
                .unwrap_or(0),
        };
        let op = stats.op.name();
        let root_cause = if found.is_empty() {
            fixes.push("Record again with the scheduler probes enabled and annotations around the slow phase; check GPU-side causes (clocks, throttling, other GPU clients) with nvidia-smi.".into());
            format!(
                "unexplained: no preemption, blocking or concurrent GPU activity covers {} of the slow calls' time within {} before them",
                fmt::pct((CAUSE_MIN_SHARE * 100.0) as u64, 100),
                fmt::dur(CAUSE_WINDOW_NS)
            )
        } else {
            found.join("; ")
        };
        let evidence: Vec<Evidence> = slow
            .iter()
            .take(EVIDENCE_CALLS)
            .map(|s| {
                let mut what = format!("{op} on {} tid {}", proc_name(agg, s.pid), s.tid);
                if s.preempted_ns > 0 {
                    let who = s.preempters.first().map_or("?", |(w, _)| agg.names.get(*w));
                    what.push_str(&format!(
                        ", preempted {} by {who}",
                        fmt::dur(s.preempted_ns)
                    ));
                }
                if s.blocked_ns > 0 {
                    what.push_str(&format!(", blocked {}", fmt::dur(s.blocked_ns)));
                }
                an.evidence(s.ts_ns, s.duration_ns, what)
            })
            .collect();
        out.push(Finding {
            severity,
            kind: "tail_latency".into(),
            summary: format!(
                "{op} p99 {} is {} its p50 {} over {} calls{}",
                fmt::dur(p99),
                fmt::ratio(ratio),
                fmt::dur(p50),
                stats.count,
                if found.is_empty() {
                    " (unexplained)"
                } else {
                    ""
                }
            ),
            evidence,
            root_cause,
            fixes,
            window,
            impact_ns: c.excess,
            causes: cause_list,
            ..Finding::default()
        });
    }
    out
}
