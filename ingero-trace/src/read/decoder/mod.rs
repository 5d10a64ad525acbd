//! Turns the packets of one file into [`ReadRecord`]s: keeps each sequence's interning tables
//! and clock, the track tree from the descriptors, and the open slices per track.
//!
//! Packets are read with the hand-written scanner in `scan.rs`, not prost: a CUDA call is two
//! packets (begin, end) and building owned prost structs for them dominated the reader's time.
//! Interned entries are resolved once, when they are declared (event name → CUDA op, argument
//! key → a fixed slot, string value → pointer, dimensions or memcpy kind), so the hot path is
//! table indexing. A slice begin whose arguments are all interned and known (every CUDA call
//! and off-CPU interval ingero writes) is kept as a fixed array of slots until its end; anything
//! else (annotations, session, inline strings past the writer's interning cap, foreign traces)
//! takes the general path, which resolves arguments by name.

mod fast;
mod memo;
mod slices;

use std::sync::Arc;

use anyhow::{Context, Result};
use ingero_ebpf::{CudaOp, OffCpuReason};

use self::slices::Track;
use super::scan::{self, Cur, Wire, text};
use crate::model::{AnnotationRecord, Scope};
use crate::model::{
    CounterKind, CounterSample, LifecycleRecord, ReadRecord, SessionRecord, ThreadRef,
};
use crate::model::{CudaArgs, MemcpyKind, ProcessOp};
use crate::model::{FinalStats, SessionInfo};
use crate::proto::{
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE, clock_id, event_type,
};
use crate::vocab::{self, LaunchConfig, arg, session, stats};
use crate::write::{FastMap, memcpy_kind_text};

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
            Val::S(s) => parse_num(s),
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

/// A string argument as a number: `0x…` hexadecimal (pointers) or decimal.
fn parse_num(s: &str) -> Option<u64> {
    s.strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .or_else(|| s.parse().ok())
}

/// Interning ids at or above this go to a hash map instead of a dense vector, so a corrupt or
/// foreign iid cannot make the reader allocate a huge table.
const MAX_DENSE_IID: u64 = 1 << 20;

/// An iid-indexed table: dense for the small sequential ids ingero writes. The dense part
/// grows to an iid only while it stays about half full (the iid is below twice the entries,
/// plus a few), so a corrupt or foreign iid costs one entry in the map, not a table up to it.
/// An iid below `dense.len()` lives in `dense`, any other in `sparse`.
struct IidTable<T> {
    dense: Vec<Option<T>>,
    sparse: FastMap<u64, T>,
    /// Entries in both.
    len: usize,
}

impl<T> Default for IidTable<T> {
    fn default() -> Self {
        IidTable {
            dense: Vec::new(),
            sparse: FastMap::default(),
            len: 0,
        }
    }
}

impl<T> IidTable<T> {
    #[inline(always)]
    fn get_mut(&mut self, iid: u64) -> Option<&mut T> {
        if iid < self.dense.len() as u64 {
            self.dense[iid as usize].as_mut()
        } else {
            self.sparse.get_mut(&iid)
        }
    }

    #[inline(always)]
    fn get(&self, iid: u64) -> Option<&T> {
        if iid < self.dense.len() as u64 {
            self.dense[iid as usize].as_ref()
        } else {
            self.sparse.get(&iid)
        }
    }

    /// `iid`'s slot in `dense`, grown to it if the table of `len` entries stays about half
    /// full; `None` when `iid` belongs in `sparse`.
    fn dense_slot<'a>(
        dense: &'a mut Vec<Option<T>>,
        sparse: &mut FastMap<u64, T>,
        len: usize,
        iid: u64,
    ) -> Option<&'a mut Option<T>> {
        let had = dense.len() as u64;
        if iid >= had {
            if iid >= MAX_DENSE_IID || iid >= 2 * len as u64 + 16 {
                return None;
            }
            dense.resize_with(iid as usize + 1, || None);
            // What the map held in the new range moves in: one home per iid.
            if !sparse.is_empty() {
                for i in had..=iid {
                    if let Some(v) = sparse.remove(&i) {
                        dense[i as usize] = Some(v);
                    }
                }
            }
        }
        dense.get_mut(iid as usize)
    }

    fn insert(&mut self, iid: u64, v: T) {
        let old = match Self::dense_slot(&mut self.dense, &mut self.sparse, self.len, iid) {
            Some(slot) => slot.replace(v),
            None => self.sparse.insert(iid, v),
        };
        self.len += usize::from(old.is_none());
    }

    fn clear(&mut self) {
        self.dense.clear();
        self.sparse.clear();
        self.len = 0;
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let dense = self.dense.iter_mut().filter_map(Option::as_mut);
        dense.chain(self.sparse.values_mut())
    }
}

impl<T: Default> IidTable<T> {
    #[inline]
    fn get_or_default(&mut self, iid: u64) -> &mut T {
        let IidTable { dense, sparse, len } = self;
        match Self::dense_slot(dense, sparse, *len, iid) {
            Some(slot) => {
                *len += usize::from(slot.is_none());
                slot.get_or_insert_with(T::default)
            }
            None => sparse.entry(iid).or_insert_with(|| {
                *len += 1;
                T::default()
            }),
        }
    }
}

/// What an event name means to the reader, decided when the name is interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameKind {
    Op(CudaOp),
    OffCpu(OffCpuReason),
    Other,
}

struct NameEntry {
    text: Arc<str>,
    kind: NameKind,
}

/// Argument keys of CUDA calls and off-CPU intervals: the fast path's fixed slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum K {
    Ret,
    Size,
    Ptr,
    Stream,
    Func,
    Grid,
    Block,
    SharedMem,
    GraphExec,
    Count,
    Kind,
    Width,
    Height,
    DstDevice,
    SrcDevice,
    Event,
    ClampedFromNs,
    NextTid,
    NextComm,
    PrevState,
    Cpu,
    Error,
    Launch,
}

const NK: usize = 23;

