//! `ingero explain`: the incident report (findings, most severe first) or, with
//! `--by-request`, the requests ranked by their share of GPU API time — with `--at`, only the
//! requests active at that moment, ranked by their activity in the window around it.

use std::fmt::Write as _;

use serde::Serialize;

use super::Analysis;
use super::aggregate::Aggregate;
use super::collectives::MAX_KEPT as MAX_COLLECTIVES_KEPT;
use super::findings::{self, Finding, SLOW_GROUP_KEYS};
use super::fmt;
use super::groups::GroupSpec;
use super::json::Json;
use super::losses::Losses;
use super::pinned::MAX_PINNED_RANGES;
use super::processes::LIVE_FOLLOWED;
use super::query::{REQUEST_KEY, RequestRow, request_report};
use super::table::{Table, csv_cell, host_cell, host_header};
use super::xids::MAX_XIDS;

/// The incident report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ExplainReport {
    /// Events that matched the selection.
    pub events: u64,
    /// The hosts, when the recordings read are several hosts'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<HostSummary>>,
    /// What the report should be read with (drops the recording counted, a missing end,
    /// bounds the analysis reached), per host; absent when there is nothing to say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub losses: Vec<Losses>,
    pub findings: Vec<Finding>,
}

/// One host of a multi-host report: who it is and how far its clock may be off.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct HostSummary {
    pub name: String,
    pub machine_id: u32,
    /// Events of this host that matched the selection.
    pub events: u64,
    /// Its REALTIME clock's maximum error when the recording started (µs, `adjtimex`), when
    /// the recording says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_maxerror_us: Option<u64>,
    /// Nothing disciplined its REALTIME clock: its place beside the others is a guess.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_unsynchronized: Option<bool>,
}

/// `explain --by-request`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequestRanking {
    pub caveat: String,
    /// `--at`, on the trace clock (with several hosts, on REALTIME: unix ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ns: Option<u64>,
    pub requests: Vec<RequestRow>,
}

/// The label groupings the findings need: for slow groups `--by KEY`, else the usual keys
/// present, each merging processes (a step is slow as a whole); then, for stragglers, the
/// steps per process (last; see [`findings::straggler_grouping`]).
pub fn groupings(an: &Analysis, by: Option<&str>, by_request: bool) -> Vec<GroupSpec> {
    if by_request {
        return vec![GroupSpec::merged(vec![REQUEST_KEY.to_owned()])];
    }
    let labels = &an.index.labels;
    let mut out: Vec<GroupSpec> = match by {
        Some(k) => vec![GroupSpec::merged(vec![k.to_owned()])],
        None => SLOW_GROUP_KEYS
            .iter()
            .filter(|k| labels.key(k).is_some())
            .map(|k| GroupSpec::merged(vec![(*k).to_owned()]))
            .collect(),
    };
    out.extend(findings::straggler_grouping(labels));
    out
}

pub fn report(an: &Analysis, agg: &Aggregate) -> ExplainReport {
    let log = &an.index.losses;
    let mut findings = findings::run_all(an, agg);
    for f in &mut findings {
        f.drops_overlapping = log.overlapping_field(&[(f.window.start_ns, f.window.end_ns)]);
    }
    ExplainReport {
        events: agg.matched,
        hosts: None,
        losses: log
            .report(an.selection.range, an.origin(), limits(an, agg))
            .into_iter()
            .collect(),
        findings,
    }
}

