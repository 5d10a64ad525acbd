//! The reports of a multi-host analysis: each host's report, made by the one-host code on
//! its own recording, with its rows and findings named by host, then combined.
//!
//! - `query`: every row gets `host`; group rows also `wall_start_ns` (REALTIME). Rows of the
//!   same group on different hosts (the same step of the same run) come together, groups in
//!   the order they first began on any host; operation and kernel rows stay in per-host blocks.
//!   Requests are ranked across hosts by their API time.
//! - `explain`: every finding gets `host`, and its evidence's `offset_ns` counts from the
//!   job's start; the slow-host rule adds its findings; `hosts` lists the hosts and their
//!   clocks' error bounds; `losses`, each host's drops (their places' offsets likewise).
//!
//! Times that stay on a trace clock (`start_ns`, `ts_ns`, a finding's window) are on the clock
//! of the host the row or finding names.

use std::collections::BTreeMap;

use anyhow::Result;

use super::{Fleet, HostAnalysis, Hosts, slow_hosts};
use crate::analyze::aggregate::{Aggregate, Needs};
use crate::analyze::collectives::CollectiveLog;
use crate::analyze::explain::{self, ExplainReport, HostSummary, RequestRanking};
use crate::analyze::findings::{Finding, NcclHost, finding_id, nccl_check};
use crate::analyze::groups::PID_KEY;
use crate::analyze::query::{GroupRow, QueryMode, QueryReport, RequestReport, RequestRow};
use crate::analyze::{self, scan};
use ingero_trace::read::natural_cmp;

/// `ingero query`.
pub fn query(fleet: &Fleet, mode: &QueryMode) -> Result<QueryReport> {
    match fleet {
        Fleet::Single(an) => analyze::query(an, mode),
        Fleet::Hosts(h) => hosts_query(h, mode),
    }
}

/// `ingero explain`.
pub fn explain(fleet: &Fleet, by: Option<&str>) -> Result<ExplainReport> {
    match fleet {
        Fleet::Single(an) => analyze::explain(an, by),
        Fleet::Hosts(h) => hosts_explain(h, by),
    }
}

/// `ingero explain --by-request`.
pub fn rank_requests(fleet: &Fleet) -> Result<RequestRanking> {
    let h = match fleet {
        Fleet::Single(an) => return analyze::rank_requests(an),
        Fleet::Hosts(h) => h,
    };
    let mut out = RequestRanking {
        caveat: String::new(),
        at_ns: None,
        requests: Vec::new(),
    };
    for host in &h.hosts {
        let r = analyze::rank_requests(&host.an)?;
        out.caveat = r.caveat;
        out.at_ns = out.at_ns.or(r.at_ns.map(|t| host.wall(t)));
        out.requests.extend(r.requests.into_iter().map(|mut q| {
            tag_row(host, &mut q.stats);
            q
        }));
    }
    sort_requests(&mut out.requests);
    Ok(out)
}

fn tag_row(host: &HostAnalysis, row: &mut GroupRow) {
    row.host = Some(host.name.clone());
    row.wall_start_ns = Some(host.wall(row.start_ns));
}

fn hosts_query(h: &Hosts, mode: &QueryMode) -> Result<QueryReport> {
    let mut reports = Vec::with_capacity(h.hosts.len());
    for host in &h.hosts {
        reports.push((host, analyze::query(&host.an, mode)?));
    }
    let name = |host: &HostAnalysis| Some(host.name.clone());
    Ok(match mode {
        QueryMode::Ops => QueryReport::Ops(
            reports
                .into_iter()
                .flat_map(|(host, r)| {
                    match r {
                        QueryReport::Ops(rows) => rows,
                        _ => Vec::new(),
                    }
                    .into_iter()
                    .map(move |mut row| {
                        row.host = name(host);
                        row
                    })
                })
                .collect(),
        ),
        QueryMode::ByKernel => QueryReport::Kernels(
            reports
                .into_iter()
                .flat_map(|(host, r)| {
                    match r {
                        QueryReport::Kernels(rows) => rows,
                        _ => Vec::new(),
                    }
                    .into_iter()
                    .map(move |mut row| {
                        row.host = name(host);
                        row
                    })
                })
                .collect(),
        ),
        QueryMode::GroupBy(spec) => {
            let mut rows = Vec::new();
            for (host, r) in reports {
                if let QueryReport::Groups(list) = r {
                    rows.extend(list.into_iter().map(|mut row| {
                        tag_row(host, &mut row);
                        row
                    }));
                }
            }
            line_up(&mut rows, &spec.keys);
            QueryReport::Groups(rows)
        }
        QueryMode::ByRequest => {
            let mut caveat = String::new();
            let mut requests = Vec::new();
            for (host, r) in reports {
                if let QueryReport::Requests(rep) = r {
                    caveat = rep.caveat;
                    requests.extend(rep.requests.into_iter().map(|mut q| {
                        tag_row(host, &mut q.stats);
                        q
                    }));
                }
            }
            sort_requests(&mut requests);
            QueryReport::Requests(RequestReport { caveat, requests })
        }
    })
}

