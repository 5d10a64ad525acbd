//! Slow groups: with annotations, the label groups (`step`, `epoch`, `request_id`, or the key
//! of `explain --by KEY`) whose wall duration or API time is at least [`SLOW_GROUP_RATIO`] ×
//! the median of their peers (at least [`SLOW_GROUP_MIN_GROUPS`] groups), saying what made up
//! the difference: synchronisation wait, memcpy, launches, other CUDA calls, off-CPU time
//! (preempted, with who ran instead, or blocked), or time on the CPU outside CUDA calls. Only
//! components that carry at least [`SLOW_GROUP_PART_SHARE`] of the difference are named and
//! get a fix, so a +12 µs wait does not sit beside a +200 ms sleep as if it mattered.

use super::{Finding, Severity, median};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;
use crate::analyze::query::{GroupRow, OVERLAP_CAVEAT, group_rows, label_text};

/// The keys looked at when `--by` is not given.
pub const SLOW_GROUP_KEYS: [&str; 3] = ["step", "epoch", "request_id"];
/// A group this many times its peers' median (duration or API time) is slow.
pub const SLOW_GROUP_RATIO: f64 = 3.0;
/// Fewer groups than this have no meaningful median.
pub const SLOW_GROUP_MIN_GROUPS: usize = 3;
/// At most this many slow groups are reported per key (the slowest).
pub const SLOW_GROUP_MAX_REPORTED: usize = 5;
/// A ratio at or above this makes the finding HIGH.
const SLOW_GROUP_HIGH_RATIO: f64 = 10.0;
/// A component is named only when its excess over the median is at least this share of the
/// group's excess: of its wall duration when that is slow, or, for the parts of API time, of
/// its API time when that is slow.
pub const SLOW_GROUP_PART_SHARE: f64 = 0.1;

/// One component of a group's time, and the medians it is compared with.
struct Part {
    name: &'static str,
    value: fn(&GroupRow) -> u64,
    /// A part of the group's API time.
    api: bool,
}

const PARTS: [Part; 7] = [
    Part {
        name: "synchronisation wait",
        value: |r| r.totals.sync_time_ns,
        api: true,
    },
    Part {
        name: "memcpy",
        value: |r| r.totals.memcpy_time_ns,
        api: true,
    },
    Part {
        name: "kernel launches",
        value: |r| r.totals.launch_time_ns,
        api: true,
    },
    Part {
        name: "other CUDA calls",
        value: |r| {
            r.totals.api_time_ns.saturating_sub(
                r.totals.sync_time_ns + r.totals.memcpy_time_ns + r.totals.launch_time_ns,
            )
        },
        api: true,
    },
    Part {
        name: "off-CPU preempted",
        value: |r| r.totals.preempted_ns,
        api: false,
    },
    Part {
        name: "off-CPU blocked",
        value: |r| r.totals.blocked_ns,
        api: false,
    },
    Part {
        // Wall time neither in CUDA calls nor off the CPU (zero when several threads' calls
        // add up to more than the wall time).
        name: "CPU time outside CUDA calls",
        value: |r| {
            r.duration_ns
                .saturating_sub(r.totals.api_time_ns + r.totals.off_cpu_ns)
        },
        api: false,
    },
];

