//! Slow groups and unusual groups, for every label key `explain` groups by (`step`, `epoch`,
//! `request_id`, or `--by KEY`).
//!
//! A group is compared with its peers in a local window (the [`LOCAL_PEERS`] groups before
//! and after it, so a long recording's drift does not make its late steps slow): it is slow
//! when its wall time is at least [`SLOW_MIN_RATIO`] × the peers' median and exceeds it by
//! more than [`SLOW_MAD_K`] robust deviations (1.4826 × MAD) and [`SLOW_MIN_EXCESS_NS`]. Its
//! impact is that excess, split into causes (see [`super::context`]) by comparing each
//! part with the peers' median of the same part; parts carrying at least [`CAUSE_MIN_PART`]
//! of the excess are named. A group whose excess is mostly cold start is left to the
//! `cold_start` finding.
//!
//! A group that is not slow but made far more allocations, synchronisations or launches than
//! its peers, or spent far longer in them ([`UNUSUAL_RATIO`]), is an `unusual_group`, its
//! impact the extra time in those calls, its severity one level under what that impact
//! would give.
//!
//! Several keys can describe one interval (a step and the request it served): the same
//! interval is reported once, by the finding with the larger impact, carrying both labels.

use serde_json::{Map, Value};

use super::context::{Context, KeyRows, MIN_PEERS};
use super::{CAUSE_KINDS, Cause, CauseKind, Finding, Window, median};
use crate::analyze::fmt;
use crate::analyze::query::{GroupRow, OVERLAP_CAVEAT, REQUEST_KEY};
use crate::analyze::work_class::WorkClass;

/// The keys looked at when `--by` is not given.
pub const SLOW_GROUP_KEYS: [&str; 3] = ["step", "epoch", "request_id"];
/// Peers on each side of a group that make its baseline.
pub const LOCAL_PEERS: usize = 50;
/// A slow group takes at least this many times its peers' median wall time...
pub const SLOW_MIN_RATIO: f64 = 1.5;
/// ...more than this many robust standard deviations (1.4826 × MAD) above it...
pub const SLOW_MAD_K: f64 = 5.0;
/// ...and at least this much more.
pub const SLOW_MIN_EXCESS_NS: u64 = 1_000_000;
/// At most this many slow groups are reported per key (the largest excess).
pub const SLOW_GROUP_MAX_REPORTED: usize = 5;
/// A cause is named when it carries at least this share of the excess.
pub const CAUSE_MIN_PART: f64 = 0.1;
/// A slow group whose excess is at least this share cold start is the cold start's.
const COLD_SHARE: f64 = 0.5;
/// Unusual work: at least this many times the peers' median count of a kind of call and
/// [`UNUSUAL_MIN_EXTRA`] more, or this many times their median time in it and
/// [`SLOW_MIN_EXCESS_NS`] more.
pub const UNUSUAL_RATIO: f64 = 3.0;
/// See [`UNUSUAL_RATIO`].
pub const UNUSUAL_MIN_EXTRA: u64 = 10;
/// Unusual groups reported per key.
const UNUSUAL_MAX_REPORTED: usize = 3;
/// Two findings cover the same interval when they overlap by this share of the shorter.
const SAME_INTERVAL_SHARE: f64 = 0.8;

/// The kinds of call whose counts make a group unusual.
const UNUSUAL_CLASSES: [WorkClass; 4] = [
    WorkClass::Alloc,
    WorkClass::Sync,
    WorkClass::Launch,
    WorkClass::Nccl,
];

/// A finding and the key it came from (for folding findings of the same interval).
struct Candidate {
    key: String,
    finding: Finding,
}

pub fn check(ctx: &Context<'_>) -> Vec<Finding> {
    let mut candidates = Vec::new();
    for k in &ctx.keys {
        if k.rows.len() < MIN_PEERS {
            continue;
        }
        candidates.extend(key_findings(ctx, k));
    }
    fold_same_intervals(candidates)
}

/// The baseline of the group at `i`: the rows of its local window.
fn peers(rows: &[GroupRow], i: usize) -> &[GroupRow] {
    let lo = i.saturating_sub(LOCAL_PEERS);
    let hi = (i + LOCAL_PEERS + 1).min(rows.len());
    &rows[lo..hi]
}