/// What makes rows of different hosts the same group: the run (`run_id`, when known) and the
/// grouping keys' values (not the `pid` key: processes are the hosts' own).
fn group_key(row: &GroupRow, keys: &[String]) -> Vec<String> {
    let text = |k: &str| {
        row.labels
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let mut key = vec![text(slow_hosts::RUN_KEY)];
    key.extend(
        keys.iter()
            .filter(|k| *k != PID_KEY && *k != slow_hosts::RUN_KEY)
            .map(|k| text(k)),
    );
    key
}

/// Numbers as numbers, so step 9 comes before step 10.
fn natural(a: &[String], b: &[String]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = natural_cmp(x, y);
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Rows of one group on every host together, groups in the order they first began (on
/// REALTIME), within a group by host.
fn line_up(rows: &mut [GroupRow], keys: &[String]) {
    let mut first: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for r in rows.iter() {
        let at = r.wall_start_ns.unwrap_or(r.start_ns);
        first
            .entry(group_key(r, keys))
            .and_modify(|t| *t = (*t).min(at))
            .or_insert(at);
    }
    rows.sort_by(|a, b| {
        let (ka, kb) = (group_key(a, keys), group_key(b, keys));
        let fa = first.get(&ka).copied().unwrap_or(0);
        let fb = first.get(&kb).copied().unwrap_or(0);
        fa.cmp(&fb)
            .then_with(|| natural(&ka, &kb))
            .then_with(|| {
                natural_cmp(
                    a.host.as_deref().unwrap_or(""),
                    b.host.as_deref().unwrap_or(""),
                )
            })
            .then(a.wall_start_ns.cmp(&b.wall_start_ns))
            .then(a.pid.cmp(&b.pid))
    });
}

/// The NCCL rules over every host's collectives at once (a job's ranks are on several hosts),
/// times compared through each host's REALTIME.
fn nccl_across(h: &Hosts, aggs: &[Aggregate], logs: Vec<CollectiveLog>) -> Vec<Finding> {
    let mut log = CollectiveLog::default();
    for (i, l) in logs.into_iter().enumerate() {
        log.absorb(l, i);
    }
    let views: Vec<NcclHost<'_>> = h
        .hosts
        .iter()
        .zip(aggs.iter())
        .map(|(host, agg)| NcclHost {
            name: Some(&host.name),
            an: &host.an,
            agg,
            to_common: host.real_minus_mono,
            shift: host
                .wall(host.an.index.clock.start_ns)
                .saturating_sub(h.wall_start_ns),
        })
        .collect();
    let mut out = nccl_check(&views, &log);
    for f in &mut out {
        if let Some(v) = views.iter().find(|v| v.name == f.host.as_deref()) {
            f.share = f.impact_ns as f64 / v.an.wall_ns().max(1) as f64;
        }
        f.id = finding_id(f);
    }
    out
}

fn sort_requests(requests: &mut [RequestRow]) {
    requests.sort_by(|a, b| {
        b.stats
            .totals
            .api_time_ns
            .cmp(&a.stats.totals.api_time_ns)
            .then(a.stats.wall_start_ns.cmp(&b.stats.wall_start_ns))
            .then_with(|| a.request_id.cmp(&b.request_id))
            .then_with(|| a.stats.host.cmp(&b.stats.host))
    });
}

fn hosts_explain(h: &Hosts, by: Option<&str>) -> Result<ExplainReport> {
    let mut findings: Vec<Finding> = Vec::new();
    let mut aggs = Vec::with_capacity(h.hosts.len());
    let mut logs = Vec::with_capacity(h.hosts.len());
    let mut steps = Vec::with_capacity(h.hosts.len());
    let mut summaries = Vec::with_capacity(h.hosts.len());
    let mut losses = Vec::new();
    let mut events = 0;
    for host in &h.hosts {
        let an = &host.an;
        let mut groupings = explain::groupings(an, by, false);
        groupings.extend(slow_hosts::grouping(&an.index.labels));
        let mut agg = scan::run(&an.index, &an.selection, groupings, Needs::ALL)?;
        // The rules comparing ranks run over every host at once (below), not in each host's
        // report, which keeps the counts of what was not compared.
        logs.push(agg.collectives.take_comms());
        let report = explain::report(an, &agg);
        steps.push(slow_hosts::host_steps(an, &agg));
        events += report.events;
        // Evidence offsets from the job's start, so the hosts' timelines read as one.
        let shift = host
            .wall(an.index.clock.start_ns)
            .saturating_sub(h.wall_start_ns);
        for mut l in report.losses {
            l.host = Some(host.name.clone());
            for p in &mut l.places {
                p.offset_ns = p.offset_ns.saturating_add(shift);
            }
            losses.push(l);
        }
        for mut f in report.findings {
            f.host = Some(host.name.clone());
            for e in &mut f.evidence {
                e.offset_ns = e.offset_ns.saturating_add(shift);
            }
            f.id = finding_id(&f);
            findings.push(f);
        }
        summaries.push(HostSummary {
            name: host.name.clone(),
            machine_id: host.machine_id,
            events: report.events,
            clock_maxerror_us: host.clock.map(|c| c.maxerror_us),
            clock_unsynchronized: host.clock.map(|c| c.unsynchronized),
        });
        aggs.push(agg);
    }
    findings.extend(nccl_across(h, &aggs, logs));
    for mut f in slow_hosts::check(&h.hosts, &steps, h.wall_start_ns) {
        if let Some(host) = h.hosts.iter().find(|x| f.host.as_deref() == Some(&x.name)) {
            f.share = f.impact_ns as f64 / host.an.wall_ns().max(1) as f64;
        }
        f.id = finding_id(&f);
        findings.push(f);
    }
    // As for one host: most severe first, then most impact; then by host.
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| b.impact_ns.cmp(&a.impact_ns))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.host.cmp(&b.host))
            .then_with(|| a.summary.cmp(&b.summary))
    });
    Ok(ExplainReport {
        events,
        hosts: Some(summaries),
        losses,
        findings,
    })
}