const KEYS: [(K, &str); NK] = [
    (K::Ret, arg::RET),
    (K::Size, arg::SIZE),
    (K::Ptr, arg::PTR),
    (K::Stream, arg::STREAM),
    (K::Func, arg::FUNC),
    (K::Grid, arg::GRID),
    (K::Block, arg::BLOCK),
    (K::SharedMem, arg::SHARED_MEM),
    (K::GraphExec, arg::GRAPH_EXEC),
    (K::Count, arg::COUNT),
    (K::Kind, arg::KIND),
    (K::Width, arg::WIDTH),
    (K::Height, arg::HEIGHT),
    (K::DstDevice, arg::DST_DEVICE),
    (K::SrcDevice, arg::SRC_DEVICE),
    (K::Event, arg::EVENT),
    (K::ClampedFromNs, arg::CLAMPED_FROM_NS),
    (K::NextTid, arg::NEXT_TID),
    (K::NextComm, arg::NEXT_COMM),
    (K::PrevState, arg::PREV_STATE),
    (K::Cpu, arg::CPU),
    (K::Error, arg::ERROR),
    (K::Launch, arg::LAUNCH),
];

impl K {
    fn text(self) -> &'static str {
        KEYS[self as usize].1
    }
}

struct KeyEntry {
    text: Arc<str>,
    slot: Option<K>,
}

/// An interned string value with its readings, computed once.
struct StrEntry {
    text: Arc<str>,
    num: Option<u64>,
    dim: Option<[u32; 3]>,
    kind: MemcpyKind,
    launch: Option<LaunchConfig>,
    /// Where `launch` is in the decoder's launch table (open launches refer to it).
    launch_idx: Option<u32>,
}

impl StrEntry {
    fn new(text: Arc<str>, launches: &mut Vec<LaunchConfig>) -> StrEntry {
        let launch = vocab::parse_launch(&text);
        let launch_idx = launch.and_then(|l| {
            let idx = u32::try_from(launches.len()).ok()?;
            launches.push(l);
            Some(idx)
        });
        StrEntry {
            num: parse_num(&text),
            dim: vocab::parse_dim3(&text),
            kind: memcpy_kind(&text),
            launch,
            launch_idx,
            text,
        }
    }
}

#[derive(Default)]
struct SeqState {
    names: IidTable<NameEntry>,
    debug_names: IidTable<KeyEntry>,
    strings: IidTable<StrEntry>,
    /// Clock 64's current value (0 until a snapshot or a delta sets it).
    clock64: u64,
    /// Whether the defaults' clock is clock 64 (timestamps without their own clock are
    /// deltas): kept as a flag because every hot packet asks.
    incremental: bool,
    /// The sequence has packets inside `compressed_packets` containers.
    in_bundles: bool,
    /// A container was lost since the sequence's incremental state was last cleared: its
    /// interned names and clock can no longer be trusted, so packets that need them are
    /// skipped until a packet clears that state (as trace_processor does after data loss).
    lost: bool,
}

impl SeqState {
    /// A packet's time: its `timestamp` on its clock (the incremental clock 64 moves).
    #[inline(always)]
    fn advance(&mut self, timestamp: Option<u64>, clock: Option<u32>) -> u64 {
        let Some(t) = timestamp else {
            return self.clock64;
        };
        let incremental = match clock {
            None => self.incremental,
            Some(c) => c == clock_id::INCREMENTAL_MONOTONIC,
        };
        if incremental {
            self.clock64 = self.clock64.saturating_add(t);
            self.clock64
        } else {
            t
        }
    }

    /// The defaults' clock (`timestamp_clock_id`), `None` when they name none.
    fn set_default_clock(&mut self, clock: Option<u32>) {
        self.incremental = clock == Some(clock_id::INCREMENTAL_MONOTONIC);
    }

    fn reset(&mut self) {
        self.names.clear();
        self.debug_names.clear();
        self.strings.clear();
        self.clock64 = 0;
        self.set_default_clock(None);
        self.lost = false;
    }
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

/// A slice's interned arguments by known key, with how to read each value: the scratch the
/// interned paths fill before resolving a slice at its begin.
#[derive(Clone, Copy)]
struct Slots {
    present: u32,
    /// The value is an `int_value` (read as signed).
    signed: u32,
    /// The value is a string iid on the slice's sequence.
    string: u32,
    v: [u64; NK],
}

/// How a value is stored in [`Slots`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotVal {
    Unsigned,
    Signed,
    StrIid,
}

impl Default for Slots {
    fn default() -> Self {
        Slots::EMPTY
    }
}

impl Slots {
    const EMPTY: Slots = Slots {
        present: 0,
        signed: 0,
        string: 0,
        v: [0; NK],
    };

    /// Forgets every value (values are read only under their `present` bit).
    #[inline(always)]
    fn clear(&mut self) {
        self.present = 0;
        self.signed = 0;
        self.string = 0;
    }

    /// Stores a value; the first occurrence of a key wins, as on the general path.
    #[inline(always)]
    fn put(&mut self, k: K, v: u64, how: SlotVal) {
        let bit = 1u32 << k as u32;
        if self.present & bit != 0 {
            return;
        }
        self.present |= bit;
        match how {
            SlotVal::Unsigned => {}
            SlotVal::Signed => self.signed |= bit,
            SlotVal::StrIid => self.string |= bit,
        }
        self.v[k as usize] = v;
    }
}

/// Reads a slice's interned arguments, resolving strings in its sequence's table.
struct SlotArgs<'a> {
    s: &'a Slots,
    strings: &'a IidTable<StrEntry>,
}

impl SlotArgs<'_> {
    #[inline]
    fn str_entry(&self, k: K) -> Option<&StrEntry> {
        self.strings.get(self.s.v[k as usize])
    }
}

/// Argument lookups shared by the fast and the general path.
trait Args {
    fn u(&self, k: K) -> Option<u64>;
    fn i(&self, k: K) -> Option<i64>;
    fn dim(&self, k: K) -> Option<[u32; 3]>;
    fn kind(&self, k: K) -> MemcpyKind;
    fn text(&self, k: K) -> Option<&str>;
    fn launch(&self, k: K) -> Option<LaunchConfig>;
    fn arc(&self, k: K) -> Option<Arc<str>>;
}

