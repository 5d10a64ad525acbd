//! The live engine: turns what the recording wrote into spans as groups end, with the
//! numbers `query --group-by` gives for them. See [`super`] for the design; in short:
//!
//! - [`Engine::apply`] takes a batch: events into the [`History`] (in the reader's form, the
//!   writer's clamping applied), state edges and span annotations into the [`LiveLabels`].
//!   A closed state or a span of a grouped key is *pending*: a group may have ended there.
//! - [`Engine::tick`], once the stream has been written past a pending interval's end,
//!   builds the label index from the labels, folds the history from the earliest such start
//!   through `analyze::scan` and turns every complete row of `analyze::query::group_rows`
//!   into a span: the very code `query` runs. A row is complete once it ends before the
//!   watermark (an open state ends at `u64::MAX`, so an open group never is). A row that
//!   began before the fold's start, or a group that held again after its span was sent, is
//!   folded again on its own from where it must start.
//! - What no group still to come can need is let go (history, labels, ids sent).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use serde_json::Value as Json;

use super::super::counters::ExportCounters;
use super::super::names as n;
use super::super::span::{
    AttrValue, ProcessResource, SpanContext, SpanData, process_resource, span_of_row, traceparents,
};
use super::feed::{FeedBatch, Records};
use super::history::{HistRecord, History};
use super::labels::LiveLabels;
use crate::analyze::Analysis;
use crate::analyze::clock::TraceClock;
use crate::analyze::groups::GroupSpec;
use crate::analyze::index::TraceIndex;
use crate::analyze::query::{GroupRow, REQUEST_KEY, group_rows};
use crate::analyze::scan::run_held;
use crate::analyze::selection::{OpMask, Selection};
use ingero_trace::model::{CudaCallRecord, Event, OffCpuRecord, ThreadRef, TimelineRecord};
use ingero_trace::read::TimeRange;
use ingero_trace::vocab::NVTX_LABEL;

/// Thread names remembered (shared by a thread's records), at most.
const MAX_THREADS: usize = 65_536;
/// Process names remembered, at most.
const MAX_PROCESSES: usize = 65_536;
/// Groups whose last span is remembered (to number a later part), at most: past it, the
/// half that ended first is forgotten.
const MAX_SENT: usize = 65_536;

/// What the engine groups by and keeps.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// `--otlp-group-by`.
    pub group_by: Vec<String>,
    /// Also a span per `request_id` group.
    pub requests: bool,
    /// How long the events of the past are kept for span annotations still to arrive (a
    /// span is sent when it ends, so its events are older than it by its length).
    pub horizon_ns: u64,
    /// The history's bound.
    pub history_bytes: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            group_by: vec!["step".into()],
            requests: true,
            horizon_ns: 30_000_000_000,
            history_bytes: 128 << 20,
        }
    }
}

/// The recording's facts the spans carry.
#[derive(Clone, Debug, Default)]
pub struct SessionFacts {
    pub machine_id: u32,
    /// The recording's machine name (`--machine-name`, else the host name).
    pub machine_name: String,
    pub session_start_realtime_ns: u64,
    pub recording: Option<String>,
}

/// A group, across passes: its grouping, its key's values, its process part.
type GroupKey = (usize, Vec<String>, Option<u32>);

pub struct Engine {
    specs: Vec<GroupSpec>,
    keys: Vec<String>,
    cfg: EngineConfig,
    facts: SessionFacts,
    history: History,
    labels: LiveLabels,
    /// Closed intervals and spans of grouped keys not yet passed by a fold.
    pending: Vec<(u64, u64)>,
    /// Groups sent: the end of the last span sent and its part number.
    sent: HashMap<GroupKey, (u64, u32)>,
    watermark: u64,
    /// The watermark of the last fold: events starting before it came too late for it.
    folded_to: u64,
    offset: Option<i128>,
    threads: HashMap<u32, Arc<str>>,
    process_names: HashMap<u32, String>,
    gaps: Vec<(u64, u64)>,
    /// A batch was lost whole: every span from now on is marked incomplete.
    pub desynced: bool,
    counters: Arc<ExportCounters>,
}

