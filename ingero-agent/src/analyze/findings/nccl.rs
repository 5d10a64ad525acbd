//! NCCL across ranks: the collectives of one communicator compared rank by rank
//! ([`CollectiveLog`], gathered from one host's recording or several hosts').
//!
//! - `nccl_desync`: at the same number in the communicator's order, ranks called different
//!   collectives (another operation, count, type, reduction or root). NCCL requires them to be
//!   the same: the job hangs, or reduces buffers that do not belong together. The finding names
//!   the first such number, which rank called what (the ranks that agree with most others
//!   against those that do not), and how many later numbers differ too.
//! - `nccl_stall`: some ranks stopped calling the communicator's collectives while the others
//!   went on. A collective completes only when every rank calls it, so the others wait for the
//!   ranks behind (a hang, until a timeout aborts the job). Judged at the end of what was read:
//!   the others called the next collective at least [`STALL_MIN_NS`] and
//!   [`STALL_GAP_RATIO`] × their usual gap between collectives before it, and the ranks behind
//!   never did.
//!
//! Both are HIGH: each stops a distributed job or corrupts it. A stall names the GPU fault
//! that explains it when the NVIDIA driver reported one on the stopped rank's host (an Xid
//! naming its process, or naming none, as a GPU off the bus does).

use super::{Evidence, Finding, Severity, Window, median, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::collectives::{CollectiveLog, Member, Signature};
use crate::analyze::fmt;
use ingero_trace::model::{XidReport, XidSeverity};

/// The others waited at least this long for the ranks behind …
pub const STALL_MIN_NS: u64 = 5_000_000_000;
/// … and at least this many times their usual gap between two collectives.
pub const STALL_GAP_RATIO: u64 = 20;
/// Ranks named in a summary (the rest are counted).
const NAMED: usize = 8;

/// One host's part of the comparison.
pub struct NcclHost<'a> {
    /// Its name, when several hosts' recordings are compared.
    pub name: Option<&'a str>,
    pub an: &'a Analysis,
    pub agg: &'a Aggregate,
    /// Added to its trace times to compare them with the other hosts' (REALTIME minus its
    /// trace clock; 0 for one recording).
    pub to_common: i128,
    /// Added to its evidence's offsets (its start after the job's; 0 for one recording).
    pub shift: u64,
}

impl NcclHost<'_> {
    fn common(&self, ts_ns: u64) -> i128 {
        i128::from(ts_ns) + self.to_common
    }

    fn evidence(&self, ts_ns: u64, what: String) -> Evidence {
        let mut e = self.an.evidence(ts_ns, 0, what);
        e.offset_ns = e.offset_ns.saturating_add(self.shift);
        e
    }
}