impl Args for SlotArgs<'_> {
    #[inline]
    fn u(&self, k: K) -> Option<u64> {
        let bit = 1u32 << k as u32;
        if self.s.present & bit == 0 {
            return None;
        }
        let v = self.s.v[k as usize];
        if self.s.string & bit != 0 {
            self.str_entry(k).and_then(|e| e.num)
        } else if self.s.signed & bit != 0 {
            u64::try_from(v as i64).ok()
        } else {
            Some(v)
        }
    }
    #[inline]
    fn i(&self, k: K) -> Option<i64> {
        let bit = 1u32 << k as u32;
        if self.s.present & bit != 0 && self.s.signed & bit != 0 {
            return Some(self.s.v[k as usize] as i64);
        }
        self.u(k).and_then(|v| i64::try_from(v).ok())
    }
    #[inline]
    fn dim(&self, k: K) -> Option<[u32; 3]> {
        let bit = 1u32 << k as u32;
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).and_then(|e| e.dim)
    }
    #[inline]
    fn kind(&self, k: K) -> MemcpyKind {
        let bit = 1u32 << k as u32;
        if self.s.present & self.s.string & bit == 0 {
            return NO_KIND;
        }
        self.str_entry(k).map_or(NO_KIND, |e| e.kind)
    }
    fn text(&self, k: K) -> Option<&str> {
        let bit = 1u32 << k as u32;
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).map(|e| &*e.text)
    }
    #[inline]
    fn launch(&self, k: K) -> Option<LaunchConfig> {
        let bit = 1u32 << k as u32;
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).and_then(|e| e.launch)
    }
    fn arc(&self, k: K) -> Option<Arc<str>> {
        let bit = 1u32 << k as u32;
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).map(|e| e.text.clone())
    }
}

/// The general path's arguments: resolved names and values, first occurrence wins.
struct ListArgs<'a>(&'a [(Arc<str>, Val)]);

impl Args for ListArgs<'_> {
    fn u(&self, k: K) -> Option<u64> {
        u64_of(self.0, k.text())
    }
    fn i(&self, k: K) -> Option<i64> {
        find(self.0, k.text()).and_then(Val::as_i64)
    }
    fn dim(&self, k: K) -> Option<[u32; 3]> {
        find(self.0, k.text())
            .and_then(Val::as_str)
            .and_then(vocab::parse_dim3)
    }
    fn kind(&self, k: K) -> MemcpyKind {
        memcpy_kind(find(self.0, k.text()).and_then(Val::as_str).unwrap_or(""))
    }
    fn text(&self, k: K) -> Option<&str> {
        find(self.0, k.text()).and_then(Val::as_str)
    }
    fn launch(&self, k: K) -> Option<LaunchConfig> {
        self.text(k).and_then(vocab::parse_launch)
    }
    fn arc(&self, k: K) -> Option<Arc<str>> {
        match find(self.0, k.text()) {
            Some(Val::S(s)) => Some(s.clone()),
            _ => None,
        }
    }
}

/// What a slice begin resolves to on the interned paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Cuda(CudaOp),
    OffCpu(OffCpuReason),
}

impl Plan {
    /// The plan for a slice of `name` on `track`; `None` for the general path.
    #[inline]
    fn of(track: Option<&TrackKind>, name: Option<NameKind>) -> Option<Plan> {
        match (track?, name?) {
            (TrackKind::Thread(_), NameKind::Op(op)) => Some(Plan::Cuda(op)),
            (TrackKind::OffCpu(_), NameKind::OffCpu(reason)) => Some(Plan::OffCpu(reason)),
            // The general path reads any other name on an off-CPU track as blocked.
            (TrackKind::OffCpu(_), NameKind::Op(_)) => Some(Plan::OffCpu(OffCpuReason::Blocked)),
            _ => None,
        }
    }

    /// Resolves the slice's arguments now, so its end only adds the time and the thread.
    #[inline]
    fn prepare(self, a: &impl Args) -> OpenBody {
        match self {
            Plan::Cuda(op) => OpenBody::Cuda(CudaPrep::new(op, a)),
            Plan::OffCpu(reason) => OpenBody::OffCpu(OffPrep::new(reason, a)),
        }
    }
}

/// A CUDA call's fields but time and thread.
#[derive(Clone, Debug, PartialEq)]
struct CudaPrep {
    op: CudaOp,
    ret: i32,
    args: CudaArgs,
    clamped: Option<u64>,
}

impl CudaPrep {
    #[inline]
    fn new(op: CudaOp, a: &impl Args) -> CudaPrep {
        CudaPrep {
            op,
            ret: a.i(K::Ret).and_then(|v| i32::try_from(v).ok()).unwrap_or(0),
            args: cuda_args(op, a),
            clamped: a.u(K::ClampedFromNs),
        }
    }
}

/// An off-CPU interval's fields but time and thread.
#[derive(Clone, Debug, PartialEq)]
struct OffPrep {
    reason: OffCpuReason,
    prev_state: i64,
    next_tid: u32,
    cpu: u32,
    next_comm: Option<Arc<str>>,
}

impl OffPrep {
    fn new(reason: OffCpuReason, a: &impl Args) -> OffPrep {
        OffPrep {
            reason,
            prev_state: a.i(K::PrevState).unwrap_or(0),
            next_tid: a.u(K::NextTid).unwrap_or(0) as u32,
            cpu: a.u(K::Cpu).unwrap_or(0) as u32,
            next_comm: a.arc(K::NextComm),
        }
    }
}

enum OpenBody {
    /// A CUDA call on a thread track, resolved at its begin.
    Cuda(CudaPrep),
    /// An off-CPU interval on an off-CPU track, resolved at its begin.
    OffCpu(OffPrep),
    General {
        name: Arc<str>,
        args: Vec<(Arc<str>, Val)>,
    },
}

/// A debug annotation's value as found on the wire.
#[derive(Clone, Copy)]
enum RawVal<'a> {
    U(u64),
    I(i64),
    B(bool),
    StrIid(u64),
    Str(&'a [u8]),
}

struct RawArg<'a> {
    name_iid: Option<u64>,
    name: Option<&'a [u8]>,
    val: RawVal<'a>,
}

