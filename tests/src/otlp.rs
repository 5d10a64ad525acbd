//! An OTLP/HTTP receiver for tests: a std `TcpListener` on 127.0.0.1:0 that decodes
//! `ExportTraceServiceRequest`s and `ExportMetricsServiceRequest`s with the protobuf types of
//! `opentelemetry-proto` (gzip bodies inflated with flate2), answers by a script of faults
//! (statuses with `Retry-After`, partial success, stalls), and logs every request with the
//! time it arrived. Connection refused is tested with [`dead_endpoint`].

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use flate2::read::GzDecoder;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Map, Value};

/// How the receiver answers one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200 with an empty response.
    Ok,
    /// 200 with `partial_success` rejecting this many items.
    Partial(i64),
    /// This status (and `Retry-After`, when given), with no body.
    Status(u16, Option<String>),
    /// Read the request, then hold the connection this long before answering 200.
    Stall(Duration),
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Logged {
    pub at: Instant,
    pub path: String,
    pub content_type: String,
    pub gzip: bool,
    pub bytes: usize,
    pub answer: Answer,
}

#[derive(Default)]
struct State {
    script: VecDeque<Answer>,
    log: Vec<Logged>,
    /// Decoded requests that were answered with success (partial success included).
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    errors: Vec<String>,
}

/// The running receiver; stops when dropped.
pub struct Receiver {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    _thread: JoinHandle<()>,
}

impl Receiver {
    /// Listens on an ephemeral port of 127.0.0.1, answering 200 to everything.
    pub fn start() -> Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the test receiver")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let thread = std::thread::Builder::new()
            .name("otlp-receiver".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let s = s.clone();
                    let _ = std::thread::Builder::new()
                        .name("otlp-receiver".into())
                        .spawn(move || serve(conn, &s));
                }
            })
            .context("starting the test receiver")?;
        Ok(Receiver {
            addr,
            state,
            _thread: thread,
        })
    }

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answers to the next requests, in order (then 200 again).
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.lock().script.extend(answers);
    }

    pub fn log(&self) -> Vec<Logged> {
        self.lock().log.clone()
    }

    /// Requests that could not be read or decoded.
    pub fn errors(&self) -> Vec<String> {
        self.lock().errors.clone()
    }

    pub fn trace_requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.lock().traces.clone()
    }

    pub fn metric_requests(&self) -> Vec<ExportMetricsServiceRequest> {
        self.lock().metrics.clone()
    }

    /// Every span accepted, flattened with its resource's attributes.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        let mut out = Vec::new();
        for req in self.trace_requests() {
            for rs in req.resource_spans {
                let resource = rs
                    .resource
                    .map(|r| attributes(&r.attributes))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        out.push(ReceivedSpan {
                            resource: resource.clone(),
                            attributes: attributes(&span.attributes),
                            span,
                        });
                    }
                }
            }
        }
        out
    }

    /// Waits until at least `n` spans were accepted or `timeout` passed; returns the spans.
    pub fn wait_for_spans(&self, n: usize, timeout: Duration) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if spans.len() >= n || Instant::now() >= deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A span and its resource's attributes, as JSON values (ints as numbers).
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub span: Span,
    pub attributes: Map<String, Value>,
    pub resource: Map<String, Value>,
}

impl ReceivedSpan {
    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.get(key).and_then(Value::as_i64)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(Value::as_str)
    }

    /// The span's group labels (`ingero.label.*` without the prefix).
    pub fn labels(&self) -> Map<String, Value> {
        self.attributes
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("ingero.label.")?.to_owned(), v.clone())))
            .collect()
    }
}

/// OTLP attributes as JSON values.
pub fn attributes(kvs: &[KeyValue]) -> Map<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value(kv.value.as_ref())))
        .collect()
}

fn value(v: Option<&AnyValue>) -> Value {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => Value::String(s.clone()),
        Some(any_value::Value::IntValue(i)) => Value::from(*i),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(*b),
        Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
        _ => Value::Null,
    }
}

/// An endpoint nothing listens on (a port bound, then released).
pub fn dead_endpoint() -> Result<String> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    drop(l);
    Ok(format!("http://{addr}"))
}

