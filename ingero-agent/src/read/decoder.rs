//! Turns the packets of one file into [`ReadRecord`]s: keeps each sequence's interning tables
//! and clock, the track tree from the descriptors, and the open slices per track.

use std::sync::Arc;

use anyhow::{Context, Result};
use ingero_ebpf::{CudaOp, OffCpuReason};
use prost::Message;

use super::types::{
    CounterKind, CounterSample, CudaCallRecord, LabelInterval, LifecycleRecord, OffCpuRecord,
    ReadRecord, SessionRecord, ThreadRef,
};
use crate::decode::{CudaArgs, MemcpyKind, ProcessOp};
use crate::record::proto::{DebugAnnotation, TracePacket, TrackDescriptor, clock_id, event_type};
use crate::record::schema::{self, arg, session, stats};
use crate::record::{FastMap, FinalStats, SessionInfo, memcpy_kind_text};
use crate::timeline::record::{AnnotationRecord, Scope};

/// A debug-annotation value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    U(u64),
    I(i64),
    B(bool),
    S(Arc<str>),
}

impl Val {
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Val::U(v) => Some(*v),
            Val::I(v) => u64::try_from(*v).ok(),
            Val::B(b) => Some(u64::from(*b)),
            Val::S(s) => s
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .or_else(|| s.parse().ok()),
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Val::I(v) => Some(*v),
            other => other.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::S(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Default)]
struct SeqState {
    names: FastMap<u64, Arc<str>>,
    debug_names: FastMap<u64, Arc<str>>,
    strings: FastMap<u64, Arc<str>>,
    /// Clock 64's current value.
    clock64: Option<u64>,
    default_clock: Option<u32>,
}

#[derive(Clone, Debug)]
enum TrackKind {
    Ingero,
    Process(u32),
    Thread(ThreadRef),
    OffCpu(ThreadRef),
    Labels(Option<u32>),
    State(Option<u32>, String),
    SpanLane(Option<u32>),
    Counter(CounterKind),
    Other,
}

struct Open {
    ts: u64,
    name: Arc<str>,
    args: Vec<(Arc<str>, Val)>,
}

/// The decoding state of one file.
#[derive(Default)]
pub struct FileDecoder {
    seqs: FastMap<u32, SeqState>,
    tracks: FastMap<u64, TrackKind>,
    open: FastMap<u64, Vec<Open>>,
    op_by_name: FastMap<&'static str, CudaOp>,
}

fn find<'a>(args: &'a [(Arc<str>, Val)], key: &str) -> Option<&'a Val> {
    args.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
}

fn u64_of(args: &[(Arc<str>, Val)], key: &str) -> Option<u64> {
    find(args, key).and_then(Val::as_u64)
}

impl FileDecoder {
    pub fn new() -> FileDecoder {
        FileDecoder {
            op_by_name: CudaOp::ALL.iter().map(|op| (op.name(), *op)).collect(),
            ..Default::default()
        }
    }

