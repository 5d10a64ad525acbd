//! GPU faults the NVIDIA driver reported: its Xid reports (and the NVSwitch driver's SXid
//! reports), one finding per device and code with how often, when, which process the driver
//! named, what the code means and who has to act (ingero's catalog:
//! `ingero_trace::model::xid_info`).
//!
//! A hardware, driver or application fault is HIGH: the work on that GPU after it is lost or
//! suspect (a process whose context faulted fails every later call; a rank on a GPU that fell
//! off the bus stalls every collective of its job), so its impact is the selection's time
//! from the first report on. A corrected error or a recorded change is LOW, a code the catalog
//! does not know MEDIUM; neither claims any time.

use std::collections::BTreeMap;

use super::{Finding, Severity, Window, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use ingero_trace::model::{XidReport, XidSeverity};
use ingero_trace::vocab::ProcessLabel;

/// Reports listed as evidence per finding; the rest are counted in its last line.
pub const XID_EVIDENCE_MAX: usize = 8;

/// NVIDIA's catalog of Xid codes, for the codes ingero's does not describe.
const CATALOG_URL: &str = "https://docs.nvidia.com/deploy/xid-errors/";

/// The reports of one device and code, in time order.
type Group<'a> = Vec<(u64, &'a XidReport)>;

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let (start, end) = (an.selection.range.start_ns, an.selection.range.end_ns);
    // By (switch, bus id, code): the same device and code is one problem however often it is
    // reported; ordered so the findings come out the same every time.
    let mut groups: BTreeMap<(bool, &str, u32), Group<'_>> = BTreeMap::new();
    for (ts, x) in an.index.xids.between(start, end) {
        let key = (x.switch, x.pci.as_str(), x.code);
        groups.entry(key).or_default().push((*ts, x));
    }
    groups
        .into_values()
        .filter_map(|g| finding(an, agg, &g))
        .collect()
}

/// The finding of a group (`None` only for an empty one, which [`check`] never makes).
fn finding(an: &Analysis, agg: &Aggregate, g: &Group<'_>) -> Option<Finding> {
    let (&(first_ns, x), &(last_ns, _)) = (g.first()?, g.last()?);
    let info = x.info();
    let code = x.name();
    // The processes the driver named, in the order it named them.
    let mut named: Vec<(u32, Option<&str>)> = Vec::new();
    for (_, r) in g {
        if let Some(pid) = r.pid {
            if !named.iter().any(|(p, _)| *p == pid) {
                named.push((pid, r.process.as_deref()));
            }
        }
    }
    let who = |(pid, name): (u32, Option<&str>)| {
        let mut s = match agg.procs.get(&pid) {
            Some(_) => proc_name(agg, pid),
            None => name.map_or(format!("pid {pid}"), |n| format!("{n}[{pid}]")),
        };
        if let Some(rank) = an
            .index
            .labels
            .process_value(ProcessLabel::Rank.text(), pid)
        {
            s.push_str(&format!(" (rank {rank})"));
        }
        s
    };
    let names: Vec<String> = named.iter().map(|p| who(*p)).collect();
    let times = match g.len() {
        1 => "once".to_owned(),
        n => format!("{n} times"),
    };
    let mut summary = format!(
        "{} reported {code} ({}) {times}",
        x.reporter(),
        info.meaning
    );
    if !names.is_empty() {
        summary.push_str(&format!(", naming {}", names.join(", ")));
    }
    let mut evidence: Vec<_> = g
        .iter()
        .take(XID_EVIDENCE_MAX)
        .map(|(ts, r)| an.evidence(*ts, 0, format!("{code} on {}: {}", r.device(), r.detail)))
        .collect();
    if g.len() > XID_EVIDENCE_MAX {
        evidence.push(an.evidence(
            last_ns,
            0,
            format!(
                "the last of {} reports ({} more not listed)",
                g.len(),
                g.len() - XID_EVIDENCE_MAX
            ),
        ));
    }
    let (severity, impact_ns, consequence) = match info.severity {
        XidSeverity::Hardware | XidSeverity::Driver => (
            Severity::High,
            an.selection_end_ns().saturating_sub(first_ns),
            "a hardware or driver fault: the GPU's work from then on is lost or suspect, and a \
             job waiting on a process that ran there (a collective) stalls",
        ),
        XidSeverity::Application => (
            Severity::High,
            an.selection_end_ns().saturating_sub(first_ns),
            "the application's own fault: the faulting process's CUDA context is lost and its \
             later calls fail; the GPU itself is fine",
        ),
        XidSeverity::Info => (
            Severity::Low,
            0,
            "nothing stopped: an error was corrected or a change recorded",
        ),
        XidSeverity::Unknown => (
            Severity::Medium,
            0,
            "a code ingero's catalog does not describe",
        ),
    };
    let mut fixes = vec![info.action.to_owned()];
    if info.severity == XidSeverity::Unknown || x.switch {
        fixes.push(format!("NVIDIA's Xid catalog: {CATALOG_URL}"));
    }
    Some(Finding {
        severity,
        kind: "gpu_xid".into(),
        summary,
        pid: match named.as_slice() {
            [(pid, _)] => Some(*pid),
            _ => None,
        },
        window: Window {
            start_ns: first_ns,
            end_ns: last_ns,
        },
        impact_ns,
        evidence,
        root_cause: format!(
            "The NVIDIA driver reported {code} on {}: {}; {consequence}.",
            x.reporter(),
            info.meaning
        ),
        fixes,
        ..Finding::default()
    })
}