/// `DebugAnnotation` fields, with the writer's precedence when several values are set.
fn raw_arg(b: &[u8]) -> scan::Result<RawArg<'_>> {
    let mut c = Cur::new(b);
    let (mut name_iid, mut name) = (None, None);
    let (mut u, mut i, mut p, mut bo, mut siid, mut s) = (None, None, None, None, None, None);
    while let Some((f, w)) = c.field()? {
        match f {
            1 => name_iid = Some(w.int()),
            10 => name = Some(w.bytes()),
            2 => bo = Some(w.int() != 0),
            3 => u = Some(w.int()),
            4 => i = Some(w.int() as i64),
            7 => p = Some(w.int()),
            17 => siid = Some(w.int()),
            6 => s = Some(w.bytes()),
            _ => {}
        }
    }
    let val = if let Some(v) = u {
        RawVal::U(v)
    } else if let Some(v) = i {
        RawVal::I(v)
    } else if let Some(v) = p {
        RawVal::U(v)
    } else if let Some(v) = bo {
        RawVal::B(v)
    } else if let Some(v) = siid {
        RawVal::StrIid(v)
    } else {
        RawVal::Str(s.unwrap_or(&[]))
    };
    Ok(RawArg {
        name_iid,
        name,
        val,
    })
}

/// The `TrackEvent` fields the reader uses (debug annotations are re-scanned from `raw`).
#[derive(Default)]
struct Te<'a> {
    ty: u64,
    track: u64,
    name_iid: Option<u64>,
    name: Option<&'a [u8]>,
    counter_value: i64,
    raw: &'a [u8],
}

fn track_event(b: &[u8]) -> scan::Result<Te<'_>> {
    let mut te = Te {
        raw: b,
        ..Default::default()
    };
    let mut c = Cur::new(b);
    while let Some((f, w)) = c.field()? {
        match f {
            9 => te.ty = w.int(),
            11 => te.track = w.int(),
            10 => te.name_iid = Some(w.int()),
            23 => te.name = Some(w.bytes()),
            30 => te.counter_value = w.int() as i64,
            _ => {}
        }
    }
    Ok(te)
}

/// Calls `f` on each debug annotation of a track event.
fn for_each_arg<'a>(raw: &'a [u8], mut f: impl FnMut(RawArg<'a>) -> bool) -> scan::Result<()> {
    let mut c = Cur::new(raw);
    while let Some((num, w)) = c.field()? {
        if num == 4 {
            if let Wire::Len(b) = w {
                if !f(raw_arg(b)?) {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Placeholder for a record slot (allocates nothing).
pub fn empty_record() -> ReadRecord {
    ReadRecord::Counter(CounterSample {
        kind: CounterKind::Drops,
        ts_ns: 0,
        value: 0,
    })
}

/// What one packet did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step<'a> {
    /// Nothing to yield (state only, or a record of no interest).
    Nothing,
    /// A record was written into the slot.
    Record,
    /// A `compressed_packets` container: its zlib stream, to be expanded by the caller.
    Compressed(&'a [u8]),
}

impl Step<'_> {
    fn done(record: bool) -> Self {
        if record { Step::Record } else { Step::Nothing }
    }
}

/// The decoding state of one file (packets already expanded from their containers).
#[derive(Default)]
pub(super) struct Decoder {
    seqs: IidTable<SeqState>,
    tracks: IidTable<Track>,
    /// Every launch configuration interned in this file, never removed: open launches refer
    /// to it by index, so a sequence reset cannot pull it from under them.
    launches: Vec<LaunchConfig>,
    op_by_name: FastMap<&'static str, CudaOp>,
    scratch: Slots,
    /// Which paths may decode a packet (tests compare them).
    paths: Paths,
    /// Packets decoded by the byte-layout match (tests check the writer's layout hits it;
    /// counted in test builds only).
    layout_hits: u64,
    /// What the fast path decided for the writer's repeated packets.
    memo: memo::Memo,
    /// Set by the caller while it feeds the packets of a `compressed_packets` bundle.
    pub(super) in_bundle: bool,
    /// Some sequence is [`SeqState::lost`]: the fast path leaves every packet it has not
    /// remembered to the scanner, which skips those of lost sequences.
    lost_seqs: bool,
    /// Packets skipped because their sequence was lost.
    pub(super) lost_packets: u64,
    pub(super) clocks: ClocksSeen,
}

/// What the clock snapshots of a file said so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClocksSeen {
    /// Min and max MONOTONIC value of the snapshots outside bundles.
    pub plain_bounds: Option<(u64, u64)>,
    /// REALTIME − MONOTONIC of the first snapshot with both, in file order.
    pub realtime_offset: Option<i128>,
}

impl ClocksSeen {
    /// Adds what a later file (or the rest of this one) saw.
    pub fn merge(&mut self, later: &ClocksSeen) {
        if let Some((lo, hi)) = later.plain_bounds {
            self.add_plain(lo);
            self.add_plain(hi);
        }
        self.realtime_offset = self.realtime_offset.or(later.realtime_offset);
    }

    fn add_plain(&mut self, mono: u64) {
        self.plain_bounds = Some(match self.plain_bounds {
            Some((lo, hi)) => (lo.min(mono), hi.max(mono)),
            None => (mono, mono),
        });
    }
}

/// The decoder's paths, fastest first; each falls back to the next on anything it does not
/// expect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Paths {
    /// The writer's exact packet layouts (`fast.rs`), then the scanner.
    #[default]
    All,
    /// The scanner, with interned arguments resolved through slots.
    Scanner,
    /// The scanner, every argument resolved by name.
    General,
}

fn find<'a>(args: &'a [(Arc<str>, Val)], key: &str) -> Option<&'a Val> {
    args.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
}

fn u64_of(args: &[(Arc<str>, Val)], key: &str) -> Option<u64> {
    find(args, key).and_then(Val::as_u64)
}

impl Decoder {
    /// What track `uuid`'s descriptor made it (`None`: not described).
    #[inline(always)]
    fn kind(&self, uuid: u64) -> Option<&TrackKind> {
        self.tracks.get(uuid).and_then(|t| t.kind.as_ref())
    }

    pub(super) fn new(paths: Paths) -> Decoder {
        Decoder {
            op_by_name: CudaOp::ALL.iter().map(|op| (op.name(), *op)).collect(),
            scratch: Slots::EMPTY,
            paths,
            ..Default::default()
        }
    }