struct Request {
    path: String,
    content_type: String,
    gzip: bool,
    body: Vec<u8>,
}

/// One request off the connection; `None` once the client closed it.
fn read_request(r: &mut BufReader<TcpStream>) -> Result<Option<Request>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "POST" {
        bail!("method {method}");
    }
    let (mut len, mut content_type, mut gzip) = (0usize, String::new(), false);
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.to_ascii_lowercase().as_str() {
            "content-length" => len = v.parse()?,
            "content-type" => content_type = v.to_owned(),
            "content-encoding" => gzip = v.eq_ignore_ascii_case("gzip"),
            "transfer-encoding" => bail!("transfer-encoding {v} (the exporter sends a length)"),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(Some(Request {
        path: path.to_owned(),
        content_type,
        gzip,
        body,
    }))
}

fn respond(w: &mut TcpStream, status: u16, headers: &[(&str, String)], body: &[u8]) -> Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        429 => "Too Many Requests",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    w.flush()?;
    Ok(())
}

fn serve(conn: TcpStream, state: &Arc<Mutex<State>>) {
    let Ok(mut w) = conn.try_clone() else {
        return;
    };
    let mut r = BufReader::new(conn);
    loop {
        let req = match read_request(&mut r) {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(e) => {
                if let Ok(mut s) = state.lock() {
                    s.errors.push(format!("{e:#}"));
                }
                return;
            }
        };
        let at = Instant::now();
        let answer = state
            .lock()
            .ok()
            .and_then(|mut s| s.script.pop_front())
            .unwrap_or(Answer::Ok);
        let raw = if req.gzip {
            let mut out = Vec::new();
            match GzDecoder::new(&req.body[..]).read_to_end(&mut out) {
                Ok(_) => out,
                Err(e) => {
                    if let Ok(mut s) = state.lock() {
                        s.errors.push(format!("gzip: {e}"));
                    }
                    return;
                }
            }
        } else {
            req.body.clone()
        };
        let accepted = matches!(answer, Answer::Ok | Answer::Partial(_) | Answer::Stall(_));
        let mut body = Vec::new();
        if let Ok(mut s) = state.lock() {
            s.log.push(Logged {
                at,
                path: req.path.clone(),
                content_type: req.content_type.clone(),
                gzip: req.gzip,
                bytes: req.body.len(),
                answer: answer.clone(),
            });
            let rejected = match answer {
                Answer::Partial(n) => n,
                _ => 0,
            };
            if req.path.ends_with("/v1/traces") {
                match ExportTraceServiceRequest::decode(&raw[..]) {
                    Ok(m) if accepted => s.traces.push(m),
                    Ok(_) => {}
                    Err(e) => s.errors.push(format!("traces: {e}")),
                }
                let partial_success = (rejected > 0).then(|| ExportTracePartialSuccess {
                    rejected_spans: rejected,
                    error_message: "test: rejected".into(),
                });
                body = ExportTraceServiceResponse { partial_success }.encode_to_vec();
            } else if req.path.ends_with("/v1/metrics") {
                match ExportMetricsServiceRequest::decode(&raw[..]) {
                    Ok(m) if accepted => s.metrics.push(m),
                    Ok(_) => {}
                    Err(e) => s.errors.push(format!("metrics: {e}")),
                }
                let partial_success = (rejected > 0).then(|| ExportMetricsPartialSuccess {
                    rejected_data_points: rejected,
                    error_message: "test: rejected".into(),
                });
                body = ExportMetricsServiceResponse { partial_success }.encode_to_vec();
            } else {
                s.errors.push(format!("unknown path {}", req.path));
            }
        }
        let sent = match answer {
            Answer::Ok | Answer::Partial(_) => respond(&mut w, 200, &[], &body),
            Answer::Stall(d) => {
                std::thread::sleep(d);
                respond(&mut w, 200, &[], &body)
            }
            Answer::Status(code, retry_after) => {
                let h: Vec<(&str, String)> = retry_after
                    .map(|v| ("Retry-After", v))
                    .into_iter()
                    .collect();
                respond(&mut w, code, &h, b"")
            }
        };
        if sent.is_err() {
            return;
        }
    }
}