impl Engine {
    pub fn new(cfg: EngineConfig, facts: SessionFacts, counters: Arc<ExportCounters>) -> Engine {
        let mut specs = vec![GroupSpec {
            keys: cfg.group_by.clone(),
            per_process: true,
        }];
        if cfg.requests && cfg.group_by != [REQUEST_KEY] {
            specs.push(GroupSpec {
                keys: vec![REQUEST_KEY.to_owned()],
                per_process: true,
            });
        }
        let mut keys: Vec<String> = specs.iter().flat_map(|s| s.keys.clone()).collect();
        keys.sort();
        keys.dedup();
        Engine {
            specs,
            keys,
            history: History::new(cfg.history_bytes),
            cfg,
            facts,
            labels: LiveLabels::default(),
            pending: Vec::new(),
            sent: HashMap::new(),
            watermark: 0,
            folded_to: 0,
            offset: None,
            threads: HashMap::new(),
            process_names: HashMap::new(),
            gaps: Vec::new(),
            desynced: false,
            counters,
        }
    }

    fn grouped(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }

    fn thread(&mut self, pid: u32, tid: u32, comm: &str) -> ThreadRef {
        let name = match self.threads.get(&tid) {
            Some(n) if **n == *comm => n.clone(),
            _ => {
                if self.threads.len() >= MAX_THREADS {
                    self.threads.clear();
                }
                let n: Arc<str> = Arc::from(comm);
                self.threads.insert(tid, n.clone());
                n
            }
        };
        ThreadRef { pid, tid, name }
    }

    /// The process's name by `analyze::processes`'s rule: its main thread's, else the first
    /// named thread's until the main one calls.
    fn name_process(&mut self, c: &CudaCallRecord) {
        let t = &c.thread;
        if t.name.is_empty() {
            return;
        }
        if self.process_names.len() >= MAX_PROCESSES && !self.process_names.contains_key(&t.pid) {
            return;
        }
        let name = self.process_names.entry(t.pid).or_default();
        if (name.is_empty() || t.pid == t.tid) && **name != *t.name {
            name.clear();
            name.push_str(&t.name);
        }
    }

    /// Takes in a batch; returns its emptied record buffer (to be reused).
    pub fn apply(&mut self, mut b: FeedBatch) -> Records {
        if self.offset.is_none() {
            self.offset = b.realtime_offset;
        }
        let clamps: HashMap<u64, u64> = b
            .tap
            .clamped
            .iter()
            .map(|c| (c.record, c.duration_ns))
            .collect();
        for (number, record) in b.records.drain(..) {
            // An event starting before what was already folded may belong to a group already
            // sent (a span annotation arrives after its start by nature: not counted).
            let event = matches!(
                record,
                TimelineRecord::Event(Event::Cuda(_) | Event::OffCpu(_))
            );
            if event && record.ts_ns() < self.folded_to {
                self.counters.late_events.fetch_add(1, Relaxed);
            }
            match record {
                TimelineRecord::Event(Event::Cuda(c)) => {
                    let thread = self.thread(c.task.pid, c.task.tid, &c.task.comm.as_str());
                    let d = clamps.get(&number).copied().unwrap_or(c.duration_ns);
                    let r = CudaCallRecord::written(&c, thread, d);
                    self.name_process(&r);
                    self.history.push(HistRecord::Cuda(r));
                }
                TimelineRecord::Event(Event::OffCpu(o)) => {
                    let thread = self.thread(o.task.pid, o.task.tid, &o.task.comm.as_str());
                    let d = clamps.get(&number).copied().unwrap_or(o.duration_ns);
                    self.history
                        .push(HistRecord::OffCpu(OffCpuRecord::written(&o, thread, d)));
                }
                // Not part of a step's aggregates (explain reads driver messages from the file).
                TimelineRecord::Event(Event::Process(_)) | TimelineRecord::Driver(_) => {}
                TimelineRecord::Annotation(a) => {
                    if let Some(end) = a.end_ns {
                        if a.labels.iter().any(|(k, _)| self.grouped(k)) {
                            self.pending.push((a.ts_ns, end.max(a.ts_ns)));
                        }
                        self.labels.span(a);
                    }
                }
                TimelineRecord::Nvtx(r) => {
                    if r.is_range() {
                        if self.keys.iter().any(|k| k.starts_with(NVTX_LABEL)) {
                            self.pending.push((r.ts_ns, r.end_ns.max(r.ts_ns)));
                        }
                        self.labels.nvtx(r);
                    }
                }
            }
        }
        for e in &b.tap.edges {
            if let Some(closed) = self.labels.edge(e) {
                if self.grouped(&closed.key) {
                    self.pending.push((closed.start_ns, closed.end_ns));
                }
            }
        }
        self.gaps.extend(b.gaps);
        self.watermark = self.watermark.max(b.watermark);
        self.counters
            .events_evicted
            .store(self.history.evicted, Relaxed);
        self.counters
            .labels_evicted
            .store(self.labels.evicted, Relaxed);
        b.records
    }

