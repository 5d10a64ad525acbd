//! Slow hosts: at which steps of a job one host held the others up ("step 812 was slow on
//! gpu-node-17"). The `straggler` rule compares the ranks of one host; this one compares the
//! hosts of a multi-host analysis, step by step.
//!
//! Steps line up across hosts by their `run_id` label (the launcher's job id, which the agent
//! records for every rank, docs/annotations.md) and `step` value: the same run's step 812 on
//! every host is one step. Recordings without a run id line up by step alone (one job's
//! directory).
//!
//! A host is judged as a rank is (`findings/stragglers.rs`): by its **own work** in the step,
//! the step's wall time minus its synchronisation wait, of its slowest process there (a host
//! reaches the job's next collective when its slowest rank does). A duration on one host needs
//! no clock alignment, so the rule holds whatever the hosts' clocks say. The slow host is the
//! one with the most own work, when that is at least [`STRAGGLER_RATIO`](crate::analyze::findings::STRAGGLER_RATIO) × the median of the
//! others, [`STRAGGLER_MIN_EXCESS_NS`](crate::analyze::findings::STRAGGLER_MIN_EXCESS_NS) more, and that excess at least
//! [`STRAGGLER_MIN_STEP_SHARE`](crate::analyze::findings::STRAGGLER_MIN_STEP_SHARE) of the step's wall time (the hosts' median); the parts of the
//! excess are named as for stragglers. One finding per slow host lists its steps; HIGH from
//! [`STRAGGLER_HIGH_STEPS`] steps (a systematic slow host: its GPU, its network, its data).

use std::collections::BTreeMap;

use super::HostAnalysis;
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::findings::{
    Evidence, Finding, STRAGGLER_HIGH_STEPS, STRAGGLER_KEY, Severity, WORK_PARTS, Window, Work,
    excess_of, part_causes,
};
use crate::analyze::fmt;
use crate::analyze::groups::{GroupSpec, Grouping};
use crate::analyze::labels::LabelIndex;
use crate::analyze::query::group_rows;
use ingero_trace::vocab::ProcessLabel;

/// The label that tells one job's steps from another's.
pub const RUN_KEY: &str = ProcessLabel::RunId.text();
/// Steps listed in a finding's summary and evidence (the rest are counted).
const LISTED: usize = 10;

/// A step across hosts: its run id (empty when unknown) and its `step` value.
pub type StepKey = (String, String);

/// One host's steps: for each, the work of its slowest process there.
pub(crate) type HostSteps = BTreeMap<StepKey, Work>;

/// The grouping each host's scan adds for the rule: steps per process where the label is
/// process-scoped, one row per step where it is trace-wide. `None` without step labels.
pub fn grouping(labels: &LabelIndex) -> Option<GroupSpec> {
    labels.key(STRAGGLER_KEY).map(|_| GroupSpec {
        keys: vec![STRAGGLER_KEY.to_owned()],
        per_process: true,
    })
}

/// A host's steps from its aggregation (made with [`grouping`]).
pub(crate) fn host_steps(an: &Analysis, agg: &Aggregate) -> HostSteps {
    let mut out = HostSteps::new();
    let ours = |g: &&Grouping| g.keys == [STRAGGLER_KEY] && g.per_process;
    let Some(g) = agg.groupings.iter().find(ours) else {
        return out;
    };
    let labels = &an.index.labels;
    for row in group_rows(an, &agg.names, g) {
        let Some(step) = row.labels.get(STRAGGLER_KEY).and_then(|v| v.as_str()) else {
            continue;
        };
        let run = row
            .labels
            .get(RUN_KEY)
            .and_then(|v| v.as_str())
            .or_else(|| row.pid.and_then(|p| labels.process_value(RUN_KEY, p)))
            .unwrap_or("");
        let key = (run.to_owned(), step.to_owned());
        let work = Work::of(row);
        match out.get(&key) {
            Some(w) if w.own() >= work.own() => {}
            _ => {
                out.insert(key, work);
            }
        }
    }
    out
}

/// One step at which one host was slow.
struct Slow {
    step: String,
    start_ns: u64,
    duration_ns: u64,
    own: u64,
    wait: u64,
    /// The slowest process's rank or pid there.
    who: Option<String>,
    pid: Option<u32>,
    excess: u64,
    others: usize,
    others_own: u64,
    others_wait: u64,
    causes: Vec<(usize, u64)>,
    waited: bool,
}

/// The slow-host findings of `hosts`, whose steps are `steps` (same order).
pub(crate) fn check(hosts: &[HostAnalysis], steps: &[HostSteps], origin: u64) -> Vec<Finding> {
    let mut keys: Vec<&StepKey> = steps.iter().flat_map(|s| s.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut by_host: BTreeMap<usize, Vec<Slow>> = BTreeMap::new();
    for key in keys {
        let works: Vec<(usize, &Work)> = steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.get(key).map(|w| (i, w)))
            .collect();
        if works.len() < 2 {
            continue;
        }
        if let Some((i, slow)) = slow_host(&key.1, &works) {
            by_host.entry(i).or_default().push(slow);
        }
    }
    by_host
        .into_iter()
        .filter_map(|(i, list)| Some(finding(hosts.get(i)?, list, hosts.len(), origin)))
        .collect()
}

