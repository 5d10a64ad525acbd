//! What the reader's property tests share: recordings written through the real [`Recorder`]
//! from generated [`synth`] workloads, the damage done to them, packet-shaped noise, and
//! reading a file every way the reader offers under a watchdog.
//!
//! Each test binary (`reader_properties`, `reader_memory`) uses a part of this, hence the
//! `dead_code` allowance: the rest is dead in that binary only.
#![allow(dead_code, reason = "each test binary uses a part of these helpers")]
#![allow(
    clippy::expect_used,
    reason = "test set-up outside #[test] functions: a failed step is a failed test"
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use ingero_ebpf::{CudaOp, OffCpuReason};
use ingero_trace::model::{
    AnnotationRecord, Comm, CudaArgs, Event, FinalStats, MemcpyKind, OffCpu, ReadRecord, Scope,
    Task, TimelineRecord,
};
use ingero_trace::proto::keys::{COMPRESSED_PACKETS, FRAME};
use ingero_trace::proto::varint;
use ingero_trace::read::{Damage, TimeRange, TraceReader};
use ingero_trace::synth::{self, SCENARIO_T0 as T0};
use ingero_trace::write::{Recorder, RecorderConfig};
use proptest::prelude::*;
use proptest::sample::Index;

/// How long one reading of one generated file may take before the test calls it a hang. Far
/// above what a case needs (milliseconds), so a slow CI machine does not trip it.
pub const WATCHDOG: Duration = Duration::from_secs(30);

/// The most records a file of `len` bytes can yield: every record is completed by a packet of
/// its own (a plain packet completes at most one, and so does each packet inside a
/// container), every packet takes at least two bytes (tag, length) in the file or in an
/// inflated container, and deflate inflates at most 1032 bytes per compressed byte (a
/// 258-byte copy costs at least two bits). More records than this means the reader yields
/// something twice or loops.
pub fn max_records(len: usize) -> usize {
    (len + 1032 * len) / 2 + 1
}

/// A fresh path in the temporary directory (process id and a counter: test binaries and
/// threads run at once).
pub fn tmp_path(what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "ingero-props-{what}-{}-{n}.pftrace",
        std::process::id()
    ))
}

/// A file that is removed when dropped.
pub struct TmpFile(pub PathBuf);

impl TmpFile {
    pub fn new(what: &str, bytes: &[u8]) -> TmpFile {
        let path = tmp_path(what);
        std::fs::write(&path, bytes).expect("writing the test file");
        TmpFile(path)
    }
}

impl Drop for TmpFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `f` on a thread of its own and waits at most `limit` for it: a reader that loops
/// fails the test instead of stalling CI. A panic in `f` is raised again here, so proptest
/// sees it as a failing case and shrinks it.
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        // The receiver is gone only if the watchdog already gave up.
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            // It has sent, so it ends at once.
            let _ = worker.join();
            v
        }
        // The sender was dropped without sending: `f` panicked.
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("the reading thread ended without a result"),
        },
        // The thread is left running: the test process ends with it.
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("reading did not finish within {limit:?}"),
    }
}

/// Everything one reading of a file says.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub records: Vec<ReadRecord>,
    /// The error that ended the reading, as text (the reader's error type is not part of the
    /// contract tested here).
    pub error: Option<String>,
    pub damage: Vec<Damage>,
    pub containers_lost: u64,
    pub packets_skipped: u64,
    pub packets: u64,
    pub truncated: bool,
}

/// The proptest configuration of the reader's and the encoder's properties: `cases` cases,
/// failures not persisted (an integration test has no `lib.rs` to keep them next to: a
/// failure prints its minimal input instead), and at most a minute of shrinking, so that a
/// hang the watchdog reports does not keep CI busy shrinking for hours.
pub fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_time: 60_000,
        ..ProptestConfig::default()
    }
}

