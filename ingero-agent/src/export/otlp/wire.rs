//! The hot path of the export: an `ExportTraceServiceRequest`'s protobuf bytes written
//! straight from [`SpanData`], without building the generated message first. Building
//! `opentelemetry-proto`'s structs copies every attribute's key and value into new strings,
//! and prost then sizes each nested message once per level it is nested in (a key-value pair
//! six levels down is walked six times); here each span's size is computed once, bottom up,
//! and everything is written in one pass (benchmarks-otlp.md has both costs).
//!
//! The generated types stay the reference: [`super::encode::trace_request`] builds the same
//! request, and a test decodes these bytes with them and compares.

use std::sync::Arc;

use ingero_trace::proto::varint;

use super::encode::{SCOPE_NAME, process_attributes};
use super::resource::HostResource;
use super::span::{AttrValue, ProcessResource, SpanData};

// Field numbers (opentelemetry/proto/…/v1/*.proto), as wire keys: (number << 3) | wire type.
const LEN: u64 = 2;
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const fn key(field: u64, wire: u64) -> u64 {
    (field << 3) | wire
}
/// ExportTraceServiceRequest.resource_spans = 1.
const REQ_RESOURCE_SPANS: u64 = key(1, LEN);
/// ResourceSpans.resource = 1, scope_spans = 2.
const RS_RESOURCE: u64 = key(1, LEN);
const RS_SCOPE_SPANS: u64 = key(2, LEN);
/// Resource.attributes = 1.
const RESOURCE_ATTRIBUTES: u64 = key(1, LEN);
/// ScopeSpans.scope = 1, spans = 2.
const SS_SCOPE: u64 = key(1, LEN);
const SS_SPANS: u64 = key(2, LEN);
/// InstrumentationScope.name = 1, version = 2.
const SCOPE_NAME_FIELD: u64 = key(1, LEN);
const SCOPE_VERSION: u64 = key(2, LEN);
/// Span.trace_id = 1, span_id = 2, parent_span_id = 4, name = 5, kind = 6,
/// start_time_unix_nano = 7, end_time_unix_nano = 8, attributes = 9.
const SPAN_TRACE_ID: u64 = key(1, LEN);
const SPAN_SPAN_ID: u64 = key(2, LEN);
const SPAN_PARENT: u64 = key(4, LEN);
const SPAN_NAME: u64 = key(5, LEN);
const SPAN_KIND: u64 = key(6, VARINT);
const SPAN_START: u64 = key(7, FIXED64);
const SPAN_END: u64 = key(8, FIXED64);
const SPAN_ATTRIBUTES: u64 = key(9, LEN);
/// KeyValue.key = 1, value = 2.
const KV_KEY: u64 = key(1, LEN);
const KV_VALUE: u64 = key(2, LEN);
/// AnyValue.string_value = 1, bool_value = 2, int_value = 3.
const ANY_STRING: u64 = key(1, LEN);
const ANY_BOOL: u64 = key(2, VARINT);
const ANY_INT: u64 = key(3, VARINT);
/// SpanKind INTERNAL.
const KIND_INTERNAL: u64 = 1;

/// Bytes of a length-delimited field holding `n` bytes.
fn delimited(key: u64, n: usize) -> usize {
    varint::len(key) + varint::len(n as u64) + n
}

fn put_delimited(out: &mut Vec<u8>, key: u64, bytes: &[u8]) {
    varint::put(out, key);
    varint::put(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_header(out: &mut Vec<u8>, key: u64, n: usize) {
    varint::put(out, key);
    varint::put(out, n as u64);
}

/// The AnyValue's size (proto3: a zero int or false bool is still written, as prost does
/// for a oneof member).
fn any_len(v: &AttrValue) -> usize {
    match v {
        AttrValue::Str(s) => delimited(ANY_STRING, s.len()),
        AttrValue::Int(i) => varint::len(ANY_INT) + varint::len(*i as u64),
        AttrValue::Bool(_) => varint::len(ANY_BOOL) + 1,
    }
}

fn kv_len(k: &str, v: &AttrValue) -> usize {
    let key = if k.is_empty() {
        0
    } else {
        delimited(KV_KEY, k.len())
    };
    key + delimited(KV_VALUE, any_len(v))
}

fn put_kv(out: &mut Vec<u8>, field: u64, k: &str, v: &AttrValue) {
    put_header(out, field, kv_len(k, v));
    if !k.is_empty() {
        put_delimited(out, KV_KEY, k.as_bytes());
    }
    put_header(out, KV_VALUE, any_len(v));
    match v {
        AttrValue::Str(s) => put_delimited(out, ANY_STRING, s.as_bytes()),
        AttrValue::Int(i) => {
            varint::put(out, ANY_INT);
            varint::put(out, *i as u64);
        }
        AttrValue::Bool(b) => {
            varint::put(out, ANY_BOOL);
            out.push(u8::from(*b));
        }
    }
}

fn span_len(s: &SpanData) -> usize {
    let mut n = delimited(SPAN_TRACE_ID, 16) + delimited(SPAN_SPAN_ID, 8);
    if s.parent_span_id.is_some() {
        n += delimited(SPAN_PARENT, 8);
    }
    n += delimited(SPAN_NAME, s.name.len());
    n += varint::len(SPAN_KIND) + varint::len(KIND_INTERNAL);
    if s.start_unix_ns != 0 {
        n += varint::len(SPAN_START) + 8;
    }
    if s.end_unix_ns != 0 {
        n += varint::len(SPAN_END) + 8;
    }
    for (k, v) in &s.attributes {
        n += delimited(SPAN_ATTRIBUTES, kv_len(k, v));
    }
    n
}

fn put_span(out: &mut Vec<u8>, s: &SpanData, len: usize) {
    put_header(out, SS_SPANS, len);
    put_delimited(out, SPAN_TRACE_ID, &s.trace_id);
    put_delimited(out, SPAN_SPAN_ID, &s.span_id);
    if let Some(p) = &s.parent_span_id {
        put_delimited(out, SPAN_PARENT, p);
    }
    put_delimited(out, SPAN_NAME, s.name.as_bytes());
    varint::put(out, SPAN_KIND);
    varint::put(out, KIND_INTERNAL);
    if s.start_unix_ns != 0 {
        varint::put(out, SPAN_START);
        out.extend_from_slice(&s.start_unix_ns.to_le_bytes());
    }
    if s.end_unix_ns != 0 {
        varint::put(out, SPAN_END);
        out.extend_from_slice(&s.end_unix_ns.to_le_bytes());
    }
    for (k, v) in &s.attributes {
        put_kv(out, SPAN_ATTRIBUTES, k, v);
    }
}

/// The Resource message of `host` and `process`, as bytes.
fn resource_bytes(host: &HostResource, process: Option<&ProcessResource>) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    for (k, v) in &host.attributes {
        put_kv(&mut out, RESOURCE_ATTRIBUTES, k, v);
    }
    if let Some(p) = process {
        for (k, v) in process_attributes(p) {
            put_kv(&mut out, RESOURCE_ATTRIBUTES, k, &v);
        }
    }
    out
}

fn scope_bytes() -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    put_delimited(&mut out, SCOPE_NAME_FIELD, SCOPE_NAME.as_bytes());
    put_delimited(
        &mut out,
        SCOPE_VERSION,
        env!("CARGO_PKG_VERSION").as_bytes(),
    );
    out
}