/// The median of each group's local window ([`peers`]) of `values`, kept sorted as the
/// window slides (a binary search and a short move per group, instead of a selection over the
/// whole window for every group).
fn local_medians(values: &[u64]) -> Vec<u64> {
    let n = values.len();
    let mut window: Vec<u64> = Vec::with_capacity(2 * LOCAL_PEERS + 1);
    let mut out = Vec::with_capacity(n);
    let (mut lo, mut hi) = (0usize, 0usize);
    for i in 0..n {
        let (want_lo, want_hi) = (i.saturating_sub(LOCAL_PEERS), (i + LOCAL_PEERS + 1).min(n));
        while hi < want_hi {
            let v = values[hi];
            let at = window.partition_point(|x| *x < v);
            window.insert(at, v);
            hi += 1;
        }
        while lo < want_lo {
            let v = values[lo];
            let at = window.partition_point(|x| *x < v);
            window.remove(at);
            lo += 1;
        }
        out.push(
            window
                .get((window.len().max(1) - 1) / 2)
                .copied()
                .unwrap_or(0),
        );
    }
    out
}

/// The median absolute deviation of `window` from `m`.
fn mad(window: &[GroupRow], m: u64) -> u64 {
    median(window.iter().map(|p| p.duration_ns.abs_diff(m)).collect())
}

fn key_findings(ctx: &Context<'_>, k: &KeyRows) -> Vec<Candidate> {
    let comps: Vec<_> = k.rows.iter().map(|r| ctx.components(r)).collect();
    let series =
        |f: &dyn Fn(&GroupRow) -> u64| local_medians(&k.rows.iter().map(f).collect::<Vec<_>>());
    let med_dur = series(&|r| r.duration_ns);
    let med_calls = UNUSUAL_CLASSES.map(|c| series(&|r| r.totals.class_calls[c.index()]));
    let med_ns = UNUSUAL_CLASSES.map(|c| series(&|r| r.totals.class_ns[c.index()]));
    let mut slow = Vec::new();
    let mut unusual = Vec::new();
    for (i, r) in k.rows.iter().enumerate() {
        let window = peers(&k.rows, i);
        let lo = i.saturating_sub(LOCAL_PEERS);
        let med = med_dur[i];
        let excess = r.duration_ns.saturating_sub(med);
        // The deviation only for groups that pass the cheap tests.
        if r.duration_ns as f64 >= SLOW_MIN_RATIO * med as f64
            && excess >= SLOW_MIN_EXCESS_NS
            && excess as f64 > SLOW_MAD_K * 1.4826 * mad(window, med) as f64
        {
            let window_comps = &comps[lo..lo + window.len()];
            if let Some(f) = slow_finding(ctx, k, r, &comps[i], (window, window_comps), med) {
                slow.push(f);
            }
            continue;
        }
        let medians: [(u64, u64); UNUSUAL_CLASSES.len()] =
            std::array::from_fn(|c| (med_calls[c][i], med_ns[c][i]));
        if let Some(f) = unusual_finding(ctx, k, r, &medians) {
            unusual.push(f);
        }
    }
    let by_impact = |v: &mut Vec<Finding>| {
        v.sort_by(|a, b| {
            b.impact_ns
                .cmp(&a.impact_ns)
                .then(a.window.start_ns.cmp(&b.window.start_ns))
        })
    };
    by_impact(&mut slow);
    by_impact(&mut unusual);
    slow.into_iter()
        .take(SLOW_GROUP_MAX_REPORTED)
        .chain(unusual.into_iter().take(UNUSUAL_MAX_REPORTED))
        .map(|finding| Candidate {
            key: k.key.clone(),
            finding,
        })
        .collect()
}

/// The group's own label value.
fn group_labels(k: &KeyRows, r: &GroupRow) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(v) = r.labels.get(&k.key) {
        m.insert(k.key.clone(), v.clone());
    }
    m
}

