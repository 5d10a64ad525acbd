//! `ingero query`: latency per operation, rows per label group, per request, GPU memory per
//! process (`--memory`), or the raw events of a recording. Also defines the selection flags
//! `explain` shares.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::analyze::fleet::{Fleet, report};
use crate::analyze::groups::GroupSpec;
use crate::analyze::kernels::KERNEL_KEY;
use crate::analyze::losses::Losses;
use crate::analyze::{self, EventFormat, LabelReach, QueryMode, SelectionSpec};

/// Which recording and which part of it (shared by `query` and `explain`).
#[derive(Args, Debug, Clone, Default)]
pub struct SelectionArgs {
    /// Recording file, or a directory of rotated files, or a directory (searched
    /// recursively) of several hosts' recordings, reported per host [default: $INGERO_TRACE,
    /// else the newest recording in ~/.ingero/traces/]
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Only these hosts of a directory of several hosts' recordings (their machine names,
    /// `ingero trace --machine-name`).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub host: Vec<String>,
    /// Only the last DURATION of the recording (of the recording, not of the wall clock).
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// From TIME: HH:MM[:SS], YYYY-MM-DD HH:MM[:SS] (local time unless a zone such as Z or
    /// +02:00 is given), or +DURATION after the recording's start.
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Up to TIME (same forms as --from).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Around TIME (one second either side); with `explain --by-request`, the requests active
    /// then.
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// Only these processes.
    #[arg(long, value_name = "PID", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Only these operations (cudaMalloc, LaunchKernel, ...).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub op: Vec<String>,
    /// Only events carrying label KEY=VALUE (repeatable; all must match).
    #[arg(long, value_name = "KEY=VALUE")]
    pub label: Vec<String>,
    /// JSON output.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV output.
    #[arg(long)]
    pub csv: bool,
    /// Threads reading the recording: 1 reads in one thread; 2 (or more) adds a thread that
    /// inflates the compressed chunks ahead of the decoding (less wall time, a little more CPU
    /// time) [default: 2 on a machine with more than one CPU]
    #[arg(short = 'j', long, value_name = "NUM", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
}

impl SelectionArgs {
    pub fn spec(&self) -> SelectionSpec {
        SelectionSpec {
            since: self.since.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            at: self.at.clone(),
            pids: self.pid.clone(),
            ops: self.op.clone(),
            labels: self.label.clone(),
            label_reach: LabelReach::Window,
        }
    }

    /// The recording (or the hosts' recordings) with the selection resolved.
    pub fn open(&self) -> Result<Fleet> {
        self.open_spec(&self.spec())
    }

    /// [`Self::open`] with `spec` (the flags' own, or with more).
    pub fn open_spec(&self, spec: &SelectionSpec) -> Result<Fleet> {
        let mut fleet = Fleet::open(self.trace.as_deref(), spec, &self.host)?;
        if let Some(n) = self.threads {
            for an in fleet.analyses_mut() {
                an.index.inflate_ahead = n > 1;
            }
        }
        Ok(fleet)
    }
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    #[command(flatten)]
    pub select: SelectionArgs,
    /// One row per distinct value of these label keys (instant labels by the interval each
    /// value held, spans by their own interval), per process where the labels are
    /// process-scoped; `rank` is the launcher's rank, `pid` the event's process; `kernel`
    /// alone: one row per launched kernel (by name) and per replayed graph.
    #[arg(
        long,
        value_name = "KEY[,KEY]",
        value_delimiter = ',',
        conflicts_with = "by_request"
    )]
    pub group_by: Vec<String>,
    /// With --group-by: one row per group for all processes together, even where the
    /// labels are process-scoped (by default two ranks' step 7 are two rows).
    #[arg(long)]
    pub merge_processes: bool,
    /// One row per request_id span; an event inside overlapping requests counts for each.
    #[arg(long)]
    pub by_request: bool,
    /// The raw matching events with their labels (NDJSON with --json).
    #[arg(long, conflicts_with_all = ["group_by", "by_request"])]
    pub events: bool,
    /// GPU memory per process: held at the end of the window (or at --at), peak and when,
    /// allocated and freed, the largest live allocations, frees ingero could not size.
    #[arg(long, conflicts_with_all = ["group_by", "by_request", "events"])]
    pub memory: bool,
}

/// Writes `text` to stdout; a closed pipe is not an error.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing output"),
        _ => Ok(()),
    }
}

pub fn run(args: QueryArgs) -> Result<ExitCode> {
    let label_reach = if args.memory {
        LabelReach::Start
    } else if args.events {
        LabelReach::Listed
    } else {
        LabelReach::Window
    };
    let spec = SelectionSpec {
        label_reach,
        ..args.select.spec()
    };
    let fleet = args.select.open_spec(&spec)?;
    // What the recording lost goes with every report: after a text table, else (JSON, CSV,
    // the events' stream) on stderr, so the output's format is unchanged.
    let losses = fleet.losses();
    let notes: String = losses.iter().map(Losses::text).collect();
    let on_stdout = !args.select.json && !args.select.csv && !args.events;
    if !on_stdout {
        for n in losses.iter().flat_map(Losses::notes) {
            eprintln!("ingero: note: {n}");
        }
    }
    let with_notes = |text: String| {
        if on_stdout && !notes.is_empty() {
            format!("{text}\n{notes}")
        } else {
            text
        }
    };
    if args.memory {
        let an = fleet.one("--memory")?;
        let report = analyze::memory::query(an)?;
        let text = match (args.select.json, args.select.csv) {
            (true, _) => format!("{}\n", report.json()),
            (_, true) => report.csv(an.origin()),
            _ => report.text(an.origin()),
        };
        print(&with_notes(text))?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.events {
        let format = match (args.select.json, args.select.csv) {
            (true, _) => EventFormat::Json,
            (_, true) => EventFormat::Csv,
            _ => EventFormat::Text,
        };
        let an = fleet.one("--events")?;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        analyze::events::write(an, format, &mut out)?;
        if let Err(e) = out.flush() {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e).context("writing events");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mode = if args.by_request {
        QueryMode::ByRequest
    } else if !args.group_by.is_empty() {
        let keys: Vec<String> = args.group_by.iter().map(|k| k.trim().to_owned()).collect();
        if keys.iter().any(String::is_empty) {
            bail!("--group-by: empty key");
        }
        if keys.iter().any(|k| k == KERNEL_KEY) {
            if keys.len() > 1 {
                bail!("--group-by {KERNEL_KEY} groups by kernel alone (not with label keys)");
            }
            QueryMode::ByKernel
        } else {
            QueryMode::GroupBy(GroupSpec {
                keys,
                per_process: !args.merge_processes,
            })
        }
    } else {
        QueryMode::Ops
    };
    let report = report::query(&fleet, &mode)?;
    let text = if args.select.json {
        format!("{}\n", report.json())
    } else if args.select.csv {
        report.csv(fleet.origin())
    } else {
        report.text(fleet.origin())
    };
    print(&with_notes(text))?;
    Ok(ExitCode::SUCCESS)
}