/// Appends to `out` the request for `spans` (one `ResourceSpans` per process, in the order
/// each first appears): the bytes of `encode::trace_request(host, spans)`.
pub fn trace_request_bytes(host: &HostResource, spans: &[SpanData], out: &mut Vec<u8>) {
    let mut order: Vec<&Option<Arc<ProcessResource>>> = Vec::new();
    for s in spans {
        if !order.contains(&&s.process) {
            order.push(&s.process);
        }
    }
    let scope = scope_bytes();
    let mut lens: Vec<usize> = Vec::with_capacity(spans.len());
    for p in order {
        let resource = resource_bytes(host, p.as_deref());
        lens.clear();
        let mut spans_total = 0;
        for s in spans.iter().filter(|s| &s.process == p) {
            let n = span_len(s);
            spans_total += delimited(SS_SPANS, n);
            lens.push(n);
        }
        let scope_spans = delimited(SS_SCOPE, scope.len()) + spans_total;
        let resource_spans =
            delimited(RS_RESOURCE, resource.len()) + delimited(RS_SCOPE_SPANS, scope_spans);
        out.reserve(delimited(REQ_RESOURCE_SPANS, resource_spans));
        put_header(out, REQ_RESOURCE_SPANS, resource_spans);
        put_delimited(out, RS_RESOURCE, &resource);
        put_header(out, RS_SCOPE_SPANS, scope_spans);
        put_delimited(out, SS_SCOPE, &scope);
        for (s, n) in spans.iter().filter(|s| &s.process == p).zip(&lens) {
            put_span(out, s, *n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::otlp::encode::trace_request;
    use crate::export::otlp::resource::HostFacts;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;

    fn span(i: u64, process: Option<Arc<ProcessResource>>, parent: bool) -> SpanData {
        SpanData {
            trace_id: [i as u8 + 1; 16],
            span_id: (i + 1).to_be_bytes(),
            parent_span_id: parent.then_some([9; 8]),
            name: "ingero.step",
            start_unix_ns: 1_796_000_000_000_000_000 + i,
            end_unix_ns: 1_796_000_000_500_000_000 + i,
            attributes: vec![
                ("ingero.label.step".into(), AttrValue::Str(format!("{i}"))),
                ("ingero.cuda_calls".into(), AttrValue::Int(i as i64 * 1000)),
                ("ingero.errors".into(), AttrValue::Int(0)),
                ("ingero.negative".into(), AttrValue::Int(-5)),
                (
                    "ingero.incomplete".into(),
                    AttrValue::Bool(i.is_multiple_of(2)),
                ),
                ("ingero.label.empty".into(), AttrValue::Str(String::new())),
            ],
            process,
        }
    }

    #[test]
    fn the_bytes_are_the_generated_types_request() {
        let host = HostResource::new(&HostFacts {
            service_name: "svc".into(),
            host_name: "h".into(),
            host_id: Some("abc".into()),
            machine_id: 7,
            clock: None,
            extra: vec![("k".into(), "v".into())],
        });
        let p = |pid| {
            Some(Arc::new(ProcessResource {
                pid,
                command: "python3".into(),
                labels: vec![("ingero.rank", "3".into()), ("ingero.run_id", "r".into())],
            }))
        };
        let spans: Vec<SpanData> = (0..20)
            .map(|i| {
                span(
                    i,
                    if i % 3 == 0 {
                        None
                    } else {
                        p(100 + i as u32 % 2)
                    },
                    i % 4 == 0,
                )
            })
            .collect();
        for batch in [&spans[..], &spans[..1], &[]] {
            let mut out = Vec::new();
            trace_request_bytes(&host, batch, &mut out);
            let reference = trace_request(&host, batch);
            let decoded = ExportTraceServiceRequest::decode(&out[..]).expect("decodes");
            assert_eq!(decoded, reference);
            assert_eq!(
                out.len(),
                reference.encoded_len(),
                "no bytes the reference lacks"
            );
        }
    }
}