fn name_of(labels: &Map<String, Value>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

fn slow_finding(
    ctx: &Context<'_>,
    k: &KeyRows,
    r: &GroupRow,
    own: &[u64; CAUSE_KINDS.len()],
    (peers, window): (&[GroupRow], &[[u64; CAUSE_KINDS.len()]]),
    med: u64,
) -> Option<Finding> {
    let excess = r.duration_ns.saturating_sub(med);
    let mut parts: Vec<(CauseKind, u64)> = CAUSE_KINDS
        .iter()
        .map(|kind| {
            let i = kind.index();
            let base = median(window.iter().map(|c| c[i]).collect());
            (*kind, own[i].saturating_sub(base))
        })
        .collect();
    // The parts' medians need not add up to the median group, so their growth can exceed
    // the excess: scaled down, they account for it exactly.
    let sum: u64 = parts.iter().map(|(_, ns)| ns).sum();
    if sum > excess {
        for (_, ns) in &mut parts {
            *ns = (*ns as u128 * excess as u128 / sum as u128) as u64;
        }
    }
    let mut causes: Vec<Cause> = parts
        .into_iter()
        .filter(|(_, ns)| *ns as f64 >= CAUSE_MIN_PART * excess as f64 && *ns > 0)
        .map(|(kind, ns)| ctx.cause(kind, ns, excess, r))
        .collect();
    causes.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.cause.cmp(&b.cause)));
    if causes
        .first()
        .is_some_and(|c| c.cause == CauseKind::ColdStart && c.share >= COLD_SHARE)
    {
        return None;
    }
    let labels = group_labels(k, r);
    let name = name_of(&labels);
    let made_of = if causes.is_empty() {
        "no single part stands out against the peers".to_owned()
    } else {
        causes
            .iter()
            .take(3)
            .map(Cause::phrase)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ratio = r.duration_ns as f64 / med.max(1) as f64;
    let mut root_cause = match causes.first() {
        Some(c) => format!(
            "most of the extra {} was {} ({made_of})",
            fmt::dur(excess),
            c.cause.text()
        ),
        None => format!("the extra {} has no dominant part", fmt::dur(excess)),
    };
    // Where in the program: the NVTX range whose time grew the most against the peers.
    if let Some((name, extra)) = nvtx_place(ctx, r, peers) {
        root_cause.push_str(&format!(
            "; the NVTX range `{name}` took +{} more than in the median {}",
            fmt::dur(extra),
            k.key
        ));
    }
    if k.key == REQUEST_KEY && k.overlapping {
        root_cause.push_str(". ");
        root_cause.push_str(OVERLAP_CAVEAT);
    }
    let mut evidence = vec![ctx.an.evidence(
        r.start_ns,
        r.duration_ns,
        format!(
            "{name}: {} calls, API {}, sync {}, off-CPU {} (median {}: {})",
            r.totals.cuda_calls,
            fmt::dur(r.totals.api_time_ns),
            fmt::dur(r.totals.sync_time_ns),
            fmt::dur(r.totals.off_cpu_ns),
            k.key,
            fmt::dur(med),
        ),
    )];
    if let Some(s) = &r.slowest_op {
        evidence.push(ctx.an.evidence(
            s.ts_ns,
            s.duration_ns,
            format!("slowest call in {name}: {}", s.op),
        ));
    }
    Some(Finding {
        severity: ctx.an.impact_severity(excess),
        kind: "slow_group".into(),
        summary: format!(
            "{name} took {}, {} the median {}: {made_of}",
            fmt::dur(r.duration_ns),
            fmt::ratio(ratio),
            fmt::dur(med)
        ),
        labels: Some(labels),
        pid: r.pid,
        window: Window {
            start_ns: r.start_ns,
            end_ns: r.end_ns,
        },
        impact_ns: excess,
        fixes: causes
            .iter()
            .take(2)
            .map(|c| c.cause.fix().to_owned())
            .collect(),
        causes,
        evidence,
        root_cause,
        ..Finding::default()
    })
}

/// `medians`: the peers' median calls and time of each of [`UNUSUAL_CLASSES`].
fn unusual_finding(
    ctx: &Context<'_>,
    k: &KeyRows,
    r: &GroupRow,
    medians: &[(u64, u64); UNUSUAL_CLASSES.len()],
) -> Option<Finding> {
    let mut causes = Vec::new();
    let mut counts = Vec::new();
    for (class, (med_n, med_ns)) in UNUSUAL_CLASSES.iter().zip(medians) {
        let (class, med_n, med_ns) = (*class, *med_n, *med_ns);
        let i = class.index();
        let n = r.totals.class_calls[i];
        let own_ns = r.totals.class_ns[i];
        let ns = own_ns.saturating_sub(med_ns);
        let many =
            n as f64 >= UNUSUAL_RATIO * med_n.max(1) as f64 && n >= med_n + UNUSUAL_MIN_EXTRA;
        let long = own_ns as f64 >= UNUSUAL_RATIO * med_ns as f64 && ns >= SLOW_MIN_EXCESS_NS;
        if !(many || long) {
            continue;
        }
        counts.push(format!(
            "{n} {} calls taking {} (median {med_n}, {})",
            class_noun(class),
            fmt::dur(own_ns),
            fmt::dur(med_ns)
        ));
        causes.push((super::context::cause_of(class), ns));
    }
    let impact: u64 = causes.iter().map(|(_, ns)| ns).sum();
    if causes.is_empty() || impact == 0 {
        return None;
    }
    let mut causes: Vec<Cause> = causes
        .into_iter()
        .map(|(kind, ns)| ctx.cause(kind, ns, impact, r))
        .collect();
    causes.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.cause.cmp(&b.cause)));
    let labels = group_labels(k, r);
    let name = name_of(&labels);
    Some(Finding {
        severity: ctx.an.impact_severity(impact).lowered(),
        kind: "unusual_group".into(),
        summary: format!(
            "{name} was not slower than its peers but made {}: +{} in those calls",
            counts.join(", "),
            fmt::dur(impact)
        ),
        labels: Some(labels),
        pid: r.pid,
        window: Window {
            start_ns: r.start_ns,
            end_ns: r.end_ns,
        },
        impact_ns: impact,
        evidence: vec![ctx.an.evidence(
            r.start_ns,
            r.duration_ns,
            format!(
                "{name}: {} calls, API {}",
                r.totals.cuda_calls,
                fmt::dur(r.totals.api_time_ns)
            ),
        )],
        root_cause: {
            let mut c = format!(
                "{name} took a different path: its CUDA work is unlike its peers' although its wall time is not"
            );
            if k.key == REQUEST_KEY && k.overlapping {
                c.push_str(". ");
                c.push_str(OVERLAP_CAVEAT);
            }
            c
        },
        fixes: causes.iter().map(|c| c.cause.fix().to_owned()).collect(),
        causes,
        ..Finding::default()
    })
}