    /// A container could not be read (a corrupt zlib stream or inner packet): the sequences
    /// that travel in containers lose their incremental state until a packet clears it, and
    /// the slices open on CUDA and off-CPU tracks are dropped, since their ends may have been
    /// in it. Label states and spans (outside containers) stay.
    pub(super) fn container_lost(&mut self) {
        self.memo.clear();
        for s in self.seqs.values_mut() {
            if s.in_bundles {
                s.lost = true;
                self.lost_seqs = true;
            }
        }
        for t in self.tracks.values_mut() {
            if matches!(t.kind, Some(TrackKind::Thread(_) | TrackKind::OffCpu(_))) {
                t.open.clear();
                t.bodies.clear();
                t.end_key = None;
            }
        }
    }

    /// Whether the fast path may decode packets it has not remembered (see `lost_seqs`).
    #[inline(always)]
    pub(super) fn all_seqs_whole(&self) -> bool {
        !self.lost_seqs
    }

    /// Packets the byte-layout match decoded so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn layout_hits(&self) -> u64 {
        self.layout_hits
    }

    /// The fast path alone, when enabled: `Some(true)` when `bytes` wrote a record into
    /// `slot`, `Some(false)` when it completed none, `None` (nothing changed) when it needs
    /// [`Self::packet`].
    #[inline(always)]
    pub(super) fn try_fast(&mut self, bytes: &[u8], slot: &mut ReadRecord) -> Option<bool> {
        if self.paths != Paths::All {
            return None;
        }
        self.fast(bytes, slot)
    }

    /// [`Self::try_fast`], calling `f` on the record the packet completes; `after` is what
    /// follows the packet in its container. `Some(n)`: it also took the `n` bytes after the
    /// packet (see [`Self::fast_each`]).
    #[inline(always)]
    pub(super) fn try_fast_each(
        &mut self,
        bytes: &[u8],
        after: &[u8],
        slot: &mut ReadRecord,
        f: &mut impl FnMut(&ReadRecord),
    ) -> Option<usize> {
        if self.paths != Paths::All {
            return None;
        }
        self.fast_each(bytes, after, slot, f)
    }

    /// Decodes one packet; if it completes a record (at most one per packet), writes it into
    /// `slot`, reusing the slot's allocations when it already holds a record of the same kind.
    /// `slot` is untouched otherwise.
    #[inline(always)]
    pub(super) fn packet<'a>(
        &mut self,
        bytes: &'a [u8],
        slot: &mut ReadRecord,
    ) -> Result<Step<'a>> {
        if self.paths == Paths::All {
            if let Some(done) = self.fast(bytes, slot) {
                return Ok(Step::done(done));
            }
        }
        self.packet_slow(bytes, slot)
    }

    #[inline(never)]
    fn packet_slow<'a>(&mut self, bytes: &'a [u8], slot: &mut ReadRecord) -> Result<Step<'a>> {
        // It may change the tables the memo's decisions were made on.
        self.memo.clear();
        self.packet_inner(bytes, slot).context("decoding a packet")
    }

    fn packet_inner<'a>(&mut self, bytes: &'a [u8], slot: &mut ReadRecord) -> Result<Step<'a>> {
        let mut c = Cur::new(bytes);
        let mut timestamp = None;
        let mut clock = None;
        let mut seq_id = 0u32;
        let mut flags = 0u64;
        let (mut interned, mut defaults, mut snapshot, mut desc, mut te) =
            (None, None, None, None, None);
        let mut compressed = None;
        while let Some((f, w)) = c.field()? {
            match f {
                8 => timestamp = Some(w.int()),
                58 => clock = Some(w.int() as u32),
                10 => seq_id = w.int() as u32,
                13 => flags = w.int(),
                12 => interned = Some(w.bytes()),
                59 => defaults = Some(w.bytes()),
                6 => snapshot = Some(w.bytes()),
                60 => desc = Some(w.bytes()),
                11 => te = Some(w.bytes()),
                50 => compressed = Some(w.bytes()),
                _ => {}
            }
        }
        // The container's other fields are ignored, as Perfetto does.
        if let Some(z) = compressed {
            return Ok(Step::Compressed(z));
        }
        let seq = self.seqs.get_or_default(u64::from(seq_id));
        seq.in_bundles |= self.in_bundle;
        if flags & u64::from(SEQ_INCREMENTAL_STATE_CLEARED) != 0 {
            seq.reset();
            if self.lost_seqs {
                self.lost_seqs = self.seqs.values_mut().any(|s| s.lost);
            }
        } else if seq.lost && flags & u64::from(SEQ_NEEDS_INCREMENTAL_STATE) != 0 {
            self.lost_packets += 1;
            return Ok(Step::Nothing);
        }
        let seq = self.seqs.get_or_default(u64::from(seq_id));
        if let Some(d) = defaults {
            let mut clock = None;
            let mut c = Cur::new(d);
            while let Some((f, w)) = c.field()? {
                if f == 58 {
                    clock = Some(w.int() as u32);
                }
            }
            seq.set_default_clock(clock);
        }
        if let Some(i) = interned {
            intern(seq, i, &self.op_by_name, &mut self.launches)?;
        }
        if let Some(cs) = snapshot {
            let (mut mono, mut real) = (None, None);
            let mut c = Cur::new(cs);
            while let Some((f, w)) = c.field()? {
                if f != 1 {
                    continue;
                }
                let (mut id, mut ts) = (None, None);
                let mut cc = Cur::new(w.bytes());
                while let Some((f, w)) = cc.field()? {
                    match f {
                        1 => id = Some(w.int() as u32),
                        2 => ts = Some(w.int()),
                        _ => {}
                    }
                }
                match id {
                    Some(clock_id::INCREMENTAL_MONOTONIC) => seq.clock64 = ts.unwrap_or(0),
                    Some(clock_id::MONOTONIC) => mono = ts,
                    Some(clock_id::REALTIME) => real = ts,
                    _ => {}
                }
            }
            if let Some(m) = mono {
                if !self.in_bundle {
                    self.clocks.add_plain(m);
                }
                if let (None, Some(r)) = (self.clocks.realtime_offset, real) {
                    self.clocks.realtime_offset = Some(i128::from(r) - i128::from(m));
                }
            }
            return Ok(Step::Nothing);
        }
        let ts = seq.advance(timestamp, clock);
        if let Some(d) = desc {
            self.describe(d)?;
            return Ok(Step::Nothing);
        }
        let Some(te) = te else {
            return Ok(Step::Nothing);
        };
        let te = track_event(te)?;
        match te.ty as i32 {
            event_type::SLICE_BEGIN => self.begin(seq_id, ts, &te)?,
            event_type::SLICE_END => {
                let Decoder {
                    tracks,
                    launches,
                    op_by_name,
                    ..
                } = self;
                let Some(tr) = tracks.get_mut(te.track) else {
                    return Ok(Step::Nothing);
                };
                return Ok(Step::done(tr.end_top(ts, launches, op_by_name, slot)));
            }
            event_type::INSTANT => {
                let seq = self.seqs.get_or_default(u64::from(seq_id));
                let name = event_name(seq, &te);
                let args = resolve_args(seq, te.raw)?;
                return Ok(Step::done(self.instant(te.track, ts, &name, &args, slot)));
            }
            event_type::COUNTER => {
                if let Some(TrackKind::Counter(kind)) = self.kind(te.track) {
                    *slot = ReadRecord::Counter(CounterSample {
                        kind: *kind,
                        ts_ns: ts,
                        value: te.counter_value,
                    });
                    return Ok(Step::Record);
                }
            }
            _ => {}
        }
        Ok(Step::Nothing)
    }

    /// A slice begins: kept open on its track until its end.
    fn begin(&mut self, seq_id: u32, ts: u64, te: &Te<'_>) -> Result<()> {
        let seq = self.seqs.get_or_default(u64::from(seq_id));
        let name = te.name_iid.and_then(|i| seq.names.get(i)).map(|n| n.kind);
        let plan = match self.paths {
            Paths::General => None,
            _ => Plan::of(
                self.tracks.get(te.track).and_then(|t| t.kind.as_ref()),
                name,
            ),
        };
        let mut body = None;
        if let Some(plan) = plan {
            let s = &mut self.scratch;
            s.clear();
            let mut ok = true;
            for_each_arg(te.raw, |a| {
                let slot = a
                    .name_iid
                    .and_then(|iid| seq.debug_names.get(iid))
                    .and_then(|k| k.slot);
                let Some(k) = slot else {
                    ok = false;
                    return false;
                };
                match a.val {
                    RawVal::U(v) => s.put(k, v, SlotVal::Unsigned),
                    RawVal::B(b) => s.put(k, u64::from(b), SlotVal::Unsigned),
                    RawVal::I(v) => s.put(k, v as u64, SlotVal::Signed),
                    RawVal::StrIid(iid) => s.put(k, iid, SlotVal::StrIid),
                    RawVal::Str(_) => {
                        ok = false;
                        return false;
                    }
                }
                true
            })?;
            if ok {
                body = Some(plan.prepare(&SlotArgs {
                    s,
                    strings: &seq.strings,
                }));
            }
        }
        let body = match body {
            Some(b) => b,
            None => OpenBody::General {
                name: event_name(seq, te),
                args: resolve_args(seq, te.raw)?,
            },
        };
        self.tracks.get_or_default(te.track).push(ts, body);
        Ok(())
    }

    fn describe(&mut self, b: &[u8]) -> Result<()> {
        let mut c = Cur::new(b);
        let (mut uuid, mut parent_uuid, mut name) = (0u64, None, String::new());
        let (mut process, mut thread, mut counter) = (None, None, false);
        while let Some((f, w)) = c.field()? {
            match f {
                1 => uuid = w.int(),
                5 => parent_uuid = Some(w.int()),
                2 => name = text(w.bytes()).into_owned(),
                3 => {
                    let mut pid = 0u32;
                    let mut c = Cur::new(w.bytes());
                    while let Some((f, w)) = c.field()? {
                        if f == 1 {
                            pid = w.int() as u32;
                        }
                    }
                    process = Some(pid);
                }
                4 => {
                    let mut t = ThreadRef {
                        pid: 0,
                        tid: 0,
                        name: "".into(),
                    };
                    let mut c = Cur::new(w.bytes());
                    while let Some((f, w)) = c.field()? {
                        match f {
                            1 => t.pid = w.int() as u32,
                            2 => t.tid = w.int() as u32,
                            5 => t.name = text(w.bytes()).into(),
                            _ => {}
                        }
                    }
                    thread = Some(t);
                }
                8 => counter = true,
                _ => {}
            }
        }
        let parent = parent_uuid.and_then(|p| self.kind(p)).cloned();
        let kind = if let Some(pid) = process {
            TrackKind::Process(pid)
        } else if let Some(t) = thread {
            TrackKind::Thread(t)
        } else if counter {
            match (name.as_str(), parent) {
                (vocab::TRACK_DEVICE_MEMORY, Some(TrackKind::Process(pid))) => {
                    TrackKind::Counter(CounterKind::DeviceMemory { pid })
                }
                (vocab::TRACK_EVENTS_PER_SECOND, _) => {
                    TrackKind::Counter(CounterKind::EventsPerSecond)
                }
                (vocab::TRACK_DROPS, _) => TrackKind::Counter(CounterKind::Drops),
                _ => TrackKind::Other,
            }
        } else {
            match (name.as_str(), parent) {
                (vocab::TRACK_INGERO, None) => TrackKind::Ingero,
                (vocab::TRACK_TRACE_WIDE, None) => TrackKind::Labels(None),
                (vocab::TRACK_LABELS, Some(TrackKind::Process(pid))) => {
                    TrackKind::Labels(Some(pid))
                }
                (vocab::TRACK_OFF_CPU, Some(TrackKind::Thread(t))) => TrackKind::OffCpu(t),
                (n, Some(TrackKind::Labels(scope))) if n.starts_with(vocab::TRACK_SPANS) => {
                    TrackKind::SpanLane(scope)
                }
                (n, Some(TrackKind::Labels(scope))) => TrackKind::State(scope, n.to_owned()),
                _ => TrackKind::Other,
            }
        };
        self.tracks.get_or_default(uuid).kind = Some(kind);
        Ok(())
    }

    fn instant(
        &mut self,
        track: u64,
        ts: u64,
        name: &str,
        args: &[(Arc<str>, Val)],
        slot: &mut ReadRecord,
    ) -> bool {
        match self.kind(track) {
            Some(TrackKind::Thread(t)) => {
                let op = match name {
                    "exec" => ProcessOp::Exec,
                    "exit" => ProcessOp::Exit,
                    "thread_exit" => ProcessOp::ThreadExit,
                    "fork" => ProcessOp::Fork,
                    "thread_start" => ProcessOp::ThreadStart,
                    _ => return false,
                };
                *slot = ReadRecord::Lifecycle(LifecycleRecord {
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
                });
            }
            Some(TrackKind::Labels(scope)) if name == vocab::EV_ANNOTATION => {
                *slot = ReadRecord::Annotation(annotation(*scope, ts, None, args));
            }
            Some(TrackKind::Ingero) if name == vocab::EV_SESSION => {
                let s = |k: &str| find(args, k).and_then(Val::as_str).unwrap_or("").to_owned();
                let list = |k: &str| {
                    let v = s(k);
                    if v.is_empty() {
                        Vec::new()
                    } else {
                        v.split('\n').map(str::to_owned).collect()
                    }
                };
                *slot = ReadRecord::Session(SessionRecord {
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
                });
            }
            Some(TrackKind::Ingero) if name == vocab::EV_STATISTICS => {
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
                *slot = ReadRecord::Statistics(st);
            }
            _ => return false,
        }
        true
    }
}