/// The bounds the aggregation (and the first pass's Xid log) reached, one sentence per
/// process and bound.
fn limits(an: &Analysis, agg: &Aggregate) -> Vec<String> {
    let mut out = Vec::new();
    for (pid, p) in &agg.procs {
        let who = findings::proc_name(agg, *pid);
        if p.live_unfollowed > 0 {
            out.push(format!(
                "{who} held more than {LIVE_FOLLOWED} device allocations at once: {} more were counted but not followed to their frees (frees without a size of their own count 0 bytes)",
                p.live_unfollowed
            ));
        }
        if p.pinned.overflowed {
            out.push(format!(
                "{who} pinned more than {MAX_PINNED_RANGES} host ranges at once: its later async copies were not judged pinned or pageable"
            ));
        }
    }
    let c = &agg.collectives;
    if c.uncompared > 0 {
        out.push(format!(
            "{} NCCL collectives were not compared across ranks ({MAX_COLLECTIVES_KEPT} are kept, or their numbers jumped)",
            c.uncompared
        ));
    }
    if c.unidentified > 0 {
        out.push(format!(
            "{} NCCL collectives ran on communicators made before tracing started, so they were not compared across ranks (start the agent before the job to compare them)",
            c.unidentified
        ));
    }
    let dropped = an.index.xids.dropped;
    if dropped > 0 {
        out.push(format!(
            "{dropped} more Xid reports of the NVIDIA driver were not kept ({MAX_XIDS} are), so gpu_xid findings count only the first ones"
        ));
    }
    out
}

pub fn ranking(an: &Analysis, agg: &Aggregate) -> RequestRanking {
    let mut rep = request_report(an, agg);
    if let Some(at) = an.selection.at {
        // Active at that moment: the request's span covers it.
        rep.requests.retain(|r| {
            an.index
                .labels
                .value_id(&r.request_id)
                .map(|v| an.index.labels.intervals_of(REQUEST_KEY, v))
                .is_some_and(|iv| iv.iter().any(|(a, b)| *a <= at && at <= *b))
        });
    }
    RequestRanking {
        caveat: rep.caveat,
        at_ns: an.selection.at,
        requests: rep.requests,
    }
}

impl ExplainReport {
    pub fn json(&self) -> Json<&ExplainReport> {
        Json(self)
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        if let Some(hosts) = &self.hosts {
            let list: Vec<String> = hosts.iter().map(host_text).collect();
            let _ = writeln!(out, "{} hosts: {}\n", hosts.len(), list.join(", "));
        }
        if !self.losses.is_empty() {
            for l in &self.losses {
                out.push_str(&l.text());
            }
            out.push('\n');
        }
        if self.findings.is_empty() {
            let _ = writeln!(out, "no findings in {} events", self.events);
            return out;
        }
        let _ = writeln!(
            out,
            "{} finding(s) in {} events\n",
            self.findings.len(),
            self.events
        );
        for (i, f) in self.findings.iter().enumerate() {
            let on = f
                .host
                .as_ref()
                .map_or_else(String::new, |h| format!(" on {h}"));
            let _ = writeln!(
                out,
                "{}. [{}] {}{on}: {}",
                i + 1,
                f.severity.label(),
                f.kind,
                f.summary
            );
            let _ = writeln!(
                out,
                "   impact: {} ({} of the selection)",
                fmt::dur(f.impact_ns),
                fmt::pct((f.share * 1e4) as u64, 10_000)
            );
            if !f.causes.is_empty() {
                let _ = writeln!(out, "   causes:");
                for c in &f.causes {
                    let _ = writeln!(
                        out,
                        "     {:<11} {:>9} {:>5}  {}",
                        c.cause.name(),
                        fmt::dur(c.ns),
                        fmt::pct((c.share * 1e4) as u64, 10_000),
                        c.detail
                    );
                }
            }
            let _ = writeln!(out, "   evidence:");
            for e in &f.evidence {
                let _ = writeln!(
                    out,
                    "     {}  {:>9}  {}",
                    fmt::offset(e.offset_ns, 0),
                    fmt::dur(e.duration_ns),
                    e.what
                );
            }
            if let Some(n) = f.drops_overlapping {
                let _ = writeln!(
                    out,
                    "   trace incomplete: {n} drops counted in the seconds this window overlaps"
                );
            }
            let _ = writeln!(out, "   root cause: {}", f.root_cause);
            let _ = writeln!(out, "   fixes:");
            for fix in &f.fixes {
                let _ = writeln!(out, "     - {fix}");
            }
            let _ = writeln!(out);
        }
        out
    }