    /// Decodes one packet, pushing what it completes onto `out`.
    pub fn packet(&mut self, bytes: &[u8], out: &mut Vec<ReadRecord>) -> Result<()> {
        let pkt = TracePacket::decode(bytes).context("decoding a packet")?;
        let seq_id = pkt.trusted_packet_sequence_id.unwrap_or(0);
        let cleared = pkt.sequence_flags.unwrap_or(0)
            & crate::record::proto::SEQ_INCREMENTAL_STATE_CLEARED
            != 0;
        let seq = self.seqs.entry(seq_id).or_default();
        if cleared {
            *seq = SeqState::default();
        }
        if let Some(d) = &pkt.trace_packet_defaults {
            seq.default_clock = d.timestamp_clock_id;
        }
        if let Some(i) = pkt.interned_data {
            for n in i.event_names {
                seq.names
                    .insert(n.iid.unwrap_or(0), n.name.unwrap_or_default().into());
            }
            for n in i.debug_annotation_names {
                seq.debug_names
                    .insert(n.iid.unwrap_or(0), n.name.unwrap_or_default().into());
            }
            for s in i.debug_annotation_string_values {
                seq.strings.insert(
                    s.iid.unwrap_or(0),
                    String::from_utf8_lossy(&s.str.unwrap_or_default()).into(),
                );
            }
        }
        if let Some(cs) = &pkt.clock_snapshot {
            for c in &cs.clocks {
                if c.clock_id == Some(clock_id::INCREMENTAL_MONOTONIC) {
                    seq.clock64 = c.timestamp;
                }
            }
            return Ok(());
        }
        let ts = match pkt.timestamp {
            Some(t) => {
                let clock = pkt.timestamp_clock_id.or(seq.default_clock);
                if clock == Some(clock_id::INCREMENTAL_MONOTONIC) {
                    let v = seq.clock64.unwrap_or(0).saturating_add(t);
                    seq.clock64 = Some(v);
                    v
                } else {
                    t
                }
            }
            None => seq.clock64.unwrap_or(0),
        };
        if let Some(d) = pkt.track_descriptor {
            self.describe(d);
            return Ok(());
        }
        let Some(te) = pkt.track_event else {
            return Ok(());
        };
        let track = te.track_uuid.unwrap_or(0);
        let name: Arc<str> = match (te.name_iid, te.name) {
            (Some(iid), _) => seq.names.get(&iid).cloned().unwrap_or_else(|| "".into()),
            (None, Some(n)) => n.into(),
            (None, None) => "".into(),
        };
        let args = resolve_args(seq, te.debug_annotations);
        match te.r#type.unwrap_or(0) {
            event_type::SLICE_BEGIN => {
                self.open
                    .entry(track)
                    .or_default()
                    .push(Open { ts, name, args })
            }
            event_type::SLICE_END => {
                let Some(open) = self.open.get_mut(&track).and_then(Vec::pop) else {
                    return Ok(());
                };
                self.slice(track, open, ts, out);
            }
            event_type::INSTANT => self.instant(track, ts, &name, &args, out),
            event_type::COUNTER => {
                if let Some(TrackKind::Counter(kind)) = self.tracks.get(&track) {
                    out.push(ReadRecord::Counter(CounterSample {
                        kind: *kind,
                        ts_ns: ts,
                        value: te.counter_value.unwrap_or(0),
                    }));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn describe(&mut self, d: TrackDescriptor) {
        let uuid = d.uuid.unwrap_or(0);
        let parent = d.parent_uuid.and_then(|p| self.tracks.get(&p)).cloned();
        let name = d.name.unwrap_or_default();
        let kind = if let Some(p) = d.process {
            TrackKind::Process(p.pid.unwrap_or(0) as u32)
        } else if let Some(t) = d.thread {
            TrackKind::Thread(ThreadRef {
                pid: t.pid.unwrap_or(0) as u32,
                tid: t.tid.unwrap_or(0) as u32,
                name: t.thread_name.unwrap_or_default(),
            })
        } else if d.counter.is_some() {
            match (name.as_str(), parent) {
                (schema::TRACK_DEVICE_MEMORY, Some(TrackKind::Process(pid))) => {
                    TrackKind::Counter(CounterKind::DeviceMemory { pid })
                }
                (schema::TRACK_EVENTS_PER_SECOND, _) => {
                    TrackKind::Counter(CounterKind::EventsPerSecond)
                }
                (schema::TRACK_DROPS, _) => TrackKind::Counter(CounterKind::Drops),
                _ => TrackKind::Other,
            }
        } else {
            match (name.as_str(), parent) {
                (schema::TRACK_INGERO, None) => TrackKind::Ingero,
                (schema::TRACK_TRACE_WIDE, None) => TrackKind::Labels(None),
                (schema::TRACK_LABELS, Some(TrackKind::Process(pid))) => {
                    TrackKind::Labels(Some(pid))
                }
                (schema::TRACK_OFF_CPU, Some(TrackKind::Thread(t))) => TrackKind::OffCpu(t),
                (n, Some(TrackKind::Labels(scope))) if n.starts_with(schema::TRACK_SPANS) => {
                    TrackKind::SpanLane(scope)
                }
                (n, Some(TrackKind::Labels(scope))) => TrackKind::State(scope, n.to_owned()),
                _ => TrackKind::Other,
            }
        };
        self.tracks.insert(uuid, kind);
    }

    fn slice(&mut self, track: u64, open: Open, end: u64, out: &mut Vec<ReadRecord>) {
        let duration_ns = end.saturating_sub(open.ts);
        let args = &open.args;
        match self.tracks.get(&track) {
            Some(TrackKind::Thread(t)) => {
                let Some(op) = self.op_by_name.get(&*open.name).copied() else {
                    return;
                };
                out.push(ReadRecord::Cuda(CudaCallRecord {
                    ts_ns: open.ts,
                    duration_ns,
                    thread: t.clone(),
                    op,
                    ret: find(args, arg::RET)
                        .and_then(Val::as_i64)
                        .and_then(|v| i32::try_from(v).ok())
                        .unwrap_or(0),
                    args: cuda_args(op, args),
                    clamped_from_ns: u64_of(args, arg::CLAMPED_FROM_NS),
                }));
            }
            Some(TrackKind::OffCpu(t)) => {
                let reason = match &*open.name {
                    "preempted" => OffCpuReason::Preempted,
                    _ => OffCpuReason::Blocked,
                };
                out.push(ReadRecord::OffCpu(OffCpuRecord {
                    ts_ns: open.ts,
                    duration_ns,
                    thread: t.clone(),
                    reason,
                    prev_state: find(args, arg::PREV_STATE)
                        .and_then(Val::as_i64)
                        .unwrap_or(0),
                    next_tid: u64_of(args, arg::NEXT_TID).unwrap_or(0) as u32,
                    next_comm: find(args, arg::NEXT_COMM)
                        .and_then(Val::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    cpu: u64_of(args, arg::CPU).unwrap_or(0) as u32,
                }));
            }
            Some(TrackKind::SpanLane(scope)) => {
                out.push(ReadRecord::Annotation(annotation(
                    *scope,
                    open.ts,
                    Some(end),
                    args,
                )));
            }
            Some(TrackKind::State(scope, key)) => {
                let value = open
                    .name
                    .strip_prefix(key.as_str())
                    .and_then(|v| v.strip_prefix('='))
                    .unwrap_or("");
                out.push(ReadRecord::LabelState(LabelInterval {
                    scope_pid: *scope,
                    key: key.clone(),
                    value: value.to_owned(),
                    start_ns: open.ts,
                    end_ns: end,
                    provenance_uid: u64_of(args, arg::PROVENANCE_UID).unwrap_or(0) as u32,
                    provenance_pid: u64_of(args, arg::PROVENANCE_PID).map(|p| p as u32),
                    continued: find(args, arg::CONTINUED).is_some(),
                }));
            }
            _ => {}
        }
    }

    fn instant(
        &mut self,
        track: u64,
        ts: u64,
        name: &str,
        args: &[(Arc<str>, Val)],
        out: &mut Vec<ReadRecord>,
    ) {
        match self.tracks.get(&track) {
            Some(TrackKind::Thread(t)) => {
                let op = match name {
                    "exec" => ProcessOp::Exec,
                    "exit" => ProcessOp::Exit,
                    "thread_exit" => ProcessOp::ThreadExit,
                    "fork" => ProcessOp::Fork,
                    "thread_start" => ProcessOp::ThreadStart,
                    _ => return,
                };
                out.push(ReadRecord::Lifecycle(LifecycleRecord {
                    ts_ns: ts,
                    thread: t.clone(),
                    op,
                    other_pid: u64_of(args, arg::OTHER_PID).unwrap_or(0) as u32,
                    clone_flags_known: matches!(
                        find(args, arg::CLONE_FLAGS_KNOWN),
                        Some(Val::B(true))
                    ),
                    text: find(args, arg::TEXT)
                        .and_then(Val::as_str)
                        .unwrap_or("")
                        .to_owned(),
                }));
            }
            Some(TrackKind::Labels(scope)) if name == schema::EV_ANNOTATION => {
                out.push(ReadRecord::Annotation(annotation(*scope, ts, None, args)));
            }
            Some(TrackKind::Ingero) if name == schema::EV_SESSION => {
                let s = |k: &str| find(args, k).and_then(Val::as_str).unwrap_or("").to_owned();
                let list = |k: &str| {
                    let v = s(k);
                    if v.is_empty() {
                        Vec::new()
                    } else {
                        v.split('\n').map(str::to_owned).collect()
                    }
                };
                out.push(ReadRecord::Session(SessionRecord {
                    ts_ns: ts,
                    info: SessionInfo {
                        host: s(session::HOST),
                        kernel: s(session::KERNEL),
                        agent_version: s(session::AGENT_VERSION),
                        command_line: s(session::COMMAND_LINE),
                        targets: list(session::TARGETS),
                        probes: list(session::PROBES),
                    },
                    machine_id: u64_of(args, session::MACHINE_ID).unwrap_or(0) as u32,
                    file_index: u64_of(args, session::FILE_INDEX).unwrap_or(0),
                    started_realtime_ns: u64_of(args, session::STARTED_REALTIME_NS).unwrap_or(0),
                }));
            }
            Some(TrackKind::Ingero) if name == schema::EV_STATISTICS => {
                let mut st = FinalStats::default();
                for (k, v) in args {
                    let v = v.as_u64().unwrap_or(0);
                    let groups = [
                        (stats::EVENTS, &mut st.events),
                        (stats::DROPS, &mut st.drops),
                        (stats::REJECTED, &mut st.rejected),
                        (stats::RECORDER, &mut st.recorder),
                    ];
                    for (prefix, list) in groups {
                        if let Some(name) = k.strip_prefix(prefix) {
                            list.push((name.to_owned(), v));
                        }
                    }
                }
                out.push(ReadRecord::Statistics(st));
            }
            _ => {}
        }
    }
}

fn resolve_args(seq: &SeqState, raw: Vec<DebugAnnotation>) -> Vec<(Arc<str>, Val)> {
    raw.into_iter()
        .map(|d| {
            let name: Arc<str> = match (d.name_iid, d.name) {
                (Some(iid), _) => seq
                    .debug_names
                    .get(&iid)
                    .cloned()
                    .unwrap_or_else(|| "".into()),
                (None, Some(n)) => n.into(),
                (None, None) => "".into(),
            };
            let val = if let Some(v) = d.uint_value {
                Val::U(v)
            } else if let Some(v) = d.int_value {
                Val::I(v)
            } else if let Some(v) = d.pointer_value {
                Val::U(v)
            } else if let Some(b) = d.bool_value {
                Val::B(b)
            } else if let Some(iid) = d.string_value_iid {
                Val::S(seq.strings.get(&iid).cloned().unwrap_or_else(|| "".into()))
            } else {
                Val::S(d.string_value.unwrap_or_default().into())
            };
            (name, val)
        })
        .collect()
}

fn annotation(
    scope: Option<u32>,
    ts: u64,
    end: Option<u64>,
    args: &[(Arc<str>, Val)],
) -> AnnotationRecord {
    let labels = args
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.strip_prefix(arg::LABEL_PREFIX)?.to_owned(),
                v.as_str().unwrap_or("").to_owned(),
            ))
        })
        .collect();
    let start_time = u64_of(args, arg::SCOPE_START_TIME);
    AnnotationRecord {
        labels,
        scope: scope
            .zip(start_time)
            .map(|(pid, start_time)| Scope { pid, start_time }),
        ts_ns: ts,
        end_ns: end,
        provenance_uid: u64_of(args, arg::PROVENANCE_UID).unwrap_or(0) as u32,
        provenance_pid: u64_of(args, arg::PROVENANCE_PID).map(|p| p as u32),
    }
}

