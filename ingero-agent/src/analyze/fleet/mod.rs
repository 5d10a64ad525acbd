//! `analyze/fleet/`: `query` and `explain` over a directory of recordings from several hosts
//! (a distributed job's, copied from each node).
//!
//! # Design
//! Each host's files are one [`Analysis`] on that host's own trace clock: its MONOTONIC clock
//! has nothing in common with another host's, so the two passes run per host exactly as for
//! one recording, and the reports are combined afterwards ([`report`]): every row and
//! finding names its host, rows of the same group (the same step of the same run) on
//! different hosts come together, and a rule of its own compares the hosts step by step
//! ([`slow_hosts`]: "step 812 was slow on gpu-node-17"). Per-step work is a duration on one
//! host, so comparing it needs no clock alignment; only placing the hosts on one timeline
//! does, and that goes through REALTIME, which every recording relates its trace clock to
//! ([`window`]).
//!
//! A recording of one host (a file, a directory of one host's rotated files, the default
//! recording) is analysed as it always was, and its reports are unchanged: the host keys and
//! columns appear only when the recordings read are several hosts'.

pub mod report;
pub mod slow_hosts;
pub mod window;

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::index::seek_from_env;
use super::losses::Losses;
use super::selection::SelectionSpec;
use super::source;
use super::{Analysis, FirstPass};
use ingero_trace::clock_quality::ClockQuality;
use ingero_trace::read::{HostRecording, first_session, host_recordings};

/// One host's part of a multi-host analysis.
pub struct HostAnalysis {
    /// What reports call it (its machine name; see `HostRecording::name`).
    pub name: String,
    pub machine_id: u32,
    /// Its REALTIME clock's error bound when the recording started, when known.
    pub clock: Option<ClockQuality>,
    pub an: Analysis,
    /// REALTIME − its trace clock (ns).
    pub real_minus_mono: i128,
}

impl HostAnalysis {
    /// A trace time of this host as REALTIME (unix ns).
    pub fn wall(&self, trace_ns: u64) -> u64 {
        u64::try_from((i128::from(trace_ns) + self.real_minus_mono).max(0)).unwrap_or(u64::MAX)
    }
}

/// What `query` and `explain` read: one recording, or several hosts' recordings.
pub enum Fleet {
    /// One host's recording, reported as it always was.
    Single(Box<Analysis>),
    /// Several hosts' recordings (those `--host` kept, with something in the window).
    Hosts(Hosts),
}

/// Several hosts' recordings, each analysed on its own clock.
pub struct Hosts {
    /// By name.
    pub hosts: Vec<HostAnalysis>,
    /// The job's first instant among the hosts kept (REALTIME, unix ns): text output shows
    /// times as offsets from it.
    pub wall_start_ns: u64,
    /// What the user named.
    pub source: PathBuf,
}

impl Fleet {
    /// The recordings `trace` names (see [`source::resolve`]), split by host when a directory
    /// holds several hosts' (recursively); `hosts` is `--host` (only these, by name).
    pub fn open(trace: Option<&Path>, spec: &SelectionSpec, hosts: &[String]) -> Result<Fleet> {
        let (found, shown) = recordings(trace)?;
        if found.len() == 1 {
            let kept = select(found, hosts)?;
            let files = kept.into_iter().flat_map(|h| h.files).collect();
            return Ok(Fleet::Single(Box::new(Analysis::from_files(
                files, shown, spec,
            )?)));
        }
        let kept = select(found, hosts)?;
        Ok(Fleet::Hosts(open_hosts(kept, spec, shown)?))
    }

    /// Whether the reports name hosts.
    pub fn is_multi(&self) -> bool {
        matches!(self, Fleet::Hosts(_))
    }

    /// The one recording to read for reports that do not combine hosts (`--events`,
    /// `--memory`): the recording of one host, or of the one host `--host` kept; else an
    /// error naming the hosts.
    pub fn one(&self, what: &str) -> Result<&Analysis> {
        match self {
            Fleet::Single(an) => Ok(an),
            Fleet::Hosts(h) if h.hosts.len() == 1 => Ok(&h.hosts[0].an),
            Fleet::Hosts(h) => {
                let names: Vec<&str> = h.hosts.iter().map(|x| x.name.as_str()).collect();
                bail!(
                    "{what} reads one host's recording, and {} holds {} hosts' ({}): pick one with --host NAME",
                    h.source.display(),
                    names.len(),
                    names.join(", ")
                )
            }
        }
    }

    /// What each host's recording says it lost over the selection (drops, a missing end),
    /// for reports that carry no losses of their own (`query`): one per host with something
    /// to say, named by host when there are several.
    pub fn losses(&self) -> Vec<Losses> {
        let of = |an: &Analysis| {
            an.index
                .losses
                .report(an.selection.range, an.origin(), Vec::new())
        };
        match self {
            Fleet::Single(an) => of(an).into_iter().collect(),
            Fleet::Hosts(h) => h
                .hosts
                .iter()
                .filter_map(|host| {
                    let mut l = of(&host.an)?;
                    l.host = Some(host.name.clone());
                    Some(l)
                })
                .collect(),
        }
    }