/// Declares a packet's interned data in its sequence's tables, resolving what the fast path
/// needs once.
fn intern(
    seq: &mut SeqState,
    b: &[u8],
    op_by_name: &FastMap<&'static str, CudaOp>,
    launches: &mut Vec<LaunchConfig>,
) -> Result<()> {
    let mut c = Cur::new(b);
    while let Some((f, w)) = c.field()? {
        if !matches!(f, 2 | 3 | 29) {
            continue;
        }
        let (mut iid, mut s): (u64, &[u8]) = (0, &[]);
        let mut cc = Cur::new(w.bytes());
        while let Some((f, w)) = cc.field()? {
            match f {
                1 => iid = w.int(),
                2 => s = w.bytes(),
                _ => {}
            }
        }
        let t: Arc<str> = text(s).into();
        match f {
            2 => {
                let kind = if let Some(op) = op_by_name.get(&*t) {
                    NameKind::Op(*op)
                } else {
                    match &*t {
                        "preempted" => NameKind::OffCpu(OffCpuReason::Preempted),
                        "blocked" => NameKind::OffCpu(OffCpuReason::Blocked),
                        _ => NameKind::Other,
                    }
                };
                seq.names.insert(iid, NameEntry { text: t, kind });
            }
            3 => {
                let slot = KEYS.iter().find(|(_, n)| *n == &*t).map(|(k, _)| *k);
                seq.debug_names.insert(iid, KeyEntry { text: t, slot });
            }
            _ => seq.strings.insert(iid, StrEntry::new(t, launches)),
        }
    }
    Ok(())
}

