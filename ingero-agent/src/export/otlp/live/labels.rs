//! The live engine's labels: the states the writer's tap describes (open ones, and closed
//! ones still needed), the span annotations and NVTX ranges written, from which a
//! [`LabelIndex`] is built for each pass exactly as `query`'s first pass builds one from the
//! file. Bounded: past [`MAX_LABEL_RECORDS`] closed states and spans, the oldest go (counted).

use std::collections::VecDeque;

use crate::analyze::labels::LabelIndex;
use ingero_trace::model::{AnnotationRecord, LabelInterval, NvtxRecord};
use ingero_trace::write::{StateEdge, StateIntervals};

/// Closed states, spans and NVTX ranges kept at most (each).
pub const MAX_LABEL_RECORDS: usize = 262_144;

#[derive(Default)]
pub struct LiveLabels {
    states: StateIntervals,
    closed: VecDeque<LabelInterval>,
    spans: VecDeque<AnnotationRecord>,
    nvtx: VecDeque<NvtxRecord>,
    /// Records let go at the bound.
    pub evicted: u64,
}

fn bounded<T>(q: &mut VecDeque<T>, item: T, evicted: &mut u64) {
    q.push_back(item);
    if q.len() > MAX_LABEL_RECORDS {
        q.pop_front();
        *evicted += 1;
    }
}

impl LiveLabels {
    /// Applies a state edge; returns the interval an end closed.
    pub fn edge(&mut self, e: &StateEdge) -> Option<LabelInterval> {
        let closed = self.states.apply(e)?;
        bounded(&mut self.closed, closed.clone(), &mut self.evicted);
        Some(closed)
    }

    pub fn span(&mut self, a: AnnotationRecord) {
        bounded(&mut self.spans, a, &mut self.evicted);
    }

    pub fn nvtx(&mut self, n: NvtxRecord) {
        bounded(&mut self.nvtx, n, &mut self.evicted);
    }

    /// The states open now (ending at `u64::MAX`).
    pub fn open(&self) -> impl Iterator<Item = LabelInterval> + '_ {
        self.states.open()
    }

    pub fn spans(&self) -> impl Iterator<Item = &AnnotationRecord> {
        self.spans.iter()
    }

    /// The index `query`'s first pass would build from these labels (open states end at
    /// `u64::MAX`).
    pub fn index(&self) -> LabelIndex {
        self.index_from(0)
    }

    /// [`Self::index`] of the labels that end at `from` or later (the others cannot hold
    /// at any instant from `from` on).
    pub fn index_from(&self, from: u64) -> LabelIndex {
        let mut ix = LabelIndex::default();
        let closed = self.closed.iter().filter(|s| s.end_ns >= from).cloned();
        for s in closed.chain(self.states.open()) {
            ix.add_state(&s);
        }
        for a in self
            .spans
            .iter()
            .filter(|a| a.end_ns.unwrap_or(a.ts_ns) >= from)
        {
            ix.add_span(a);
        }
        for n in self.nvtx.iter().filter(|n| n.end_ns >= from) {
            ix.add_nvtx(n);
        }
        ix.seal();
        ix
    }

    /// Lets go of what ended before `ts`: no group still to come starts before it, so none
    /// is in force at one's start.
    pub fn prune(&mut self, ts: u64) {
        self.closed.retain(|s| s.end_ns >= ts);
        self.spans.retain(|a| a.end_ns.unwrap_or(a.ts_ns) >= ts);
        self.nvtx.retain(|n| n.end_ns >= ts);
    }

    /// Records held (closed states, spans, NVTX ranges; open states aside).
    pub fn len(&self) -> usize {
        self.closed.len() + self.spans.len() + self.nvtx.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