fn fix_for(part: &str) -> &'static str {
    match part {
        "synchronisation wait" => {
            "The GPU work queued in this group took longer: compare its kernels and batch sizes with the other groups, and avoid synchronising on the host where a stream event would do."
        }
        "memcpy" => {
            "Transfers dominate this group: use pinned host memory, overlap copies with compute on separate streams, or move less data."
        }
        "kernel launches" => {
            "More or slower launches than usual: check for a different code path in this group, or capture the steady part in a CUDA graph."
        }
        "other CUDA calls" => {
            "Other CUDA runtime calls (allocations, frees, events, stream management) took longer: keep cudaMalloc and cudaFree out of the loop with preallocated buffers or a caching allocator."
        }
        "CPU time outside CUDA calls" => {
            "The CUDA thread was busy on the CPU between CUDA calls: profile the host side of this group (py-spy, perf) for data preparation, Python overhead or logging."
        }
        "off-CPU preempted" => {
            "The CUDA thread was preempted: pin the workload to dedicated cores (taskset, cpuset) or lower the priority of the preempting tasks."
        }
        _ => {
            "The CUDA thread slept: look for host-side waits in this group (data loading, I/O, locks, checkpoints)."
        }
    }
}

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in &agg.groupings {
        if g.keys.len() != 1 {
            continue;
        }
        let rows = group_rows(an, &agg.names, g);
        if rows.len() < SLOW_GROUP_MIN_GROUPS {
            continue;
        }
        let key = &g.keys[0];
        let med_dur = median(rows.iter().map(|r| r.duration_ns).collect());
        let med_api = median(rows.iter().map(|r| r.totals.api_time_ns).collect());
        let med_parts: Vec<u64> = PARTS
            .iter()
            .map(|p| median(rows.iter().map(|r| (p.value)(r)).collect()))
            .collect();
        let ratio_of = |v: u64, m: u64| if m == 0 { 0.0 } else { v as f64 / m as f64 };
        let mut slow: Vec<(f64, f64, f64, &GroupRow)> = rows
            .iter()
            .map(|r| {
                let rd = ratio_of(r.duration_ns, med_dur);
                let ra = ratio_of(r.totals.api_time_ns, med_api);
                (rd.max(ra), rd, ra, r)
            })
            .filter(|(ratio, ..)| *ratio >= SLOW_GROUP_RATIO)
            .collect();
        slow.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.3.start_ns.cmp(&b.3.start_ns))
        });
        for (ratio, rd, ra, r) in slow.into_iter().take(SLOW_GROUP_MAX_REPORTED) {
            // What a part must reach to count, for each way the group is slow.
            let share_of = |slow_ratio: f64, v: u64, m: u64| {
                (slow_ratio >= SLOW_GROUP_RATIO)
                    .then(|| (v.saturating_sub(m) as f64 * SLOW_GROUP_PART_SHARE).max(1.0))
            };
            let dur_bar = share_of(rd, r.duration_ns, med_dur);
            let api_bar = share_of(ra, r.totals.api_time_ns, med_api);
            let mut extra: Vec<(&'static str, u64)> = PARTS
                .iter()
                .zip(&med_parts)
                .map(|(p, m)| (p, (p.value)(r).saturating_sub(*m)))
                .filter(|(p, d)| {
                    let d = *d as f64;
                    dur_bar.is_some_and(|bar| d >= bar)
                        || (p.api && api_bar.is_some_and(|bar| d >= bar))
                })
                .map(|(p, d)| (p.name, d))
                .collect();
            extra.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let name = label_text(&r.labels);
            let made_of = if extra.is_empty() {
                "no single component stands out against the median".to_owned()
            } else {
                extra
                    .iter()
                    .take(3)
                    .map(|(n, d)| format!("+{} {n}", fmt::dur(*d)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut root_cause = match extra.first() {
                Some((part, _)) if *part == "off-CPU preempted" => {
                    let who = group_preempters(r);
                    format!(
                        "the difference is mostly the CUDA thread being preempted ({made_of}); preempted by {who}"
                    )
                }
                Some((part, _)) => format!("the difference is mostly {part} ({made_of})"),
                None => made_of.clone(),
            };
            if g.overlapping {
                root_cause.push_str(". ");
                root_cause.push_str(OVERLAP_CAVEAT);
            }
            let mut evidence = vec![an.evidence(
                r.start_ns,
                r.duration_ns,
                format!(
                    "{name}: {} calls, API {}, sync {}, off-CPU {} (median {key}: {} long, API {})",
                    r.totals.cuda_calls,
                    fmt::dur(r.totals.api_time_ns),
                    fmt::dur(r.totals.sync_time_ns),
                    fmt::dur(r.totals.off_cpu_ns),
                    fmt::dur(med_dur),
                    fmt::dur(med_api)
                ),
            )];
            if let Some(s) = &r.slowest_op {
                evidence.push(an.evidence(
                    s.ts_ns,
                    s.duration_ns,
                    format!("slowest call in {name}: {}", s.op),
                ));
            }
            let severity = if ratio >= SLOW_GROUP_HIGH_RATIO {
                Severity::High
            } else {
                Severity::Medium
            };
            out.push(Finding {
                severity,
                kind: "slow_group".into(),
                summary: format!(
                    "{name} is {} the median {key} (took {}, API {}): {made_of}",
                    fmt::ratio(ratio),
                    fmt::dur(r.duration_ns),
                    fmt::dur(r.totals.api_time_ns)
                ),
                evidence,
                root_cause,
                fixes: extra
                    .iter()
                    .take(2)
                    .map(|(p, _)| fix_for(p).to_owned())
                    .collect(),
            });
        }
    }
    out
}

/// Who preempted the group's threads, with shares.
fn group_preempters(r: &GroupRow) -> String {
    let total: u64 = r.preempted_by.iter().map(|p| p.ns).sum();
    r.preempted_by
        .iter()
        .take(3)
        .map(|p| format!("{} ({})", p.name, fmt::pct(p.ns, total)))
        .collect::<Vec<_>>()
        .join(", ")
}