    /// Whether a fold has something to send: a pending interval the stream has passed.
    pub fn due(&self) -> bool {
        self.pending.iter().any(|p| p.1 < self.watermark)
    }

    /// An analysis of the labels that ended at `from` or later (all: 0).
    fn analysis(&self, lo: u64, from: u64) -> Analysis {
        let labels = self.labels.index_from(from);
        let end = if self.watermark == u64::MAX {
            u64::MAX
        } else {
            self.watermark
        };
        Analysis {
            source: PathBuf::new(),
            index: TraceIndex {
                files: Vec::new(),
                clock: TraceClock {
                    start_ns: lo,
                    end_ns: end,
                    real_minus_mono: self.offset,
                },
                labels,
                session: None,
                records: 0,
                truncated: Vec::new(),
                // Live, the drops are the agent's own counters, not the recording's.
                losses: Default::default(),
                inflate_ahead: false,
                // The history is folded from memory: there is no file to seek in.
                seek: Default::default(),
                seek_windows: false,
                // Steps' spans carry no findings of Xids (explain reads them from the file).
                xids: Default::default(),
            },
            selection: everything(0),
        }
    }

    /// Folds the history from `from` into the rows of grouping `g` under `an`'s selection.
    fn fold(&self, an: &Analysis, g: usize, from: u64) -> Vec<GroupRow> {
        let specs = vec![self.specs[g].clone()];
        let agg = run_held(&an.index, &an.selection, specs, self.history.from(from));
        agg.groupings
            .first()
            .map(|gr| group_rows(an, &agg.names, gr))
            .unwrap_or_default()
    }

    /// Sends the groups that ended (see the module docs) through `out`.
    pub fn tick(&mut self, out: &mut dyn FnMut(SpanData)) {
        let w = self.watermark;
        let Some(lo) = self.pending.iter().filter(|p| p.1 < w).map(|p| p.0).min() else {
            return;
        };
        // The labels that end before `lo` cannot hold at any event or row start folded here:
        // left out, the index (and `group_rows`, which lists every group it holds) stays as
        // small as what ended since the last fold, however many requests the horizon keeps.
        let an = self.analysis(lo, lo);
        let specs = self.specs.clone();
        let agg = run_held(&an.index, &an.selection, specs, self.history.from(lo));
        let mut ready: Vec<(usize, GroupRow, u32)> = Vec::new();
        // Groups folded again on their own, from (fold from, selection start, part).
        let mut again: Vec<(usize, GroupKey, u64, u64, u32)> = Vec::new();
        for (g, grouping) in agg.groupings.iter().enumerate() {
            for row in group_rows(&an, &agg.names, grouping) {
                if row.end_ns >= w {
                    continue;
                }
                let key = self.key_of(g, &row);
                match self.sent.get(&key).copied() {
                    Some((end, _)) if end >= row.end_ns => {}
                    // Held again after its span was sent: the later part on its own.
                    Some((end, part)) => {
                        let from = end.saturating_add(1);
                        again.push((g, key, from, from, part + 1));
                    }
                    // Began before this fold's start (its first piece ended at a rotation).
                    None if row.start_ns < lo => again.push((g, key, row.start_ns, 0, 1)),
                    None => ready.push((g, row, 1)),
                }
            }
        }
        self.emit(&an, ready, out);
        if !again.is_empty() {
            // With every label: these folds start before `lo`.
            let mut full = self.analysis(0, 0);
            let mut ready = Vec::new();
            for (g, key, from, start, part) in again {
                full.selection = everything(start);
                let rows = self.fold(&full, g, from);
                if let Some(r) = rows.into_iter().find(|r| self.key_of(g, r) == key) {
                    ready.push((g, r, part));
                }
            }
            full.selection = everything(0);
            self.emit(&full, ready, out);
        }
        self.folded_to = w;
        self.pending.retain(|p| p.1 >= w);
        self.prune();
    }