/// A member as the report names it: `rank 3 (python[1234] on gpu-node-2)`.
fn who(hosts: &[NcclHost<'_>], m: &Member) -> String {
    let Some(h) = hosts.get(m.host) else {
        return m.rank_text();
    };
    let place = h.name.map_or(String::new(), |n| format!(" on {n}"));
    format!("{} ({}{place})", m.rank_text(), proc_name(h.agg, m.pid))
}

/// `5f1c2a9e81b3d004 (8 ranks)`, as communicators are named.
fn comm_text(id: u64, members: &[Member]) -> String {
    match members.iter().find_map(|m| m.nranks) {
        Some(n) => format!("{id:016x} ({n} ranks)"),
        None => format!("{id:016x}"),
    }
}

/// The ranks of a list, the first [`NAMED`] by name.
fn ranks_text(members: &[&Member]) -> String {
    let mut names: Vec<String> = members.iter().take(NAMED).map(|m| m.rank_text()).collect();
    if members.len() > NAMED {
        names.push(format!("{} more", members.len() - NAMED));
    }
    names.join(", ")
}

pub fn check(hosts: &[NcclHost<'_>], log: &CollectiveLog) -> Vec<Finding> {
    let mut out = Vec::new();
    for (id, members) in &log.comms {
        if members.len() < 2 {
            continue;
        }
        out.extend(desync(hosts, *id, members));
        out.extend(stall(hosts, *id, members));
    }
    out
}

/// One collective the members called at one number, and who called it.
struct Called<'m> {
    sig: Signature,
    by: Vec<&'m Member>,
    /// When the first of them called it (its own trace clock).
    first_ns: u64,
}

/// Whether the members that called collective `seq` all called the same one (checked before
/// [`called_at`] sorts out who called what: most numbers agree, and this allocates nothing).
fn agree_at(members: &[Member], seq: u64) -> bool {
    let mut sigs = members.iter().filter_map(|m| m.get(seq)?.sig);
    let first = sigs.next();
    sigs.all(|s| Some(s) == first)
}

/// What the members called at `seq`, most members first (ties: the one called first).
fn called_at(members: &[Member], seq: u64) -> Vec<Called<'_>> {
    let mut out: Vec<Called<'_>> = Vec::new();
    for m in members {
        let Some(issued) = m.get(seq) else { continue };
        let Some(sig) = issued.sig else { continue };
        match out.iter_mut().find(|c| c.sig == sig) {
            Some(c) => {
                c.by.push(m);
                c.first_ns = c.first_ns.min(issued.ts_ns);
            }
            None => out.push(Called {
                sig,
                by: vec![m],
                first_ns: issued.ts_ns,
            }),
        }
    }
    out.sort_by(|a, b| {
        b.by.len()
            .cmp(&a.by.len())
            .then(a.first_ns.cmp(&b.first_ns))
    });
    out
}