    /// Every analysis (one per host), for settings that apply to all.
    pub fn analyses_mut(&mut self) -> Vec<&mut Analysis> {
        match self {
            Fleet::Single(an) => vec![an.as_mut()],
            Fleet::Hosts(h) => h.hosts.iter_mut().map(|h| &mut h.an).collect(),
        }
    }

    /// The origin of text output's times: the recording's start on its trace clock, or with
    /// several hosts the job's start on REALTIME.
    pub fn origin(&self) -> u64 {
        match self {
            Fleet::Single(an) => an.origin(),
            Fleet::Hosts(h) => h.wall_start_ns,
        }
    }
}

/// The hosts' recordings `trace` names and what to call it: a directory split by host
/// (recursively, [`host_recordings`]); a file, or the default recording (see
/// [`source::resolve`]), is one host.
pub fn recordings(trace: Option<&Path>) -> Result<(Vec<HostRecording>, PathBuf)> {
    if let Some(path) = source::chosen(trace).filter(|p| p.is_dir()) {
        let found = host_recordings(&path)?;
        if found.is_empty() {
            bail!("{} holds no .pftrace files", path.display());
        }
        return Ok((found, path));
    }
    let (files, shown) = source::resolve(trace)?;
    let session = files.first().and_then(|f| first_session(f));
    let name = session
        .as_ref()
        .map(|s| s.info.machine())
        .filter(|n| !n.is_empty())
        .unwrap_or("unknown")
        .to_owned();
    let host = HostRecording {
        name,
        machine_id: session.as_ref().map_or(0, |s| s.machine_id),
        session,
        files,
    };
    Ok((vec![host], shown))
}

/// The hosts `--host` names (all when it names none); an error for a name that is not there.
pub fn select(found: Vec<HostRecording>, wanted: &[String]) -> Result<Vec<HostRecording>> {
    let names: Vec<String> = found.iter().map(|h| h.name.clone()).collect();
    check_names(wanted, &names)?;
    Ok(found
        .into_iter()
        .filter(|h| wanted.is_empty() || matches(wanted, &h.name))
        .collect())
}

/// Whether `name` is among `--host`'s names (a host told apart by `#ID` also answers to its
/// bare machine name).
fn matches(wanted: &[String], name: &str) -> bool {
    let bare = name.split_once('#').map_or(name, |(b, _)| b);
    wanted.iter().any(|w| w == name || w == bare)
}

/// `--host` names only hosts that are there.
fn check_names(wanted: &[String], names: &[String]) -> Result<()> {
    for w in wanted {
        if !names.iter().any(|n| matches(std::slice::from_ref(w), n)) {
            bail!(
                "--host {w}: no such host in the recordings (hosts: {})",
                names.join(", ")
            );
        }
    }
    Ok(())
}

/// Indexes every host, places the window on each host's clock through REALTIME, and keeps
/// the hosts with something in it.
fn open_hosts(found: Vec<HostRecording>, spec: &SelectionSpec, source: PathBuf) -> Result<Hosts> {
    let mut indexed = Vec::with_capacity(found.len());
    let seek = seek_from_env();
    let windowed = spec.has_time_window();
    for h in found {
        let pass = FirstPass::read(h.files.clone(), windowed && seek)?;
        for f in pass.truncated() {
            tracing::warn!(host = %h.name, file = %f.display(), "recording ends inside a packet (agent killed?); read up to the last complete one");
        }
        let Some(offset) = pass.clock.real_minus_mono else {
            bail!(
                "the recording of host {} has no wall-clock reference, so it cannot be placed \
                 beside the others; query it alone (--host {})",
                h.name,
                h.name
            );
        };
        indexed.push((h, pass, offset));
    }
    let extents: Vec<(u64, u64, i128)> = indexed
        .iter()
        .map(|(_, i, off)| (i.clock.start_ns, i.clock.end_ns, *off))
        .collect();
    let job = window::JobWindow::resolve(spec, &extents)?;
    let mut hosts = Vec::with_capacity(indexed.len());
    for ((h, pass, offset), placed) in indexed.into_iter().zip(job.per_host) {
        // A host with nothing in the window has nothing to say about it.
        let Some((range, at)) = placed else { continue };
        let mut index = pass.finish(windowed.then_some((range, spec.label_reach)))?;
        index.seek_windows = seek;
        let selection = spec.resolve_in(range, at, &index.labels)?;
        let source = h.files.first().cloned().unwrap_or_default();
        hosts.push(HostAnalysis {
            clock: h.session.as_ref().and_then(|s| s.info.clock),
            name: h.name,
            machine_id: h.machine_id,
            an: Analysis {
                source,
                index,
                selection,
            },
            real_minus_mono: offset,
        });
    }
    if hosts.is_empty() {
        bail!("the selected time range is empty (it lies outside every host's recording)");
    }
    Ok(Hosts {
        hosts,
        wall_start_ns: job.start_ns,
        source,
    })
}
