//! `ingero query --memory`: which process held GPU memory, how much at the end of the window
//! (or at `--at`), its peak and when, what it allocated and freed in the window, its largest
//! live allocations with the labels in force when they were made, and what ingero could not
//! size (frees of pointers allocated before tracing began).
//!
//! One pass over the recording from its first record to the end of the window
//! ([`replay::Replay`]): held bytes depend on every allocation before the window too. Memory
//! is bounded by the live allocations followed ([`replay::MAX_LIVE`]), never by events.

pub mod replay;
pub mod report;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vmm_tests;

use anyhow::{Result, bail};
use ingero_trace::read::TimeRange;

use super::Analysis;
pub use ingero_trace::model::MemKind;
pub use replay::{Limits, Replay, Window};
pub use report::{MEMORY_CAVEAT, MemoryReport, MemoryRow};

/// The window of `query --memory`: the selection's start to its end, or to `--at`.
pub fn window(an: &Analysis) -> Window {
    let sel = &an.selection;
    Window {
        start_ns: sel.range.start_ns,
        end_ns: sel.at.unwrap_or(sel.range.end_ns),
    }
}

/// `ingero query --memory`.
pub fn query(an: &Analysis) -> Result<MemoryReport> {
    let sel = &an.selection;
    if !sel.op_mask.is_empty() || !sel.labels.is_empty() {
        bail!(
            "--memory replays every allocation and free: it takes --pid and a time range, not --op or --label"
        );
    }
    let mut replay = Replay::new(window(an), sel.pids.clone(), Limits::default());
    // From the recording's start: what was allocated before the window is held in it. The
    // replay looks at nothing that starts after the window's end.
    let upto = TimeRange::new(0, window(an).end_ns);
    let mut reader = an.index.window_reader(TimeRange::all(), upto).events_only();
    reader.for_each_record(|rec| replay.record(rec))?;
    reader.warn_damage();
    Ok(report::build(an, replay.finish()))
}
