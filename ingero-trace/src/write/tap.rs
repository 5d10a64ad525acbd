//! The recorder's tap: what a consumer following the recording as it is written needs to
//! see the records exactly as a reader of the file will (the live OTLP exporter computes the
//! same aggregates as `ingero query` from it).
//!
//! A record written is what the caller passed, except for two decisions the writer makes:
//! - **label states**: an instant annotation moves a label's state, a late one at the stream
//!   time rather than its own, a process's exit ends its states, a rotation ends every state
//!   and re-opens it (`continued`) in the next file, the end of the recording ends them all.
//!   Each begin and end is logged as a [`StateEdge`], at the time the file states it;
//! - **clamped slices**: a slice that would outlast the one enclosing it on its track is
//!   shortened ([`Clamp`]: the record's number and the duration written).
//!
//! Off by default (nothing is logged); `Recorder::enable_tap` turns it on and
//! `Recorder::take_tap` hands over what was logged since the last call (`tapped.rs`).

use std::collections::HashMap;

use crate::model::LabelInterval;

/// What happened to a label's state (in `scope`, `None`: trace-wide) at `ts_ns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateEdge {
    /// The process the state belongs to; `None`: trace-wide.
    pub scope: Option<u32>,
    /// The label's key.
    pub key: String,
    /// CLOCK_MONOTONIC ns: where the file begins or ends the state's slice.
    pub ts_ns: u64,
    /// Begin or end.
    pub kind: EdgeKind,
}

/// A state's slice begins (the value it holds from then on) or ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// The state's slice begins: the label holds `value` from then on.
    Begin {
        /// The value.
        value: String,
        /// Re-opened at the start of a rotated file (the value was set before).
        continued: bool,
    },
    /// The state's slice ends (changed, cleared, its process exited, or the file ended).
    End,
}

/// A slice the writer shortened: the `Recorder::records_written` number of the record it
/// belongs to, and the duration written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clamp {
    /// The record's number.
    pub record: u64,
    /// The duration written.
    pub duration_ns: u64,
}

/// What the tap logged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tap {
    /// Label-state begins and ends, in the order written.
    pub edges: Vec<StateEdge>,
    /// Shortened slices, in the order written.
    pub clamped: Vec<Clamp>,
}

impl Tap {
    /// Nothing logged.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty() && self.clamped.is_empty()
    }
}

/// The label states a stream of [`StateEdge`]s describes: each end closes the interval a
/// reader of the file reads as a [`LabelInterval`] (without its provenance, which edges do
/// not carry: uid 0, no pid); the states still open are listed with an end of `u64::MAX`.
#[derive(Default)]
pub struct StateIntervals {
    open: HashMap<(Option<u32>, String), (String, u64, bool)>,
}

impl StateIntervals {
    /// Applies one edge; an end returns the interval it closed.
    pub fn apply(&mut self, e: &StateEdge) -> Option<LabelInterval> {
        match &e.kind {
            EdgeKind::Begin { value, continued } => {
                self.open.insert(
                    (e.scope, e.key.clone()),
                    (value.clone(), e.ts_ns, *continued),
                );
                None
            }
            EdgeKind::End => {
                let (value, start, continued) = self.open.remove(&(e.scope, e.key.clone()))?;
                Some(interval(e.scope, &e.key, value, start, e.ts_ns, continued))
            }
        }
    }

    /// The states open now, as intervals ending at `u64::MAX`.
    pub fn open(&self) -> impl Iterator<Item = LabelInterval> + '_ {
        self.open
            .iter()
            .map(|((scope, key), (value, start, continued))| {
                interval(*scope, key, value.clone(), *start, u64::MAX, *continued)
            })
    }

    /// States open now.
    pub fn open_count(&self) -> usize {
        self.open.len()
    }
}

fn interval(
    scope_pid: Option<u32>,
    key: &str,
    value: String,
    start_ns: u64,
    end_ns: u64,
    continued: bool,
) -> LabelInterval {
    LabelInterval {
        scope_pid,
        key: key.to_owned(),
        value,
        start_ns,
        end_ns,
        provenance_uid: 0,
        provenance_pid: None,
        continued,
    }
}