fn event_name(seq: &SeqState, te: &Te<'_>) -> Arc<str> {
    match (te.name_iid, te.name) {
        (Some(iid), _) => seq
            .names
            .get(iid)
            .map_or_else(|| "".into(), |n| n.text.clone()),
        (None, Some(n)) => text(n).into(),
        (None, None) => "".into(),
    }
}

fn resolve_args(seq: &SeqState, raw: &[u8]) -> Result<Vec<(Arc<str>, Val)>> {
    let mut out = Vec::new();
    for_each_arg(raw, |d| {
        let name: Arc<str> = match (d.name_iid, d.name) {
            (Some(iid), _) => seq
                .debug_names
                .get(iid)
                .map_or_else(|| "".into(), |k| k.text.clone()),
            (None, Some(n)) => text(n).into(),
            (None, None) => "".into(),
        };
        let val = match d.val {
            RawVal::U(v) => Val::U(v),
            RawVal::I(v) => Val::I(v),
            RawVal::B(v) => Val::B(v),
            RawVal::StrIid(iid) => Val::S(
                seq.strings
                    .get(iid)
                    .map_or_else(|| "".into(), |s| s.text.clone()),
            ),
            RawVal::Str(s) => Val::S(text(s).into()),
        };
        out.push((name, val));
        true
    })?;
    Ok(out)
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

/// What [`memcpy_kind`] reads from an absent or empty `kind` (a constant: computing it
/// costs a search).
const NO_KIND: MemcpyKind = MemcpyKind::Unknown(0);

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
fn cuda_args(op: CudaOp, a: &impl Args) -> CudaArgs {
    use CudaOp::*;
    let u = |k: K| a.u(k);
    let dim = |k: K| a.dim(k).unwrap_or([0; 3]);
    match op {
        Malloc | MallocManaged | MallocAsync => CudaArgs::Alloc {
            size: u(K::Size).unwrap_or(0),
            ptr: u(K::Ptr),
            stream: u(K::Stream),
        },
        Free | FreeAsync => CudaArgs::Free {
            ptr: u(K::Ptr).unwrap_or(0),
            size: u(K::Size),
            stream: u(K::Stream),
        },
        MallocHost | HostAlloc => CudaArgs::HostAlloc {
            size: u(K::Size).unwrap_or(0),
        },
        FreeHost => CudaArgs::HostFree {
            ptr: u(K::Ptr).unwrap_or(0),
        },
        LaunchKernel | LaunchCooperativeKernel | LaunchKernelExC => match a.launch(K::Launch) {
            Some(l) => CudaArgs::Launch {
                func: l.func,
                grid: l.grid,
                block: l.block,
                shared_mem: l.shared_mem,
                stream: l.stream,
            },
            // Recordings from before the `launch` argument.
            None => CudaArgs::Launch {
                func: u(K::Func).unwrap_or(0),
                grid: dim(K::Grid),
                block: dim(K::Block),
                shared_mem: u(K::SharedMem).unwrap_or(0),
                stream: u(K::Stream).unwrap_or(0),
            },
        },
        GraphLaunch => CudaArgs::GraphLaunch {
            graph_exec: u(K::GraphExec).unwrap_or(0),
            stream: u(K::Stream).unwrap_or(0),
        },
        Memcpy | MemcpyAsync | Memcpy2D | Memcpy2DAsync => CudaArgs::Memcpy {
            count: u(K::Count).unwrap_or(0),
            kind: a.kind(K::Kind),
            stream: u(K::Stream),
            width_height: u(K::Width).zip(u(K::Height)),
        },
        MemcpyPeer | MemcpyPeerAsync => CudaArgs::MemcpyPeer {
            count: u(K::Count).unwrap_or(0),
            dst_device: a.i(K::DstDevice).unwrap_or(0) as i32,
            src_device: a.i(K::SrcDevice).unwrap_or(0) as i32,
            stream: u(K::Stream),
        },
        Memset | MemsetAsync => CudaArgs::Memset {
            count: u(K::Count).unwrap_or(0),
            stream: u(K::Stream),
        },
        StreamSynchronize | DeviceSynchronize | EventSynchronize => CudaArgs::Sync {
            stream: u(K::Stream),
            event: u(K::Event),
        },
    }
}

#[cfg(test)]
mod tests {
    //! The scanner-based decoder against packets built with the prost structs: the fast path
    //! (interned, known arguments) and the general path (inline names and strings) must yield
    //! the same record.

    use super::*;
    use crate::proto::{
        DebugAnnotation, DebugAnnotationName, EventName, InternedData, InternedString,
        ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
    };
    use prost::Message;

    fn bytes(p: &TracePacket) -> Vec<u8> {
        p.encode_to_vec()
    }

    fn launch_call(inline: bool, paths: Paths) -> ReadRecord {
        let mut d = Decoder::new(paths);
        let mut out = Vec::new();
        let first = TracePacket {
            trusted_packet_sequence_id: Some(1),
            sequence_flags: Some(3),
            interned_data: Some(InternedData {
                event_names: vec![EventName {
                    iid: Some(1),
                    name: Some("cudaLaunchKernel".into()),
                }],
                debug_annotation_names: [arg::FUNC, arg::GRID, arg::RET, arg::SHARED_MEM]
                    .iter()
                    .enumerate()
                    .map(|(i, n)| DebugAnnotationName {
                        iid: Some(i as u64 + 1),
                        name: Some((*n).into()),
                    })
                    .collect(),
                debug_annotation_string_values: vec![
                    InternedString {
                        iid: Some(1),
                        str: Some(b"0x7f00".to_vec()),
                    },
                    InternedString {
                        iid: Some(2),
                        str: Some(b"4x2x1".to_vec()),
                    },
                ],
                ..Default::default()
            }),
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(5),
                thread: Some(ThreadDescriptor {
                    pid: Some(10),
                    tid: Some(11),
                    thread_name: Some("train".into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut slot = empty_record();
        let mut step = |d: &mut Decoder, p: &TracePacket| {
            if d.packet(&bytes(p), &mut slot).expect("packet") == Step::Record {
                out.push(slot.clone());
            }
        };
        step(&mut d, &first);
        let arg = |iid: u64, name: &str| DebugAnnotation {
            name_iid: (!inline).then_some(iid),
            name: inline.then(|| name.to_owned()),
            ..Default::default()
        };
        let args = vec![
            DebugAnnotation {
                string_value_iid: (!inline).then_some(1),
                string_value: inline.then(|| "0x7f00".into()),
                ..arg(1, arg::FUNC)
            },
            DebugAnnotation {
                string_value_iid: (!inline).then_some(2),
                string_value: inline.then(|| "4x2x1".into()),
                ..arg(2, arg::GRID)
            },
            DebugAnnotation {
                int_value: Some(-2),
                ..arg(3, arg::RET)
            },
            DebugAnnotation {
                uint_value: Some(512),
                ..arg(4, arg::SHARED_MEM)
            },
        ];
        let begin = TracePacket {
            timestamp: Some(1_000),
            trusted_packet_sequence_id: Some(1),
            track_event: Some(TrackEvent {
                r#type: Some(event_type::SLICE_BEGIN),
                track_uuid: Some(5),
                name_iid: (!inline).then_some(1),
                name: inline.then(|| "cudaLaunchKernel".into()),
                debug_annotations: args,
                ..Default::default()
            }),
            ..Default::default()
        };
        let end = TracePacket {
            timestamp: Some(1_700),
            trusted_packet_sequence_id: Some(1),
            track_event: Some(TrackEvent {
                r#type: Some(event_type::SLICE_END),
                track_uuid: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        };
        step(&mut d, &begin);
        let open_fast = matches!(
            d.tracks.get(5).and_then(|t| t.bodies.last()),
            Some(OpenBody::Cuda(_))
        );
        assert_eq!(open_fast, !inline && paths != Paths::General, "path taken");
        step(&mut d, &end);
        assert_eq!(out.len(), 1);
        out.remove(0)
    }

    #[test]
    fn fast_and_general_paths_agree() {
        let fast = launch_call(false, Paths::All);
        assert_eq!(fast, launch_call(false, Paths::Scanner));
        assert_eq!(fast, launch_call(false, Paths::General));
        assert_eq!(fast, launch_call(true, Paths::All));
        let ReadRecord::Cuda(c) = &fast else {
            panic!("not a CUDA call: {fast:?}");
        };
        assert_eq!((c.ts_ns, c.duration_ns, c.ret), (1_000, 700, -2));
        assert_eq!(&*c.thread.name, "train");
        assert_eq!(
            c.args,
            CudaArgs::Launch {
                func: 0x7f00,
                grid: [4, 2, 1],
                block: [0; 3],
                shared_mem: 512,
                stream: 0,
            }
        );
    }

    #[test]
    fn no_kind_is_what_an_empty_kind_reads_as() {
        assert_eq!(memcpy_kind(""), NO_KIND);
    }

    #[test]
    fn slot_reuse_rewrites_every_field() {
        let rec = launch_call(false, Paths::All);
        let mut slot = ReadRecord::Cuda(crate::model::CudaCallRecord {
            ts_ns: 1,
            duration_ns: 2,
            thread: ThreadRef {
                pid: 1,
                tid: 2,
                name: "other-thread-name".into(),
            },
            op: CudaOp::Malloc,
            ret: 9,
            args: CudaArgs::HostFree { ptr: 1 },
            clamped_from_ns: Some(3),
        });
        let ReadRecord::Cuda(c) = &rec else {
            panic!("not a CUDA call");
        };
        let Some(TrackKind::Thread(t)) = Some(TrackKind::Thread(c.thread.clone())) else {
            return;
        };
        let p = CudaPrep {
            op: c.op,
            ret: c.ret,
            args: c.args.clone(),
            clamped: c.clamped_from_ns,
        };
        slices::put_cuda(&mut slot, c.ts_ns, c.duration_ns, &t, &p);
        assert_eq!(slot, rec);
    }
}
