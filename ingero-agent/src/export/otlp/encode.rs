//! Spans to OTLP: an `ExportTraceServiceRequest` (one `ResourceSpans` per traced process,
//! the host's attributes on each), its protobuf bytes, gzip; and the JSON form
//! `--dry-run --json` prints (one object per span).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use libdeflater::{CompressionLvl, Compressor};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span::SpanKind};
use prost::Message;
use serde_json::{Map, Value as Json, json};

use super::ids::hex;
use super::names as n;
use super::resource::HostResource;
use super::span::{AttrValue, ProcessResource, SpanData};

/// The instrumentation scope every span and metric is sent under.
pub const SCOPE_NAME: &str = "ingero";

/// gzip level (libdeflate's 1–12): 1 costs a fraction of the CPU of the higher levels and
/// loses little on attribute-heavy spans (benchmarks-otlp.md).
pub const GZIP_LEVEL: i32 = 1;

/// A gzip compressor, kept by its user (libdeflate's state is a few hundred KiB).
pub struct Gzip {
    c: Compressor,
}

impl Gzip {
    pub fn new() -> Gzip {
        let level = CompressionLvl::new(GZIP_LEVEL).unwrap_or_else(|_| CompressionLvl::fastest());
        Gzip {
            c: Compressor::new(level),
        }
    }

    /// `raw` as a gzip member, in `out` (whose room is kept from call to call: a request's
    /// body is a few hundred KiB, and fresh pages of that size cost more to fault in and
    /// zero than compressing them).
    pub fn compress_into(&mut self, raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(self.c.gzip_compress_bound(raw.len()), 0);
        let n = self
            .c
            .gzip_compress(raw, out)
            .map_err(|e| anyhow!("gzip: {e:?}"))?;
        out.truncate(n);
        Ok(())
    }

    /// `raw` as a gzip member.
    pub fn compress(&mut self, raw: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.compress_into(raw, &mut out)?;
        Ok(out)
    }
}

impl Default for Gzip {
    fn default() -> Self {
        Gzip::new()
    }
}

pub fn key_value(k: &str, v: &AttrValue) -> KeyValue {
    let value = match v {
        AttrValue::Str(s) => any_value::Value::StringValue(s.clone()),
        AttrValue::Int(i) => any_value::Value::IntValue(*i),
        AttrValue::Bool(b) => any_value::Value::BoolValue(*b),
    };
    KeyValue {
        key: k.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

pub fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: SCOPE_NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

/// The host's attributes, then the process's (pid, command, rank, …).
pub fn resource(host: &HostResource, process: Option<&ProcessResource>) -> Resource {
    let mut attributes: Vec<KeyValue> = host
        .attributes
        .iter()
        .map(|(k, v)| key_value(k, v))
        .collect();
    if let Some(p) = process {
        attributes.extend(process_attributes(p).iter().map(|(k, v)| key_value(k, v)));
    }
    Resource {
        attributes,
        ..Default::default()
    }
}

/// A process's resource attributes.
pub fn process_attributes(p: &ProcessResource) -> Vec<(&'static str, AttrValue)> {
    let mut out = vec![(n::PROCESS_PID, AttrValue::Int(i64::from(p.pid)))];
    if !p.command.is_empty() {
        out.push((n::PROCESS_COMMAND, AttrValue::Str(p.command.clone())));
    }
    for (k, v) in &p.labels {
        // Ranks and sizes are numbers when the launcher gave numbers.
        let value = match (*k, v.parse::<i64>()) {
            (n::RUN_ID, _) | (_, Err(_)) => AttrValue::Str(v.clone()),
            (_, Ok(i)) => AttrValue::Int(i),
        };
        out.push((*k, value));
    }
    out
}

/// One span as OTLP.
pub fn span(s: &SpanData) -> Span {
    Span {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        parent_span_id: s.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
        name: s.name.to_owned(),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: s.start_unix_ns,
        end_time_unix_nano: s.end_unix_ns,
        attributes: s.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
        ..Default::default()
    }
}

/// The request for `spans`: grouped by process, in the order each process first appears.
pub fn trace_request(host: &HostResource, spans: &[SpanData]) -> ExportTraceServiceRequest {
    let mut order: Vec<Option<Arc<ProcessResource>>> = Vec::new();
    let mut by: BTreeMap<usize, Vec<Span>> = BTreeMap::new();
    for s in spans {
        let i = match order.iter().position(|p| p == &s.process) {
            Some(i) => i,
            None => {
                order.push(s.process.clone());
                order.len() - 1
            }
        };
        by.entry(i).or_default().push(span(s));
    }
    let resource_spans = by
        .into_iter()
        .map(|(i, spans)| ResourceSpans {
            resource: Some(resource(host, order.get(i).and_then(|p| p.as_deref()))),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest { resource_spans }
}

/// A message's protobuf bytes, gzipped when `gzip`.
pub fn body(msg: &impl Message, gzip: Option<&mut Gzip>) -> Result<Vec<u8>> {
    let raw = msg.encode_to_vec();
    match gzip {
        Some(z) => z.compress(&raw),
        None => Ok(raw),
    }
}

fn attrs_json<'a>(attrs: impl IntoIterator<Item = (&'a str, &'a AttrValue)>) -> Json {
    let mut m = Map::new();
    for (k, v) in attrs {
        m.insert(k.to_owned(), v.json());
    }
    Json::Object(m)
}

/// A span as `--dry-run --json` prints it (documented in docs/fleet.md).
pub fn span_json(host: &HostResource, s: &SpanData) -> Json {
    let mut resource: Vec<(&str, &AttrValue)> = host
        .attributes
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let process = s
        .process
        .as_deref()
        .map(process_attributes)
        .unwrap_or_default();
    resource.extend(process.iter().map(|(k, v)| (*k, v)));
    json!({
        "trace_id": hex(&s.trace_id),
        "span_id": hex(&s.span_id),
        "parent_span_id": s.parent_span_id.map(|p| hex(&p)),
        "name": s.name,
        "kind": "internal",
        "start_time_unix_nano": s.start_unix_ns,
        "end_time_unix_nano": s.end_unix_ns,
        "attributes": attrs_json(s.attributes.iter().map(|(k, v)| (k.as_ref(), v))),
        "resource": attrs_json(resource),
    })
}