/// The NVTX range (by message) inside the group whose time exceeds its peers' median the
/// most, and by how much: where in the program the excess went (the causes say what it was).
fn nvtx_place<'c>(
    ctx: &'c Context<'_>,
    r: &GroupRow,
    peers: &[GroupRow],
) -> Option<(&'c str, u64)> {
    let own = ctx.nvtx_places(r.start_ns, r.end_ns);
    if own.is_empty() {
        return None;
    }
    let peer_places: Vec<Vec<(&str, u64)>> = peers
        .iter()
        .filter(|p| p.start_ns != r.start_ns)
        .map(|p| ctx.nvtx_places(p.start_ns, p.end_ns))
        .collect();
    own.into_iter()
        .map(|(name, ns)| {
            let typical = median(
                peer_places
                    .iter()
                    .map(|pl| pl.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v))
                    .collect(),
            );
            (name, ns.saturating_sub(typical))
        })
        .filter(|(_, extra)| *extra > 0)
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
}

fn class_noun(class: WorkClass) -> &'static str {
    match class {
        WorkClass::Alloc => "malloc/free",
        WorkClass::Sync => "synchronisation",
        WorkClass::Launch => "launch",
        WorkClass::Memcpy => "memcpy",
        WorkClass::Nccl => "NCCL",
        WorkClass::Other => "other CUDA",
    }
}

/// Keeps one finding per interval: a finding whose window is (nearly) one already kept from
/// another key adds its labels and a line to that one.
fn fold_same_intervals(mut candidates: Vec<Candidate>) -> Vec<Finding> {
    candidates.sort_by(|a, b| {
        b.finding
            .impact_ns
            .cmp(&a.finding.impact_ns)
            .then(a.finding.window.start_ns.cmp(&b.finding.window.start_ns))
            .then(a.key.cmp(&b.key))
    });
    let mut kept: Vec<Candidate> = Vec::new();
    for c in candidates {
        let same = kept.iter_mut().find(|k| {
            k.key != c.key
                && k.finding.kind == c.finding.kind
                && same_interval(k.finding.window, c.finding.window)
        });
        match same {
            Some(k) => {
                let other = c.finding.labels.unwrap_or_default();
                let text = name_of(&other);
                if let Some(labels) = k.finding.labels.as_mut() {
                    for (key, v) in other {
                        labels.entry(key).or_insert(v);
                    }
                }
                if let Some(first) = k.finding.evidence.first().cloned() {
                    k.finding.evidence.push(super::Evidence {
                        what: format!("the same interval is {text}"),
                        ..first
                    });
                }
            }
            None => kept.push(c),
        }
    }
    kept.into_iter().map(|c| c.finding).collect()
}

fn same_interval(a: Window, b: Window) -> bool {
    let overlap = a
        .end_ns
        .min(b.end_ns)
        .saturating_sub(a.start_ns.max(b.start_ns));
    let shorter = (a.end_ns - a.start_ns.min(a.end_ns)).min(b.end_ns - b.start_ns.min(b.end_ns));
    shorter > 0 && overlap as f64 >= SAME_INTERVAL_SHARE * shorter as f64
}

impl Cause {
    /// `+1.21s blocked off-CPU`, naming who preempted.
    pub fn phrase(&self) -> String {
        let mut s = format!("+{} {}", fmt::dur(self.ns), self.cause.text());
        if let Some(top) = self.by.first() {
            s.push_str(&format!(" by {}", top.comm));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_medians_equal_the_medians_of_each_window() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in [0usize, 1, 2, 7, 101, 102, 350] {
            let values: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 50
                })
                .collect();
            let fast = local_medians(&values);
            for (i, m) in fast.iter().enumerate() {
                let lo = i.saturating_sub(LOCAL_PEERS);
                let hi = (i + LOCAL_PEERS + 1).min(n);
                assert_eq!(*m, median(values[lo..hi].to_vec()), "n {n} at {i}");
            }
            assert_eq!(fast.len(), n);
        }
    }
}