/// The slow host of one step, if one stands out (judged as a straggler rank is).
fn slow_host(step: &str, works: &[(usize, &Work)]) -> Option<(usize, Slow)> {
    // Ties go to the host listed first.
    let e = excess_of(works, |(_, w)| w, |a, b| a.0.cmp(&b.0))?;
    let (host, slow) = works[e.at];
    let who = match (slow.row.rank, slow.row.pid) {
        (Some(r), _) => Some(format!("rank {r}")),
        (None, Some(p)) => Some(format!("pid {p}")),
        (None, None) => None,
    };
    Some((
        host,
        Slow {
            step: step.to_owned(),
            start_ns: slow.row.start_ns,
            duration_ns: slow.row.duration_ns,
            own: e.own,
            wait: slow.wait,
            who,
            pid: slow.row.pid,
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
fn step_order(a: &Slow, b: &Slow) -> std::cmp::Ordering {
    match (a.step.parse::<u64>(), b.step.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.step.cmp(&b.step),
    }
}

/// "the other host", "the other 7 hosts".
fn others_text(n: usize) -> String {
    match n {
        1 => "the other host".to_owned(),
        n => format!("the other {n} hosts"),
    }
}

fn made_of(s: &Slow) -> String {
    if s.causes.is_empty() {
        return format!(
            "+{} own work, no single part stands out",
            fmt::dur(s.excess)
        );
    }
    s.causes
        .iter()
        .take(3)
        .map(|(p, d)| format!("+{} {}", fmt::dur(*d), WORK_PARTS[*p].0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn finding(h: &HostAnalysis, mut list: Vec<Slow>, hosts: usize, origin: u64) -> Finding {
    list.sort_by(step_order);
    let name = &h.name;
    let worst = list
        .iter()
        .max_by(|a, b| a.excess.cmp(&b.excess).then(b.start_ns.cmp(&a.start_ns)));
    let (detail, waited) = match worst {
        Some(w) => {
            let whose = w.who.as_deref().map_or(String::new(), |x| format!("{x}; "));
            let note = if w.waited {
                format!("{} waited in synchronisation", others_text(w.others))
            } else {
                format!("{} did not wait for it", others_text(w.others))
            };
            (format!("{} ({whose}{note})", made_of(w)), w.waited)
        }
        None => (String::new(), false),
    };
    let steps: Vec<&str> = list.iter().map(|s| s.step.as_str()).collect();
    let listed = steps
        .iter()
        .take(LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = steps.len().saturating_sub(LISTED);
    let total: u64 = list.iter().map(|s| s.excess).sum();
    let summary = match (steps.len(), more) {
        (1, _) => format!("step {listed} was slow on {name}: {detail}"),
        (n, 0) => format!(
            "{n} steps ({listed}) were slow on {name}, +{} in all; at the worst: {detail}",
            fmt::dur(total)
        ),
        (n, m) => format!(
            "{n} steps ({listed} and {m} more) were slow on {name}, +{} in all; at the worst: {detail}",
            fmt::dur(total)
        ),
    };
    let evidence = list
        .iter()
        .take(LISTED)
        .map(|s| evidence(h, s, origin))
        .collect();
    let main_cause = worst.and_then(|w| w.causes.first().map(|(p, _)| (*p, w.pid)));
    let root_cause = if waited {
        format!(
            "The {hosts} hosts of the job meet at every collective, so each step ends when the slowest host gets there: {name} did more work of its own than the others and they spent that time waiting for it, so the whole job ran at {name}'s pace."
        )
    } else {
        format!(
            "{name}'s steps took longer than the other hosts' without them waiting for it in traced synchronisation: the hosts do not synchronise each step, or they wait elsewhere (untraced collectives)."
        )
    };
    let mut fixes: Vec<String> = main_cause
        .map(|(p, pid)| {
            let pid = pid.map_or_else(|| "PID".to_owned(), |p| p.to_string());
            WORK_PARTS[p].1.replace("PID", &pid)
        })
        .into_iter()
        .collect();
    fixes.push(format!(
        "If it is always {name}, look at that host: its GPUs' clocks and throttling (nvidia-smi -q -d PERFORMANCE), its network link to the others, other jobs on it, the storage its data comes from; compare `ingero explain --host {name}` with another host's."
    ));
    Finding {
        severity: if list.len() >= STRAGGLER_HIGH_STEPS {
            Severity::High
        } else {
            Severity::Medium
        },
        kind: "slow_host".into(),
        host: Some(name.clone()),
        summary,
        window: Window {
            start_ns: list.iter().map(|s| s.start_ns).min().unwrap_or(0),
            end_ns: list
                .iter()
                .map(|s| s.start_ns + s.duration_ns)
                .max()
                .unwrap_or(0),
        },
        impact_ns: total,
        causes: part_causes(
            &list.iter().map(|s| s.causes.clone()).collect::<Vec<_>>(),
            total,
            "the other hosts' median",
        ),
        evidence,
        root_cause,
        fixes,
        ..Finding::default()
    }
}

fn evidence(h: &HostAnalysis, s: &Slow, origin: u64) -> Evidence {
    let whose = s
        .who
        .as_deref()
        .map_or(String::new(), |x| format!(" ({x})"));
    let mut e = h.an.evidence(
        s.start_ns,
        s.duration_ns,
        format!(
            "step {}: {}{whose} worked {} and waited {}; {} worked {} and waited {} (medians)",
            s.step,
            h.name,
            fmt::dur(s.own),
            fmt::dur(s.wait),
            others_text(s.others),
            fmt::dur(s.others_own),
            fmt::dur(s.others_wait)
        ),
    );
    e.offset_ns = h.wall(s.start_ns).saturating_sub(origin);
    e
}