fn memcpy_kind(text: &str) -> MemcpyKind {
    if let Some(raw) = text.strip_prefix("unknown:") {
        return MemcpyKind::Unknown(raw.parse().unwrap_or(0));
    }
    (0..5)
        .map(MemcpyKind::from_raw)
        .find(|k| memcpy_kind_text(*k) == text)
        .unwrap_or(MemcpyKind::Unknown(0))
}

/// Rebuilds an op's arguments from its debug annotations (absent optional ones stay `None`).
fn cuda_args(op: CudaOp, a: &[(Arc<str>, Val)]) -> CudaArgs {
    use CudaOp::*;
    let u = |k: &str| u64_of(a, k);
    let dim = |k: &str| {
        find(a, k)
            .and_then(Val::as_str)
            .and_then(schema::parse_dim3)
            .unwrap_or([0; 3])
    };
    match op {
        Malloc | MallocManaged | MallocAsync => CudaArgs::Alloc {
            size: u(arg::SIZE).unwrap_or(0),
            ptr: u(arg::PTR),
            stream: u(arg::STREAM),
        },
        Free | FreeAsync => CudaArgs::Free {
            ptr: u(arg::PTR).unwrap_or(0),
            size: u(arg::SIZE),
            stream: u(arg::STREAM),
        },
        MallocHost | HostAlloc => CudaArgs::HostAlloc {
            size: u(arg::SIZE).unwrap_or(0),
        },
        FreeHost => CudaArgs::HostFree {
            ptr: u(arg::PTR).unwrap_or(0),
        },
        LaunchKernel | LaunchCooperativeKernel | LaunchKernelExC => CudaArgs::Launch {
            func: u(arg::FUNC).unwrap_or(0),
            grid: dim(arg::GRID),
            block: dim(arg::BLOCK),
            shared_mem: u(arg::SHARED_MEM).unwrap_or(0),
            stream: u(arg::STREAM).unwrap_or(0),
        },
        GraphLaunch => CudaArgs::GraphLaunch {
            graph_exec: u(arg::GRAPH_EXEC).unwrap_or(0),
            stream: u(arg::STREAM).unwrap_or(0),
        },
        Memcpy | MemcpyAsync | Memcpy2D | Memcpy2DAsync => CudaArgs::Memcpy {
            count: u(arg::COUNT).unwrap_or(0),
            kind: memcpy_kind(find(a, arg::KIND).and_then(Val::as_str).unwrap_or("")),
            stream: u(arg::STREAM),
            width_height: u(arg::WIDTH).zip(u(arg::HEIGHT)),
        },
        MemcpyPeer | MemcpyPeerAsync => CudaArgs::MemcpyPeer {
            count: u(arg::COUNT).unwrap_or(0),
            dst_device: find(a, arg::DST_DEVICE).and_then(Val::as_i64).unwrap_or(0) as i32,
            src_device: find(a, arg::SRC_DEVICE).and_then(Val::as_i64).unwrap_or(0) as i32,
            stream: u(arg::STREAM),
        },
        Memset | MemsetAsync => CudaArgs::Memset {
            count: u(arg::COUNT).unwrap_or(0),
            stream: u(arg::STREAM),
        },
        StreamSynchronize | DeviceSynchronize | EventSynchronize => CudaArgs::Sync {
            stream: u(arg::STREAM),
            event: u(arg::EVENT),
        },
    }
}