/// Reads `path` (of `len` bytes) with the iterator, inflating in the reading thread or on
/// the helper. Stops with a panic past [`max_records`]: a reader yielding without end would
/// otherwise fill the memory before the watchdog fires.
pub fn read_iter(path: &Path, len: usize, ahead: bool) -> Reading {
    let mut reader =
        TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()).inflate_ahead(ahead);
    let mut records = Vec::new();
    let mut error = None;
    for r in reader.by_ref() {
        match r {
            Ok(r) => {
                assert!(
                    records.len() < max_records(len),
                    "more records than {len} bytes can hold"
                );
                records.push(r);
            }
            Err(e) => {
                error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    if error.is_some() {
        // An error ends the stream: a reader that went on could loop on it.
        assert!(reader.next().is_none(), "the reader went on after an error");
    }
    Reading {
        records,
        error,
        damage: reader.damage().to_vec(),
        containers_lost: reader.containers_lost(),
        packets_skipped: reader.packets_skipped(),
        packets: reader.packets(),
        truncated: !reader.truncated_files().is_empty(),
    }
}

/// Reads `path` (of `len` bytes) with [`TraceReader::for_each_record`] (its own hot loop,
/// which decodes a slice's begin and end as one): the records, and the error as text. Keeps
/// no more than [`max_records`] + 1 records, so that one past the bound fails the comparison
/// with the iterator and a reader yielding without end only spins until the watchdog fires.
pub fn read_each(path: &Path, len: usize, ahead: bool) -> (Vec<ReadRecord>, Option<String>) {
    let mut reader =
        TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()).inflate_ahead(ahead);
    let mut records = Vec::new();
    let most = max_records(len);
    let res = reader.for_each_record(|r| {
        if records.len() <= most {
            records.push(r.clone());
        }
    });
    (records, res.err().map(|e| format!("{e:#}")))
}

/// Reads `bytes` as a file every way the reader offers, under the [`WATCHDOG`], and checks
/// what must hold whatever the bytes: the helper thread changes nothing (records, error,
/// damage, counts), `for_each_record` yields what the iterator yields, and the record count
/// stays within [`max_records`]. Returns the reading.
pub fn read_every_way(what: &str, bytes: &[u8]) -> Reading {
    let len = bytes.len();
    let file = TmpFile::new(what, bytes);
    let path = file.0.clone();
    let (alone, ahead, each_alone, each_ahead) = within(WATCHDOG, move || {
        (
            read_iter(&path, len, false),
            read_iter(&path, len, true),
            read_each(&path, len, false),
            read_each(&path, len, true),
        )
    });
    drop(file);
    assert!(
        alone.records.len() <= max_records(len),
        "{} records from {len} bytes",
        alone.records.len()
    );
    assert_same(&ahead, &alone, "with the helper thread");
    for (each, how) in [(each_alone, "alone"), (each_ahead, "with the helper")] {
        assert_same_records(&each.0, &alone.records, &format!("for_each_record {how}"));
        assert_eq!(each.1, alone.error, "for_each_record {how}: the error");
    }
    alone
}

/// Equal readings, naming the first record that differs (the lists are long).
pub fn assert_same(got: &Reading, want: &Reading, how: &str) {
    assert_same_records(&got.records, &want.records, how);
    assert_eq!(got.error, want.error, "{how}: the error");
    assert_eq!(got.damage, want.damage, "{how}: the damage");
    assert_eq!(
        (
            got.containers_lost,
            got.packets_skipped,
            got.packets,
            got.truncated
        ),
        (
            want.containers_lost,
            want.packets_skipped,
            want.packets,
            want.truncated
        ),
        "{how}: containers lost, packets skipped, packets, truncated"
    );
}

pub fn assert_same_records(got: &[ReadRecord], want: &[ReadRecord], how: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!("{how}: record {i}: got {:?}, want {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{how}: record count");
}

// ---------------------------------------------------------------------------------------------
// Recordings.

/// A generated workload and how the writer is set up to write it.
#[derive(Clone, Debug)]
pub struct Workload {
    pub records: Vec<TimelineRecord>,
    /// 0: plain packets; 1: ingero's packet-structured deflate in `compressed_packets`.
    pub level: u32,
    /// The writer is flushed after every this many records, so that chunks stay small and a
    /// file holds many containers (the writer's own limit, 256 KiB, is never reached here).
    pub flush_every: usize,
    /// `RecorderConfig::restart_bytes`: small, so the sequences start afresh often.
    pub restart_bytes: u64,
}

impl Workload {
    /// CUDA calls written (each must come back as one `Cuda` record).
    pub fn cuda_calls(&self) -> usize {
        self.records
            .iter()
            .filter(|r| matches!(r, TimelineRecord::Event(Event::Cuda(_))))
            .count()
    }
}

/// Threads of the generated extra records: one process, a second one, odd names.
fn tasks() -> [Task; 4] {
    let p = synth::SCENARIO_PID + 7;
    [
        synth::task(p, p, "python3"),
        synth::task(p, p + 1, "pt_data_worker_longer_than_comm"),
        synth::task(p, p + 2, ""),
        synth::task(p + 50, p + 50, "nccl \u{e9}t\u{e9}"),
    ]
}

/// A CUDA call with arguments of the kind its op takes.
fn cuda_call() -> impl Strategy<Value = (CudaOp, CudaArgs)> {
    let size = prop_oneof![Just(0u64), 1u64..1 << 20, any::<u64>()];
    let ptr = prop_oneof![Just(0u64), any::<u64>()];
    prop_oneof![
        (
            any::<u64>(),
            0u32..5000,
            1u32..1024,
            size.clone(),
            ptr.clone()
        )
            .prop_map(|(func, g, b, smem, stream)| (
                CudaOp::LaunchKernel,
                CudaArgs::Launch {
                    func,
                    grid: [g, 1, 2],
                    block: [b, 1, 1],
                    shared_mem: smem,
                    stream,
                }
            )),
        (size.clone(), prop::option::of(ptr.clone())).prop_map(|(size, ptr)| (
            CudaOp::Malloc,
            CudaArgs::Alloc {
                size,
                ptr,
                stream: None,
            }
        )),
        (ptr.clone(), prop::option::of(size.clone())).prop_map(|(ptr, size)| (
            CudaOp::Free,
            CudaArgs::Free {
                ptr,
                size,
                stream: None,
            }
        )),
        (
            size.clone(),
            0u64..6,
            prop::option::of(ptr.clone()),
            prop::option::of(ptr.clone())
        )
            .prop_map(|(count, kind, stream, host_ptr)| (
                CudaOp::MemcpyAsync,
                CudaArgs::Memcpy {
                    count,
                    kind: MemcpyKind::from_raw(kind),
                    stream,
                    width_height: None,
                    host_ptr,
                }
            )),
        (ptr.clone(), size, any::<u32>()).prop_map(|(ptr, size, flags)| (
            CudaOp::HostRegister,
            CudaArgs::HostRegister { ptr, size, flags }
        )),
        prop::option::of(ptr).prop_map(|stream| (
            CudaOp::StreamSynchronize,
            CudaArgs::Sync {
                stream,
                event: None,
            }
        )),
    ]
}

/// One extra record at `ts`: a CUDA call (failing now and then), an off-CPU interval or an
/// annotation (instant or span, scoped or trace-wide).
fn extra_record(ts: u64) -> impl Strategy<Value = TimelineRecord> {
    let task = prop::sample::select(tasks().to_vec());
    let dur = prop_oneof![Just(0u64), 1u64..10_000, 10_000u64..50_000_000];
    let label = (
        prop::sample::select(vec!["step", "request_id", "phase", "k\u{e9}y"]),
        prop_oneof![Just(String::new()), "[a-z0-9]{1,12}"],
    )
        .prop_map(|(k, v)| (k.to_owned(), v));
    prop_oneof![
        5 => (task.clone(), dur.clone(), cuda_call(), prop_oneof![Just(0i32), any::<i32>()])
            .prop_map(move |(t, d, (op, args), ret)| synth::cuda(t, ts, d, op, ret, args)),
        2 => (task.clone(), dur.clone(), any::<bool>(), any::<u32>(), any::<i64>()).prop_map(
            move |(t, d, preempted, next_tid, prev_state)| {
                TimelineRecord::Event(Event::OffCpu(OffCpu {
                    ts_ns: ts,
                    duration_ns: d,
                    task: t,
                    reason: if preempted { OffCpuReason::Preempted } else { OffCpuReason::Blocked },
                    prev_state,
                    next_tid,
                    next_comm: Comm::from_str_lossy("kworker/u8:2"),
                }))
            }
        ),
        2 => (
            prop::collection::vec(label, 1..3),
            prop::option::of(dur),
            any::<bool>(),
        )
            .prop_map(move |(labels, span, scoped)| {
                TimelineRecord::Annotation(AnnotationRecord {
                    labels,
                    scope: scoped.then_some(Scope {
                        pid: synth::SCENARIO_PID + 7,
                        start_time: 99,
                    }),
                    ts_ns: ts,
                    end_ns: span.map(|d| ts + d),
                    provenance_uid: 1000,
                    provenance_pid: Some(4242),
                    provenance_gid: 1000,
                    received_ns: ts + 500,
                    realtime_ns: ts + 1_700_000_000_000_000_000,
                    end_realtime_ns: span.map(|d| ts + d + 1_700_000_000_000_000_000),
                    stamped_by_agent: span.is_none() && scoped,
                })
            }),
    ]
}

/// A workload: optionally the fixed scenario, then launch-dominated calls (optionally with
/// step and request labels), with extra records of every kind mixed in at generated times
/// (some earlier than records already written: the writer's late sequence), written at
/// level 0 or 1 with small chunks and frequent restarts.
pub fn workload() -> impl Strategy<Value = Workload> {
    let extras = prop::collection::vec(
        (0u64..40_000_000).prop_flat_map(|dt| extra_record(T0 + dt)),
        0..24,
    );
    (
        any::<bool>(),
        prop_oneof![1 => 0u64..200, 4 => 200u64..3_000],
        any::<bool>(),
        extras,
        prop::collection::vec(any::<Index>(), 24),
        prop_oneof![Just(0u32), Just(1u32)],
        10usize..200,
        1_024u64..32_768,
    )
        .prop_map(
            |(scenario, launches, labelled, extras, at, level, flush_every, restart_bytes)| {
                let mut records = if scenario {
                    synth::scenario()
                } else {
                    Vec::new()
                };
                let calls = synth::launches(launches, T0 + 30_000_000);
                if labelled {
                    records.extend(synth::labelled(calls));
                } else {
                    records.extend(calls);
                }
                for (r, i) in extras.into_iter().zip(at) {
                    let i = i.index(records.len() + 1);
                    records.insert(i, r);
                }
                Workload {
                    records,
                    level,
                    flush_every,
                    restart_bytes,
                }
            },
        )
}

/// Writes `w` through the real [`Recorder`] and returns the file's bytes.
pub fn write_recording(w: &Workload) -> Vec<u8> {
    let path = tmp_path("written");
    let cfg = RecorderConfig {
        path: Some(path.clone()),
        machine_id: Some(77),
        max_file_size: u64::MAX,
        compression_level: w.level,
        restart_bytes: w.restart_bytes,
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false).expect("creating the recorder");
    for (i, r) in w.records.iter().enumerate() {
        rec.write(r).expect("writing a record");
        if (i + 1) % w.flush_every == 0 {
            rec.flush().expect("flushing");
        }
    }
    let files = rec.finish(&FinalStats::default()).expect("finishing");
    assert_eq!(files, vec![path.clone()], "one file, no rotation");
    let bytes = std::fs::read(&path).expect("reading the recording back");
    let _ = std::fs::remove_file(&path);
    bytes
}

/// The end offset of each top-level packet of a well-formed file, framed here independently
/// of the reader (tag `0x0A`, varint length, payload).
pub fn packet_ends(file: &[u8]) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < file.len() {
        assert_eq!(file[at], 0x0A, "a packet tag at {at}");
        let mut len = 0usize;
        let mut i = at + 1;
        for shift in (0..64).step_by(7) {
            let b = *file.get(i).expect("a whole length varint");
            i += 1;
            len |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
        }
        let end = i + len;
        assert!(end <= file.len(), "the packet at {at} runs past the end");
        out.push((end, i..end));
        at = end;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Damage.

/// One way a stored file gets damaged.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// One bit flipped.
    Flip { at: Index, bit: u8 },
    /// Bytes inserted.
    Insert { at: Index, bytes: Vec<u8> },
    /// Bytes removed (from a few to whole packets).
    Delete { at: Index, len: usize },
    /// A region written again: a copy of `len` bytes from `from` inserted at `to`.
    Duplicate { from: Index, len: usize, to: Index },
    /// The file cut short (an agent killed mid-write, a full disk).
    Truncate { at: Index },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (any::<Index>(), prop_oneof![1usize..8, 8usize..4_096])
            .prop_map(|(at, len)| Mutation::Delete { at, len }),
        2 => (any::<Index>(), prop_oneof![1usize..64, 64usize..8_192], any::<Index>())
            .prop_map(|(from, len, to)| Mutation::Duplicate { from, len, to }),
        1 => any::<Index>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

impl Mutation {
    /// Applies the mutation to `file`; returns the offset of the first byte that may differ
    /// from before (every byte before it is untouched).
    pub fn apply(&self, file: &mut Vec<u8>) -> usize {
        let len = file.len();
        match self {
            Mutation::Flip { at, bit } => {
                if len == 0 {
                    return 0;
                }
                let at = at.index(len);
                file[at] ^= 1 << bit;
                at
            }
            Mutation::Insert { at, bytes } => {
                let at = at.index(len + 1);
                file.splice(at..at, bytes.iter().copied());
                at
            }
            Mutation::Delete { at, len: n } => {
                let at = at.index(len + 1);
                let end = (at + n).min(len);
                file.drain(at..end);
                at
            }
            Mutation::Duplicate { from, len: n, to } => {
                let from = from.index(len + 1);
                let end = (from + n).min(len);
                let to = to.index(len + 1);
                let copy = file[from..end].to_vec();
                file.splice(to..to, copy);
                to
            }
            Mutation::Truncate { at } => {
                let at = at.index(len + 1);
                file.truncate(at);
                at
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Packet-shaped noise.

/// A protobuf field of a generated packet.
#[derive(Clone, Debug)]
pub enum Field {
    Varint(u32, u64),
    Fixed64(u32, u64),
    Fixed32(u32, u32),
    Bytes(u32, Vec<u8>),
    Message(u32, Vec<Field>),
}

/// Field numbers the reader gives a meaning to somewhere (`TracePacket`, its interned data,
/// descriptors, track events, debug annotations, clock snapshots), and one it does not.
const FIELD_NUMBERS: &[u32] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 23, 29, 30, 41, 50, 58, 59, 60, 87, 98, 1000,
];

/// Varints the reader must survive: small ones (iids, types, flags), ones just below and above
/// the decoder's dense-table limit (2^20), and anything.
fn varint_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..16,
        1 => prop::sample::select(vec![
            (1u64 << 20) - 1,
            (1 << 20) - 2,
            1 << 19,
            1 << 20,
            u64::from(u32::MAX),
            u64::MAX,
            64,
            3,
        ]),
        2 => any::<u64>(),
    ]
}

pub fn field() -> impl Strategy<Value = Field> {
    let num = prop::sample::select(FIELD_NUMBERS);
    let leaf = prop_oneof![
        4 => (num.clone(), varint_value()).prop_map(|(n, v)| Field::Varint(n, v)),
        1 => (num.clone(), any::<u64>()).prop_map(|(n, v)| Field::Fixed64(n, v)),
        1 => (num.clone(), any::<u32>()).prop_map(|(n, v)| Field::Fixed32(n, v)),
        2 => (num.clone(), prop_oneof![
            "[a-zA-Z_.=0-9]{0,20}".prop_map(String::into_bytes),
            prop::collection::vec(any::<u8>(), 0..24),
        ])
            .prop_map(|(n, b)| Field::Bytes(n, b)),
    ];
    leaf.prop_recursive(3, 48, 6, move |inner| {
        prop_oneof![
            2 => inner.clone(),
            3 => (num.clone(), prop::collection::vec(inner, 0..6))
                .prop_map(|(n, f)| Field::Message(n, f)),
        ]
    })
}

pub fn encode_fields(fields: &[Field], out: &mut Vec<u8>) {
    for f in fields {
        match f {
            Field::Varint(n, v) => {
                varint::put(out, u64::from(*n) << 3);
                varint::put(out, *v);
            }
            Field::Fixed64(n, v) => {
                varint::put(out, u64::from(*n) << 3 | 1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Field::Fixed32(n, v) => {
                varint::put(out, u64::from(*n) << 3 | 5);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Field::Bytes(n, b) => {
                varint::put(out, u64::from(*n) << 3 | 2);
                varint::put(out, b.len() as u64);
                out.extend_from_slice(b);
            }
            Field::Message(n, m) => {
                let mut inner = Vec::new();
                encode_fields(m, &mut inner);
                varint::put(out, u64::from(*n) << 3 | 2);
                varint::put(out, inner.len() as u64);
                out.extend_from_slice(&inner);
            }
        }
    }
}

/// One top-level item of a noise file.
#[derive(Clone, Debug)]
pub enum Frame {
    /// A packet of generated fields.
    Packet(Vec<Field>),
    /// A `compressed_packets` container (zlib, from libdeflate) of generated packets, their
    /// bytes possibly cut short and followed by junk before compressing (a valid stream of a
    /// malformed inside), and the stream possibly damaged at one byte.
    Container {
        packets: Vec<Vec<Field>>,
        cut: Option<Index>,
        junk: Vec<u8>,
        damage: Option<(Index, u8)>,
    },
    /// A top-level field other than a packet: length-delimited ones are skipped, others are
    /// errors.
    Other(Field),
    /// A frame whose length claims more (or less) than follows: the hostile length field.
    Lying { tag: u8, claim: u64, bytes: Vec<u8> },
    /// Bytes that are not a frame.
    Raw(Vec<u8>),
}

fn packet() -> impl Strategy<Value = Vec<Field>> {
    prop::collection::vec(field(), 0..6)
}

pub fn frame() -> impl Strategy<Value = Frame> {
    let claim = prop_oneof![
        0u64..256,
        (1u64 << 20)..(1 << 27),
        Just(4u64 << 30),
        Just((64 << 20) - 1),
        // Lengths that overflow an offset they are added to.
        u64::MAX - 16..=u64::MAX,
        any::<u64>(),
    ];
    prop_oneof![
        6 => packet().prop_map(Frame::Packet),
        2 => (
            prop::collection::vec(packet(), 0..6),
            prop::option::weighted(0.3, any::<Index>()),
            prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(any::<u8>(), 1..8)],
            prop::option::weighted(0.3, (any::<Index>(), 1u8..=255)),
        )
            .prop_map(|(packets, cut, junk, damage)| Frame::Container {
                packets,
                cut,
                junk,
                damage,
            }),
        1 => (
            prop_oneof![Just(0x0Au8), any::<u8>()],
            claim,
            prop::collection::vec(any::<u8>(), 0..16),
        )
            .prop_map(|(tag, claim, bytes)| Frame::Lying { tag, claim, bytes }),
        1 => field().prop_map(Frame::Other),
        1 => prop::collection::vec(any::<u8>(), 0..8).prop_map(Frame::Raw),
    ]
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::fastest());
    let mut out = vec![0; c.zlib_compress_bound(data.len())];
    let n = c.zlib_compress(data, &mut out).expect("compressing");
    out.truncate(n);
    out
}

/// Frames `packet` as a `Trace.packet` entry.
pub fn framed(out: &mut Vec<u8>, packet: &[u8]) {
    out.push(FRAME);
    varint::put(out, packet.len() as u64);
    out.extend_from_slice(packet);
}

/// The bytes of a noise file.
pub fn noise_file(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        match f {
            Frame::Packet(fields) => {
                let mut p = Vec::new();
                encode_fields(fields, &mut p);
                framed(&mut out, &p);
            }
            Frame::Container {
                packets,
                cut,
                junk,
                damage,
            } => {
                let mut inner = Vec::new();
                for fields in packets {
                    let mut p = Vec::new();
                    encode_fields(fields, &mut p);
                    framed(&mut inner, &p);
                }
                if let Some(at) = cut {
                    inner.truncate(at.index(inner.len() + 1));
                }
                inner.extend_from_slice(junk);
                let mut z = zlib(&inner);
                if let Some((at, x)) = damage {
                    let i = at.index(z.len());
                    z[i] ^= x;
                }
                let mut p = COMPRESSED_PACKETS.to_vec();
                varint::put(&mut p, z.len() as u64);
                p.extend_from_slice(&z);
                framed(&mut out, &p);
            }
            Frame::Lying { tag, claim, bytes } => {
                out.push(*tag);
                varint::put(&mut out, *claim);
                out.extend_from_slice(bytes);
            }
            Frame::Other(field) => encode_fields(std::slice::from_ref(field), &mut out),
            Frame::Raw(bytes) => out.extend_from_slice(bytes),
        }
    }
    out
}

pub fn noise() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(frame(), 0..24).prop_map(|f| noise_file(&f))
}