    fn key_of(&self, g: usize, row: &GroupRow) -> GroupKey {
        let values = self.specs[g]
            .keys
            .iter()
            .map(|k| {
                row.labels
                    .get(k)
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        (g, values, row.pid)
    }

    fn emit(
        &mut self,
        an: &Analysis,
        ready: Vec<(usize, GroupRow, u32)>,
        out: &mut dyn FnMut(SpanData),
    ) {
        if ready.is_empty() {
            return;
        }
        let tps = traceparents(self.labels.spans());
        let names = &self.process_names;
        let process_name = |pid: u32| names.get(&pid).cloned().unwrap_or_default();
        let ctx = SpanContext {
            labels: &an.index.labels,
            clock: &an.index.clock,
            machine_id: self.facts.machine_id,
            session_start_realtime_ns: self.facts.session_start_realtime_ns,
            recording: self.facts.recording.as_deref(),
            traceparents: &tps,
            process_name: &process_name,
        };
        let mut resources: HashMap<u32, Arc<ProcessResource>> = HashMap::new();
        let mut sent = Vec::with_capacity(ready.len());
        for (g, row, part) in ready {
            let process = row.pid.map(|p| {
                resources
                    .entry(p)
                    .or_insert_with(|| Arc::new(process_resource(p, &ctx)))
                    .clone()
            });
            let incomplete = self.desynced
                || (self.history.evicted_to != 0 && row.start_ns <= self.history.evicted_to)
                || self
                    .gaps
                    .iter()
                    .any(|(a, b)| *a <= row.end_ns && *b >= row.start_ns);
            let mut extra = Vec::new();
            if incomplete {
                extra.push((n::INCOMPLETE.into(), AttrValue::Bool(true)));
                self.counters.spans_incomplete.fetch_add(1, Relaxed);
            }
            if part > 1 {
                extra.push((n::PART.into(), AttrValue::Int(i64::from(part))));
            }
            let span = span_of_row(&row, &self.specs[g].keys, &ctx, process, extra);
            sent.push((self.key_of(g, &row), (row.end_ns, part)));
            out(span);
        }
        self.sent.extend(sent);
    }

    /// Lets go of what no group still to come needs: before the earliest pending start, the
    /// earliest open state of a grouped key, and the horizon kept for spans still to arrive.
    fn prune(&mut self) {
        if self.watermark == u64::MAX {
            return;
        }
        let mut keep = self.watermark.saturating_sub(self.cfg.horizon_ns);
        for p in &self.pending {
            keep = keep.min(p.0);
        }
        for s in self.labels.open() {
            if self.grouped(&s.key) {
                keep = keep.min(s.start_ns);
            }
        }
        self.history.drop_before(keep);
        self.labels.prune(keep);
        if self.sent.len() > MAX_SENT {
            let mut ends: Vec<u64> = self.sent.values().map(|(e, _)| *e).collect();
            let mid = ends.len() / 2;
            let cut = *ends.select_nth_unstable(mid).1;
            self.sent.retain(|_, (end, _)| *end > cut);
        }
        self.gaps.retain(|g| g.1 >= keep);
    }

    /// Prunes without folding (called when nothing is due for a while).
    pub fn idle(&mut self) {
        self.prune();
    }

    /// What the engine holds (for tests and the benchmark).
    pub fn held(&self) -> (usize, usize, usize) {
        (self.history.len(), self.labels.len(), self.sent.len())
    }
}

/// Every record from `start` on (the live engine's selection: no filters).
fn everything(start: u64) -> Selection {
    Selection {
        range: TimeRange::new(start, u64::MAX),
        at: None,
        pids: Vec::new(),
        op_mask: OpMask::default(),
        labels: Vec::new(),
    }
}
