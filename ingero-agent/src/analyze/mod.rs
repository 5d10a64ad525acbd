//! `analyze/`: `ingero query` and `ingero explain` over recorded traces, without root.
//!
//! # Interface
//! ```ignore
//! let an = Analysis::open(Some(path), &SelectionSpec { since: Some("5m".into()), ..Default::default() })?;
//! let q = analyze::query(&an, &QueryMode::group_by(&["step"]))?;   // QueryReport
//! println!("{}", q.text(an.origin()));   // or q.json(), q.csv(origin)
//! let e = analyze::explain(&an, None)?;   // ExplainReport: findings, most severe first
//! let r = analyze::rank_requests(&an)?;   // RequestRanking: caveat + requests
//! analyze::events::write(&an, EventFormat::Json, &mut stdout)?;   // --events
//! ```
//!
//! # How it reads
//! Two passes over the files. The first ([`index`]) learns the recording's extent, its wall
//! clock, the label intervals and what the recording says it lost ([`losses`]: drops counted,
//! shown beside every report), from the packets the writer keeps outside its compressed
//! chunks (the chunks are skipped unopened, so this pass costs almost nothing); with those
//! the selection is resolved (`--since` counts back from the end of the recording, wall
//! times map through the clock snapshot). With a time window it reads only the labels of the
//! stretches the window needs, once the extent has placed it. The second
//! ([`scan`]) streams the selected events once into bounded state ([`aggregate`]): per-operation
//! sketches, label groups, per-process accounting, fixed time bins and the slowest calls with
//! their causes. Memory grows with groups, processes and annotations, never with events.
//!
//! Findings live one rule per file under [`findings`], thresholds as named constants.

pub mod activity;
pub mod aggregate;
pub mod clock;
pub mod collectives;
pub mod events;
pub mod explain;
pub mod findings;
pub mod fleet;
pub mod fmt;
pub mod groups;
pub mod index;
pub mod intervals;
pub mod json;
pub mod kernels;
pub mod labels;
pub mod losses;
pub mod memory;
pub mod ops;
pub mod pid_slots;
pub mod pinned;
pub mod proc_run;
pub mod processes;
pub mod query;
pub mod ranges;
pub mod resolve_cache;
pub mod routes;
pub mod scan;
pub mod selection;
pub mod sketch;
pub mod slow_calls;
pub mod source;
pub mod table;
pub mod timespec;
pub mod work_class;
pub mod xids;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use anyhow::Result;

use aggregate::Needs;

pub use events::EventFormat;
pub use explain::{ExplainReport, RequestRanking};
pub use findings::{Evidence, Finding, Severity};
pub use index::{FirstPass, TraceIndex};
pub use query::{OVERLAP_CAVEAT, QueryMode, QueryReport};
pub use selection::{LabelReach, Selection, SelectionSpec};

/// A recording opened for analysis: its first pass done and the selection resolved.
pub struct Analysis {
    /// What the user named (or the default recording's newest file).
    pub source: PathBuf,
    pub index: TraceIndex,
    pub selection: Selection,
}

impl Analysis {
    /// Finds the recording (see [`source::resolve`]), indexes it and resolves `spec`.
    pub fn open(trace: Option<&Path>, spec: &SelectionSpec) -> Result<Analysis> {
        let (files, source) = source::resolve(trace)?;
        Self::from_files(files, source, spec)
    }

    pub fn from_files(
        files: Vec<PathBuf>,
        source: PathBuf,
        spec: &SelectionSpec,
    ) -> Result<Analysis> {
        Self::from_files_seeking(files, source, spec, index::seek_from_env())
    }

    /// [`Self::from_files`]; `seek`: whether both passes read only what the time window
    /// needs (else every file whole: `INGERO_FULL_SCAN=1`).
    pub fn from_files_seeking(
        files: Vec<PathBuf>,
        source: PathBuf,
        spec: &SelectionSpec,
        seek: bool,
    ) -> Result<Analysis> {
        let windowed = spec.has_time_window();
        let pass = FirstPass::read(files, windowed && seek)?;
        for f in pass.truncated() {
            tracing::warn!(file = %f.display(), "recording ends inside a packet (agent killed?); read up to the last complete one");
        }
        let (range, at) = spec.window(&pass.clock)?;
        let mut index = pass.finish(windowed.then_some((range, spec.label_reach)))?;
        index.seek_windows = seek;
        let selection = spec.resolve_in(range, at, &index.labels)?;
        Ok(Analysis {
            source,
            index,
            selection,
        })
    }

    /// The recording's first instant: text output shows times as offsets from it.
    pub fn origin(&self) -> u64 {
        self.index.clock.start_ns
    }
}

/// `ingero query`.
pub fn query(an: &Analysis, mode: &QueryMode) -> Result<QueryReport> {
    let agg = scan::run(
        &an.index,
        &an.selection,
        query::groupings_for(mode),
        query::needs(mode),
    )?;
    Ok(query::report(an, &agg, mode))
}

/// `ingero explain`; `by` is `--by KEY` for the slow-group rule.
pub fn explain(an: &Analysis, by: Option<&str>) -> Result<ExplainReport> {
    let agg = scan::run(
        &an.index,
        &an.selection,
        explain::groupings(an, by, false),
        Needs::ALL,
    )?;
    Ok(explain::report(an, &agg))
}

/// `ingero explain --by-request`.
pub fn rank_requests(an: &Analysis) -> Result<RequestRanking> {
    // The ranking reads the request groups and the total API time only.
    let needs = Needs {
        ops: false,
        total: true,
        processes: false,
        kernels: false,
    };
    let agg = scan::run(
        &an.index,
        &an.selection,
        explain::groupings(an, None, true),
        needs,
    )?;
    Ok(explain::ranking(an, &agg))
}
