//! `ingero explain`: an incident report of a recording (findings, most severe first), or with
//! `--by-request` the requests ranked by their share of GPU API time.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::query::{SelectionArgs, print};
use crate::analyze::fleet::report;
use crate::analyze::losses::Losses;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub select: SelectionArgs,
    /// Rank requests (request_id spans) by their share of GPU API time; with --at, the
    /// requests active at that moment.
    #[arg(long)]
    pub by_request: bool,
    /// The label key whose groups are compared for slow groups [default: step, epoch and
    /// request_id where present].
    #[arg(long, value_name = "KEY", conflicts_with = "by_request")]
    pub by: Option<String>,
}

pub fn run(args: ExplainArgs) -> Result<ExitCode> {
    let fleet = args.select.open()?;
    let (json, csv) = (args.select.json, args.select.csv);
    // The report carries what the recording lost (`losses`) but for the ranking and CSV,
    // which say it after the table (text) or on stderr, their format unchanged.
    let losses = fleet.losses();
    let to_stderr = |losses: &[Losses]| {
        for n in losses.iter().flat_map(Losses::notes) {
            eprintln!("ingero: note: {n}");
        }
    };
    let text = if args.by_request {
        let r = report::rank_requests(&fleet)?;
        if json {
            to_stderr(&losses);
            format!("{}\n", r.json())
        } else if csv {
            to_stderr(&losses);
            r.csv(fleet.origin())
        } else {
            let notes: String = losses.iter().map(Losses::text).collect();
            let text = r.text(fleet.origin());
            if notes.is_empty() {
                text
            } else {
                format!("{text}\n{notes}")
            }
        }
    } else {
        let r = report::explain(&fleet, args.by.as_deref())?;
        if json {
            format!("{}\n", r.json())
        } else if csv {
            to_stderr(&r.losses);
            r.csv()
        } else {
            r.text()
        }
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}