    /// One row per finding (evidence and fixes joined).
    pub fn csv(&self) -> String {
        let with_host = self.hosts.is_some();
        let mut h = host_header(with_host);
        h.extend([
            "severity",
            "kind",
            "impact_ns",
            "summary",
            "root_cause",
            "fixes",
        ]);
        let mut t = Table::new(&h);
        for f in &self.findings {
            let mut cells = host_cell(with_host, &f.host);
            cells.extend([
                f.severity.label().to_owned(),
                f.kind.clone(),
                f.impact_ns.to_string(),
                f.summary.clone(),
                f.root_cause.clone(),
                f.fixes.join(" "),
            ]);
            t.push(cells);
        }
        t.csv()
    }
}

/// `gpu-node-1 (clock ±1.2 ms)`.
fn host_text(h: &HostSummary) -> String {
    let clock = match (h.clock_unsynchronized, h.clock_maxerror_us) {
        (Some(true), _) => "clock unsynchronised".to_owned(),
        (_, Some(us)) if us >= 1_000 => format!("clock ±{:.1} ms", us as f64 / 1e3),
        (_, Some(us)) => format!("clock ±{us} µs"),
        _ => "clock error unknown".to_owned(),
    };
    format!("{} ({clock})", h.name)
}

impl RequestRanking {
    pub fn json(&self) -> Json<&RequestRanking> {
        Json(self)
    }

    fn table(&self, origin: u64) -> Table {
        let with_host = self.requests.iter().any(|r| r.stats.host.is_some());
        let mut h = host_header(with_host);
        h.extend([
            "rank",
            "request_id",
            "share",
            "api",
            "calls",
            "sync",
            "memcpy",
            "launches",
            "off_cpu",
            "start",
            "duration",
        ]);
        let mut t = Table::new(&h);
        for (i, r) in self.requests.iter().enumerate() {
            let (s, c) = (&r.stats, &r.stats.totals);
            let mut cells = host_cell(with_host, &s.host);
            cells.extend([
                (i + 1).to_string(),
                r.request_id.clone(),
                format!("{:.0}%", r.share_of_api_time * 100.0),
                fmt::dur(c.api_time_ns),
                c.cuda_calls.to_string(),
                fmt::dur(c.sync_time_ns),
                fmt::dur(c.memcpy_time_ns),
                c.launches.to_string(),
                fmt::dur(c.off_cpu_ns),
                fmt::offset(s.wall_start_ns.unwrap_or(s.start_ns), origin),
                fmt::dur(s.duration_ns),
            ]);
            t.push(cells);
        }
        t
    }

    pub fn text(&self, origin: u64) -> String {
        let mut out = String::new();
        if let Some(at) = self.at_ns {
            let _ = writeln!(out, "requests active at {}\n", fmt::offset(at, origin));
        }
        if self.requests.is_empty() {
            out.push_str("no requests (no `request_id` spans) in the selection\n");
        } else {
            out.push_str(&self.table(origin).text());
            if let Some(top) = self.requests.first() {
                let s = &top.stats.totals;
                let _ = writeln!(
                    out,
                    "\n{} holds {} of the GPU API time ({}), {} of it in synchronisation wait.",
                    top.request_id,
                    fmt::pct((top.share_of_api_time * 1e4) as u64, 10_000),
                    fmt::dur(s.api_time_ns),
                    fmt::dur(s.sync_time_ns)
                );
            }
        }
        let _ = writeln!(out, "\nnote: {}", self.caveat);
        out
    }

    pub fn csv(&self, origin: u64) -> String {
        format!("# {}\n{}", csv_cell(&self.caveat), self.table(origin).csv())
    }
}
