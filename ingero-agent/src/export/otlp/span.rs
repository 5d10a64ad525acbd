//! One span per label group: [`span_of_row`] turns a row of `query --group-by` (the one
//! definition of the numbers) into the span the live export and the replay both send, so
//! the two cannot differ in how a row becomes a span.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value as Json;

use super::ids::{self, TraceParent};
use super::names as n;
use crate::analyze::clock::TraceClock;
use crate::analyze::labels::LabelIndex;
use crate::analyze::query::{GroupRow, REQUEST_KEY};

/// The label whose value names a step (and keys its trace).
pub const STEP_KEY: &str = "step";
/// The label carrying a request's W3C trace context.
pub const TRACEPARENT_KEY: &str = "traceparent";
/// The label naming the job a process belongs to.
pub const RUN_ID_KEY: &str = "run_id";

/// An attribute's name: the contract's names are static; labels' are made.
pub type AttrKey = Cow<'static, str>;

/// An attribute value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl AttrValue {
    fn int(v: u64) -> AttrValue {
        AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }

    /// The value as JSON (`--dry-run --json`).
    pub fn json(&self) -> Json {
        match self {
            AttrValue::Str(s) => Json::String(s.clone()),
            AttrValue::Int(i) => Json::from(*i),
            AttrValue::Bool(b) => Json::Bool(*b),
        }
    }
}

/// The traced process a span belongs to: its resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProcessResource {
    pub pid: u32,
    /// The process's name as recorded (its main thread's).
    pub command: String,
    /// [`n::PROCESS_LABELS`] the process carries (rank, run id, ...), as resource attributes.
    pub labels: Vec<(&'static str, String)>,
}

/// A span, ready to encode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanData {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    pub name: &'static str,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Vec<(AttrKey, AttrValue)>,
    /// `None`: a group of trace-wide labels merging processes (the host's resource only).
    pub process: Option<Arc<ProcessResource>>,
}

impl SpanData {
    /// A rough size in memory and on the wire, for the queue's byte bound.
    pub fn approx_bytes(&self) -> usize {
        let attrs: usize = self
            .attributes
            .iter()
            .map(|(k, v)| {
                k.len()
                    + 16
                    + match v {
                        AttrValue::Str(s) => s.len(),
                        _ => 8,
                    }
            })
            .sum();
        96 + self.name.len() + attrs
    }

    /// The attribute `key`, if the span has it.
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find_map(|(k, v)| (k == key).then_some(v))
    }
}

/// What a row needs besides itself to become a span.
pub struct SpanContext<'a> {
    pub labels: &'a LabelIndex,
    pub clock: &'a TraceClock,
    /// The recording's machine id (its packets' and session's).
    pub machine_id: u32,
    /// When the recording's session started (unix ns): the run id of a host whose processes
    /// name none.
    pub session_start_realtime_ns: u64,
    /// The recording's first file.
    pub recording: Option<&'a str>,
    /// The `traceparent` of each request id whose span carried one.
    pub traceparents: &'a HashMap<String, TraceParent>,
    /// The process's name, by pid.
    pub process_name: &'a dyn Fn(u32) -> String,
}

/// The run id a group's trace is keyed by: its `run_id` label, else its process's, else one
/// naming this host's session (so that steps of unrelated runs never share a trace).
pub fn run_id(row: &GroupRow, ctx: &SpanContext<'_>) -> String {
    row.labels
        .get(RUN_ID_KEY)
        .and_then(Json::as_str)
        .map(str::to_owned)
        .or_else(|| {
            row.pid
                .and_then(|p| ctx.labels.process_value(RUN_ID_KEY, p))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            format!(
                "host-{:06x}-{}",
                ctx.machine_id, ctx.session_start_realtime_ns
            )
        })
}

/// The resource of a process's spans.
pub fn process_resource(pid: u32, ctx: &SpanContext<'_>) -> ProcessResource {
    ProcessResource {
        pid,
        command: (ctx.process_name)(pid),
        labels: n::PROCESS_LABELS
            .iter()
            .filter_map(|(label, attr)| {
                ctx.labels
                    .process_value(label, pid)
                    .map(|v| (*attr, v.to_owned()))
            })
            .collect(),
    }
}

fn label<'r>(row: &'r GroupRow, key: &str) -> &'r str {
    row.labels.get(key).and_then(Json::as_str).unwrap_or("")
}

