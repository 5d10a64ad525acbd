//! `ingero export otlp`: a recording's spans, the ones the live export sends, computed
//! directly by `query`: one scan of the recording folds every event into the step groups
//! (`--otlp-group-by`) and the request groups at once, and `analyze::query::group_rows`
//! gives the rows `query --group-by` prints; each row becomes a span through the same
//! [`span_of_row`] as live. `explain`'s findings, which need the whole recording, are added
//! (the most severe one naming the group).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;
use serde_json::Value as Json;

use super::names as n;
use super::resource::{HostFacts, HostResource, read_machine_id};
use super::span::{
    AttrKey, AttrValue, ProcessResource, SpanContext, SpanData, process_resource, span_of_row,
    traceparents,
};
use crate::analyze::aggregate::Needs;
use crate::analyze::findings::Finding;
use crate::analyze::groups::GroupSpec;
use crate::analyze::query::{GroupRow, REQUEST_KEY, group_rows};
use crate::analyze::{self, Analysis, scan};
use ingero_trace::model::{AnnotationRecord, ReadRecord};
use ingero_trace::read::{TimeRange, TraceReader, empty_record};

/// What to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub group_by: Vec<String>,
    /// A span per `request_id` group too.
    pub requests: bool,
    /// Add `explain`'s findings.
    pub findings: bool,
}

/// The groupings of a replay (and of the live engine: the same list).
pub fn groupings(group_by: &[String], requests: bool) -> Vec<GroupSpec> {
    let mut specs = vec![GroupSpec {
        keys: group_by.to_vec(),
        per_process: true,
    }];
    if requests && group_by != [REQUEST_KEY] {
        specs.push(GroupSpec {
            keys: vec![REQUEST_KEY.to_owned()],
            per_process: true,
        });
    }
    specs
}

/// The span annotations of the recording (read from the packets outside its chunks, as the
/// first pass reads labels: cheap).
fn span_annotations(an: &Analysis) -> Result<Vec<AnnotationRecord>> {
    let mut reader =
        TraceReader::from_files(an.index.files.clone(), TimeRange::all()).skip_bundles();
    let mut rec = empty_record();
    let mut out = Vec::new();
    while reader.next_into(&mut rec)? {
        if let ReadRecord::Annotation(a) = &rec {
            if a.end_ns.is_some() {
                out.push(a.clone());
            }
        }
    }
    Ok(out)
}

/// The most severe finding about `row`: its labels are among the row's, and its process, if
/// it names one, is the row's (findings come most severe first).
fn finding_for<'f>(row: &GroupRow, findings: &'f [Finding]) -> Option<&'f Finding> {
    findings.iter().find(|f| {
        let Some(labels) = &f.labels else {
            return false;
        };
        !labels.is_empty()
            && labels.iter().all(|(k, v)| row.labels.get(k) == Some(v))
            && f.pid.is_none_or(|p| row.pid == Some(p))
    })
}

fn finding_attrs(f: &Finding) -> Vec<(AttrKey, AttrValue)> {
    vec![
        (n::FINDING_KIND.into(), AttrValue::Str(f.kind.clone())),
        (
            n::FINDING_SEVERITY.into(),
            AttrValue::Str(f.severity.label().into()),
        ),
        (
            n::FINDING_IMPACT_NS.into(),
            AttrValue::Int(i64::try_from(f.impact_ns).unwrap_or(i64::MAX)),
        ),
        (n::FINDING_ID.into(), AttrValue::Str(f.id.clone())),
    ]
}

/// The recording's first file, as the live export names it.
pub fn recording_path(an: &Analysis) -> Option<String> {
    an.index.files.first().map(|f| {
        std::fs::canonicalize(f)
            .unwrap_or_else(|_| f.clone())
            .display()
            .to_string()
    })
}

/// Every span of the recording, steps first then requests, each in time order.
pub fn spans(an: &Analysis, opts: &ReplayOptions) -> Result<Vec<SpanData>> {
    let specs = groupings(&opts.group_by, opts.requests);
    let needs = Needs {
        ops: false,
        total: false,
        // For the processes' names (the resource's `process.command`).
        processes: true,
        kernels: false,
    };
    let agg = scan::run(&an.index, &an.selection, specs.clone(), needs)?;
    let findings = if opts.findings {
        analyze::explain(an, opts.group_by.first().map(String::as_str))?.findings
    } else {
        Vec::new()
    };
    let tps = traceparents(&span_annotations(an)?);
    let session = an.index.session.as_ref();
    let names = |pid: u32| {
        agg.procs
            .get(&pid)
            .map(|p| p.name.clone())
            .unwrap_or_default()
    };
    let recording = recording_path(an);
    let ctx = SpanContext {
        labels: &an.index.labels,
        clock: &an.index.clock,
        machine_id: session.map_or(0, |s| s.machine_id),
        session_start_realtime_ns: session.map_or(0, |s| s.started_realtime_ns),
        recording: recording.as_deref(),
        traceparents: &tps,
        process_name: &names,
    };
    let mut resources: HashMap<u32, Arc<ProcessResource>> = HashMap::new();
    let mut out = Vec::new();
    for (spec, g) in specs.iter().zip(&agg.groupings) {
        for row in group_rows(an, &agg.names, g) {
            let process = row.pid.map(|p| {
                resources
                    .entry(p)
                    .or_insert_with(|| Arc::new(process_resource(p, &ctx)))
                    .clone()
            });
            let extra = finding_for(&row, &findings)
                .map(finding_attrs)
                .unwrap_or_default();
            out.push(span_of_row(&row, &spec.keys, &ctx, process, extra));
        }
    }
    Ok(out)
}

/// The host resource of a replay: the recording host's machine name, machine id and clock
/// error bound as its session recorded them (and its `/etc/machine-id` when replayed on that
/// host).
pub fn host_resource(
    an: &Analysis,
    service_name: String,
    extra: Vec<(String, String)>,
) -> HostResource {
    let session = an.index.session.as_ref();
    let machine_id = session.map_or(0, |s| s.machine_id);
    let host_id = read_machine_id()
        .filter(|id| session.is_some() && ingero_trace::host::machine_id_from(id) == machine_id);
    HostResource::new(&HostFacts {
        service_name,
        host_name: session.map_or_else(String::new, |s| s.info.machine().to_owned()),
        host_id,
        machine_id,
        clock: session.and_then(|s| s.info.clock),
        extra,
    })
}

/// A one-line description of a span (`--dry-run` without `--json`).
pub fn describe(s: &SpanData) -> String {
    let labels: Vec<String> = s
        .attributes
        .iter()
        .filter_map(|(k, v)| {
            let k = k.strip_prefix(n::LABEL_PREFIX)?;
            Some(format!("{k}={}", v.json().as_str().unwrap_or_default()))
        })
        .collect();
    let int = |k: &str| match s.attr(k) {
        Some(AttrValue::Int(i)) => *i,
        _ => 0,
    };
    let pid = s
        .process
        .as_ref()
        .map_or_else(|| "-".to_owned(), |p| p.pid.to_string());
    format!(
        "{} {} pid={pid} calls={} api_ns={} trace_id={}",
        s.name,
        labels.join(","),
        int(n::CUDA_CALLS),
        int(n::API_TIME_NS),
        super::ids::hex(&s.trace_id),
    )
}

/// The labels of a span's group as JSON (tests compare spans with `query` rows by them).
pub fn group_labels(s: &SpanData) -> serde_json::Map<String, Json> {
    s.attributes
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(n::LABEL_PREFIX)?.to_owned(), v.json())))
        .collect()
}