fn desync(hosts: &[NcclHost<'_>], id: u64, members: &[Member]) -> Option<Finding> {
    let first = members.iter().map(|m| m.first_seq).min()?;
    let last = members.iter().map(Member::last_seq).max()?;
    let mut differing = 0u64;
    let mut found: Option<(u64, Vec<Called<'_>>)> = None;
    for seq in first..=last {
        if agree_at(members, seq) {
            continue;
        }
        differing += 1;
        if found.is_none() {
            found = Some((seq, called_at(members, seq)));
        }
    }
    let (seq, called) = found?;
    // The ranks off the most common call are the ones to look at; with no majority (two
    // ranks, two calls) none is singled out.
    let majority = called[0].by.len() > called[1].by.len();
    let culprit = majority.then(|| called[1].by[0]);
    let anchor = culprit.unwrap_or(called[0].by[0]);
    let host = hosts.get(anchor.host)?;
    let at = anchor.get(seq).map_or(0, |i| i.ts_ns);
    let end = host.an.selection_end_ns().max(at);
    let parts: Vec<String> = called
        .iter()
        .map(|c| format!("{} called {}", ranks_text(&c.by), c.sig.text()))
        .collect();
    let mut evidence: Vec<Evidence> = called
        .iter()
        .flat_map(|c| {
            c.by.iter().take(NAMED).filter_map(move |m| {
                let h = hosts.get(m.host)?;
                let ts = m.get(seq)?.ts_ns;
                Some(h.evidence(ts, format!("{} called {}", who(hosts, m), c.sig.text())))
            })
        })
        .collect();
    if differing > 1 {
        evidence.push(host.evidence(
            end,
            format!("{} collectives in all differ across ranks", differing),
        ));
    }
    let comm = comm_text(id, members);
    Some(Finding {
        severity: Severity::High,
        kind: "nccl_desync".into(),
        host: culprit.and_then(|m| hosts.get(m.host)?.name.map(str::to_owned)),
        summary: format!(
            "Collective #{seq} on NCCL communicator {comm} differs across ranks: {}",
            parts.join("; ")
        ),
        pid: culprit.map(|m| m.pid),
        window: Window {
            start_ns: at,
            end_ns: end,
        },
        impact_ns: end.saturating_sub(at),
        evidence,
        root_cause: format!(
            "NCCL requires every rank of a communicator to call the same collectives in the same order, with the same count, type, reduction and root; {} did not at collective #{seq}. From there the ranks wait on different operations (the job hangs until a timeout) or reduce buffers that do not belong together.",
            match culprit {
                Some(m) => who(hosts, m),
                None => "the ranks".to_owned(),
            }
        ),
        fixes: vec![
            "Look for a collective that only some ranks reach: one inside a rank-dependent condition (logging or evaluation on rank 0, early stopping decided per rank), uneven data so that one rank runs one more or one fewer step, or a tensor whose shape differs per rank.".to_owned(),
            "PyTorch can check this at every collective: TORCH_DISTRIBUTED_DEBUG=DETAIL (and TORCH_NCCL_DESYNC_DEBUG=1 to report which rank is behind on a timeout).".to_owned(),
        ],
        ..Finding::default()
    })
}

fn stall(hosts: &[NcclHost<'_>], id: u64, members: &[Member]) -> Option<Finding> {
    let lead = members.iter().map(Member::last_seq).max()?;
    let mut behind: Vec<&Member> = members.iter().filter(|m| m.last_seq() < lead).collect();
    if behind.is_empty() {
        return None;
    }
    let ahead: Vec<&Member> = members.iter().filter(|m| m.last_seq() == lead).collect();
    // The others' usual gap between two collectives.
    let gap = median(
        ahead
            .iter()
            .flat_map(|m| {
                m.issued
                    .windows(2)
                    .map(|w| w[1].ts_ns.saturating_sub(w[0].ts_ns))
            })
            .collect(),
    );
    // Furthest behind first.
    behind.sort_by_key(|m| (m.last_seq(), m.host, m.pid));
    let stuck = behind[0].last_seq();
    let next = stuck + 1;
    // When the first of the others called the collective the ones behind never did, and how
    // long before the end of what was read that was (on the common clock).
    let (caller, called_local, called) = members
        .iter()
        .filter_map(|m| {
            let ts = m.get(next)?.ts_ns;
            Some((m, ts, hosts.get(m.host)?.common(ts)))
        })
        .min_by_key(|(_, _, t)| *t)?;
    let waited = behind
        .iter()
        .filter_map(|m| hosts.get(m.host))
        .map(|h| h.common(h.an.selection_end_ns()) - called)
        .min()?;
    let waited = u64::try_from(waited).ok()?;
    if waited < STALL_MIN_NS || waited < STALL_GAP_RATIO.saturating_mul(gap) {
        return None;
    }
    let culprit = behind[0];
    let host = hosts.get(culprit.host)?;
    let caller_host = hosts.get(caller.host)?;
    let last_own = culprit.issued.last().map_or(0, |i| i.ts_ns);
    let end = host.an.selection_end_ns();
    let mut evidence = vec![
        host.evidence(
            last_own,
            format!(
                "{} called its last collective, #{} ({})",
                who(hosts, culprit),
                culprit.last_seq(),
                culprit
                    .issued
                    .last()
                    .and_then(|i| i.sig)
                    .map_or_else(|| "?".to_owned(), |s| s.text())
            ),
        ),
        caller_host.evidence(
            called_local,
            format!(
                "{} called #{next} ({}); {} of the ranks recorded went on to #{lead}",
                who(hosts, caller),
                caller
                    .get(next)
                    .and_then(|i| i.sig)
                    .map_or_else(|| "?".to_owned(), |s| s.text()),
                ahead.len()
            ),
        ),
    ];
    if let Some(p) = host.agg.procs.get(&culprit.pid) {
        evidence.push(host.evidence(
            p.last_ns,
            format!("the last traced call of {} ended", who(hosts, culprit)),
        ));
    }
    let fault = gpu_fault(host.an, culprit.pid);
    if let Some((ts, x, _)) = &fault {
        let info = x.info();
        evidence.push(host.evidence(
            *ts,
            format!(
                "the NVIDIA driver reported {} on {} ({})",
                x.name(),
                x.reporter(),
                info.meaning
            ),
        ));
    }
    // In time order (on the common clock: the hosts' own clocks differ).
    evidence.sort_by_key(|e| e.offset_ns);
    let comm = comm_text(id, members);
    let mut root_cause = format!(
        "A collective completes only when every rank of its communicator calls it. {} never called collective #{next}, so the ranks that did are blocked on it (their usual gap between collectives is {}): the job is hung until NCCL's or the framework's timeout aborts it.",
        who(hosts, culprit),
        fmt::dur(gap)
    );
    let mut fixes = Vec::new();
    if let Some((_, x, named)) = &fault {
        let whose = match (*named, x.switch) {
            (true, _) => "naming this rank's process",
            // A switch fault cuts the NVLink traffic of every GPU the switch connects.
            (false, true) => "if this rank's GPU talks through that switch",
            (false, false) => "naming no process: if it is this rank's GPU",
        };
        root_cause = format!(
            "The NVIDIA driver reported {} ({}) on {}, {whose}, that is why it stopped. {root_cause}",
            x.name(),
            x.info().meaning,
            x.reporter()
        );
        fixes.push(format!("For the {}: {}.", x.reporter(), x.info().action));
    }
    let names = ranks_text(&behind);
    Some(Finding {
        severity: Severity::High,
        kind: "nccl_stall".into(),
        host: host.name.map(str::to_owned),
        summary: format!(
            "NCCL communicator {comm}: {names} stopped at collective #{stuck} while the other ranks called #{next} and went on to #{lead}; they waited {} for it",
            fmt::dur(waited)
        ),
        pid: Some(culprit.pid),
        window: Window {
            start_ns: last_own,
            end_ns: end,
        },
        impact_ns: waited,
        evidence,
        root_cause,
        fixes: fixes.into_iter().chain([
            format!(
                "See where {} is: py-spy dump --pid {} (its Python stack), or its last calls with `ingero query --events --pid {}`; a rank that crashed, ran out of data, or waits on I/O or a lock shows there.",
                culprit.rank_text(),
                culprit.pid,
                culprit.pid
            ),
            "Make sure every rank takes the same path to its collectives (the same number of steps and batches; checkpointing and evaluation entered by all ranks or guarded by a barrier).".to_owned(),
            "Bound the wait so a hang fails fast with the ranks named: TORCH_NCCL_ASYNC_ERROR_HANDLING=1 with a timeout in init_process_group, and TORCH_NCCL_DESYNC_DEBUG=1.".to_owned(),
        ]).collect(),
        ..Finding::default()
    })
}

/// A GPU fault on the host of a rank that stopped, in what was read: the first fatal Xid report
/// (hardware, driver or the application's own) naming its process, else the first naming no
/// process (a device-level fault such as a GPU off the bus; the driver names none), with
/// whether it named the process.
fn gpu_fault(an: &Analysis, pid: u32) -> Option<(u64, &XidReport, bool)> {
    let reports = an
        .index
        .xids
        .between(an.selection.range.start_ns, an.selection_end_ns())
        .filter(|(_, x)| {
            let severity = x.info().severity;
            severity.is_fatal_to_work() || severity == XidSeverity::Application
        });
    let mut unnamed = None;
    for (ts, x) in reports {
        match x.pid {
            Some(p) if p == pid => return Some((*ts, x, true)),
            None if unnamed.is_none() => unnamed = Some((*ts, x, false)),
            _ => {}
        }
    }
    unnamed
}

/// The comparison of one host's recording.
pub fn check_one(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let host = NcclHost {
        name: None,
        an,
        agg,
        to_common: 0,
        shift: 0,
    };
    check(&[host], &agg.collectives)
}