/// The span of `row`, a group of `keys`. `process` is the resource of the row's process
/// (shared by its spans); `extra` attributes (findings, live flags) come last.
pub fn span_of_row(
    row: &GroupRow,
    keys: &[String],
    ctx: &SpanContext<'_>,
    process: Option<Arc<ProcessResource>>,
    extra: Vec<(AttrKey, AttrValue)>,
) -> SpanData {
    let is_step = keys.iter().any(|k| k == STEP_KEY);
    let is_request = !is_step && keys.iter().any(|k| k == REQUEST_KEY);
    let run = run_id(row, ctx);
    let mut parent = None;
    let trace_id = if is_step {
        ids::trace_id(&run, &[(STEP_KEY, label(row, STEP_KEY))])
    } else if is_request {
        let rid = label(row, REQUEST_KEY);
        match ctx.traceparents.get(rid) {
            Some(tp) => {
                parent = Some(tp.parent_span_id);
                tp.trace_id
            }
            None => ids::trace_id(&run, &[(REQUEST_KEY, rid)]),
        }
    } else {
        let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), label(row, k))).collect();
        ids::trace_id(&run, &pairs)
    };
    let values: Vec<&str> = keys.iter().map(|k| label(row, k)).collect();
    let span_id = ids::span_id(&trace_id, ctx.machine_id, row.pid, &values, row.start_ns);

    let mut a: Vec<(AttrKey, AttrValue)> = Vec::with_capacity(32 + row.labels.len());
    for (k, v) in &row.labels {
        let v = v.as_str().unwrap_or_default().to_owned();
        a.push((
            Cow::Owned(format!("{}{k}", n::LABEL_PREFIX)),
            AttrValue::Str(v),
        ));
    }
    let mut put = |k: &'static str, v: AttrValue| a.push((Cow::Borrowed(k), v));
    if is_step {
        put(n::STEP, AttrValue::Str(label(row, STEP_KEY).to_owned()));
    }
    if keys.iter().any(|k| k == REQUEST_KEY) {
        put(
            n::REQUEST_ID,
            AttrValue::Str(label(row, REQUEST_KEY).to_owned()),
        );
    }
    let t = &row.totals;
    let int = AttrValue::int;
    put(n::HELD_NS, int(row.duration_ns));
    put(n::CUDA_CALLS, int(t.cuda_calls));
    put(n::API_TIME_NS, int(t.api_time_ns));
    put(n::SYNC_TIME_NS, int(t.sync_time_ns));
    put(n::MEMCPY_TIME_NS, int(t.memcpy_time_ns));
    put(n::MEMCPY_H2D_BYTES, int(t.memcpy_bytes.h2d));
    put(n::MEMCPY_D2H_BYTES, int(t.memcpy_bytes.d2h));
    put(n::MEMCPY_D2D_BYTES, int(t.memcpy_bytes.d2d));
    put(n::MEMCPY_OTHER_BYTES, int(t.memcpy_bytes.other));
    put(n::LAUNCHES, int(t.launches));
    put(n::LAUNCH_TIME_NS, int(t.launch_time_ns));
    put(n::ERRORS, int(t.errors));
    put(n::OFF_CPU_NS, int(t.off_cpu_ns));
    put(n::PREEMPTED_NS, int(t.preempted_ns));
    put(n::BLOCKED_NS, int(t.blocked_ns));
    // Only where NCCL was called: a single-GPU job's spans stay as they were.
    if t.nccl_time_ns > 0 || t.collectives > 0 {
        put(n::NCCL_TIME_NS, int(t.nccl_time_ns));
        put(n::NCCL_COLLECTIVES, int(t.collectives));
        put(n::NCCL_BYTES, int(t.nccl_bytes));
    }
    if let Some(s) = &row.slowest_op {
        put(n::SLOWEST_OP, AttrValue::Str(s.op.clone()));
        put(n::SLOWEST_DURATION_NS, int(s.duration_ns));
    }
    if let Some(path) = ctx.recording {
        put(n::RECORDING_PATH, AttrValue::Str(path.to_owned()));
    }
    put(n::RECORDING_START_NS, int(row.start_ns));
    put(n::RECORDING_END_NS, int(row.end_ns));
    a.extend(extra);

    let wall = |t: u64| {
        ctx.clock
            .to_wall(t)
            .and_then(|w| u64::try_from(w).ok())
            .unwrap_or(t)
    };
    SpanData {
        trace_id,
        span_id,
        parent_span_id: parent,
        name: if is_step {
            n::SPAN_STEP
        } else if is_request {
            n::SPAN_REQUEST
        } else {
            n::SPAN_GROUP
        },
        start_unix_ns: wall(row.start_ns),
        end_unix_ns: wall(row.end_ns.max(row.start_ns)),
        attributes: a,
        process,
    }
}

/// The `traceparent` of each request span that carries a valid one (the first span of a
/// request id wins; later ones of the same id name the same request).
pub fn traceparents<'a>(
    spans: impl IntoIterator<Item = &'a ingero_trace::model::AnnotationRecord>,
) -> HashMap<String, TraceParent> {
    let mut out = HashMap::new();
    for a in spans {
        if a.end_ns.is_none() {
            continue;
        }
        let get = |k: &str| a.labels.iter().find_map(|(x, v)| (x == k).then_some(v));
        if let (Some(rid), Some(tp)) = (get(REQUEST_KEY), get(TRACEPARENT_KEY)) {
            if let Some(tp) = ids::parse_traceparent(tp) {
                out.entry(rid.clone()).or_insert(tp);
            }
        }
    }
    out
}
