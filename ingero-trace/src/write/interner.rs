//! Interning for one packet sequence: names, categories, debug-annotation keys and string
//! values become small ids (`iid`s) that packets reference instead of repeating the text.
//!
//! The fixed vocabulary (CUDA op names, lifecycle names, argument keys, categories) gets fixed
//! iids and is declared once in the sequence's first packet, so the hot path does no hashing
//! for it. Open-ended values (label keys, thread names, stream pointers, kernel launch
//! configurations) are interned on first use and declared in the packet that first uses them.
//! Each table is capped: past the cap a value is written inline, so memory does not grow with
//! the length of the trace.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use ingero_ebpf::{CudaOp, OffCpuReason};

/// Upper bound on `CudaOp` values (mirrors the eBPF crate's array bound).
const MAX_OP: usize = 64;

use crate::model::ProcessOp;
use crate::proto::{DebugAnnotationName, EventCategory, EventName, InternedData, InternedString};
use crate::vocab::{self, LaunchConfig, arg, session};

/// Most dynamic entries one sequence interns before writing values inline.
pub const MAX_DYNAMIC: usize = 65_536;

/// Multiplicative hashing for integer keys: the keys are pointers and small ints, so SipHash's
/// DoS resistance buys nothing here and costs a third of the writer's time.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Debug-annotation keys with fixed iids (`key as u64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Arg {
    Ret = 1,
    Error,
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
    OtherPid,
    CloneFlagsKnown,
    Text,
    ProvenanceUid,
    ProvenancePid,
    ScopePid,
    ScopeStartTime,
    Continued,
    Host,
    Kernel,
    AgentVersion,
    CommandLine,
    Targets,
    Probes,
    MachineId,
    FileIndex,
    StartedRealtimeNs,
    /// Last so that the iids above stay what older recordings used.
    Launch,
}

const ARGS: &[(Arg, &str)] = &[
    (Arg::Ret, arg::RET),
    (Arg::Error, arg::ERROR),
    (Arg::Size, arg::SIZE),
    (Arg::Ptr, arg::PTR),
    (Arg::Stream, arg::STREAM),
    (Arg::Func, arg::FUNC),
    (Arg::Grid, arg::GRID),
    (Arg::Block, arg::BLOCK),
    (Arg::SharedMem, arg::SHARED_MEM),
    (Arg::GraphExec, arg::GRAPH_EXEC),
    (Arg::Count, arg::COUNT),
    (Arg::Kind, arg::KIND),
    (Arg::Width, arg::WIDTH),
    (Arg::Height, arg::HEIGHT),
    (Arg::DstDevice, arg::DST_DEVICE),
    (Arg::SrcDevice, arg::SRC_DEVICE),
    (Arg::Event, arg::EVENT),
    (Arg::ClampedFromNs, arg::CLAMPED_FROM_NS),
    (Arg::NextTid, arg::NEXT_TID),
    (Arg::NextComm, arg::NEXT_COMM),
    (Arg::PrevState, arg::PREV_STATE),
    (Arg::Cpu, arg::CPU),
    (Arg::OtherPid, arg::OTHER_PID),
    (Arg::CloneFlagsKnown, arg::CLONE_FLAGS_KNOWN),
    (Arg::Text, arg::TEXT),
    (Arg::ProvenanceUid, arg::PROVENANCE_UID),
    (Arg::ProvenancePid, arg::PROVENANCE_PID),
    (Arg::ScopePid, arg::SCOPE_PID),
    (Arg::ScopeStartTime, arg::SCOPE_START_TIME),
    (Arg::Continued, arg::CONTINUED),
    (Arg::Host, session::HOST),
    (Arg::Kernel, session::KERNEL),
    (Arg::AgentVersion, session::AGENT_VERSION),
    (Arg::CommandLine, session::COMMAND_LINE),
    (Arg::Targets, session::TARGETS),
    (Arg::Probes, session::PROBES),
    (Arg::MachineId, session::MACHINE_ID),
    (Arg::FileIndex, session::FILE_INDEX),
    (Arg::StartedRealtimeNs, session::STARTED_REALTIME_NS),
    (Arg::Launch, arg::LAUNCH),
];

impl Arg {
    pub fn iid(self) -> u64 {
        self as u64
    }
}

/// Categories with fixed iids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cat {
    CudaError = 1,
    Sched,
    Process,
    Annotation,
    Ingero,
}

const CATS: &[(Cat, &str)] = &[
    (Cat::CudaError, vocab::CAT_CUDA_ERROR),
    (Cat::Sched, vocab::CAT_SCHED),
    (Cat::Process, vocab::CAT_PROCESS),
    (Cat::Annotation, vocab::CAT_ANNOTATION),
    (Cat::Ingero, vocab::CAT_INGERO),
];

impl Cat {
    pub fn iid(self) -> u64 {
        self as u64
    }
}

/// Event names with fixed iids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    Op(CudaOp),
    OffCpu(OffCpuReason),
    Lifecycle(ProcessOp),
    Session,
    Statistics,
    Annotation,
}

const LIFECYCLE: [ProcessOp; 5] = [
    ProcessOp::Exec,
    ProcessOp::Exit,
    ProcessOp::ThreadExit,
    ProcessOp::Fork,
    ProcessOp::ThreadStart,
];
const OFF_CPU: [OffCpuReason; 2] = [OffCpuReason::Preempted, OffCpuReason::Blocked];

fn fixed_names() -> Vec<(Name, &'static str)> {
    let mut v: Vec<(Name, &'static str)> = CudaOp::ALL
        .iter()
        .map(|op| (Name::Op(*op), op.name()))
        .collect();
    v.extend(OFF_CPU.iter().map(|r| (Name::OffCpu(*r), r.name())));
    v.extend(LIFECYCLE.iter().map(|p| (Name::Lifecycle(*p), p.name())));
    v.push((Name::Session, vocab::EV_SESSION));
    v.push((Name::Statistics, vocab::EV_STATISTICS));
    v.push((Name::Annotation, vocab::EV_ANNOTATION));
    v
}

/// A string value interned by its source, so lookups need not format it first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StrKey<'a> {
    /// A pointer, shown as `0x…`.
    Ptr(u64),
    Text(&'a str),
}

impl StrKey<'_> {
    pub fn render(&self) -> String {
        match self {
            StrKey::Ptr(p) => format!("{p:#x}"),
            StrKey::Text(s) => (*s).to_owned(),
        }
    }
}

/// A launch configuration as a hash key: packed into six words, so equality is a few wide
/// compares and the hash one mix of them (the derived `Hash` of its arrays feeds
/// [`FastHasher`] byte by byte).
#[derive(Clone, Copy, PartialEq, Eq)]
struct LaunchKey([u64; 6]);

impl LaunchKey {
    #[inline(always)]
    fn new(l: &LaunchConfig) -> LaunchKey {
        let pair = |a: u32, b: u32| u64::from(a) | (u64::from(b) << 32);
        LaunchKey([
            l.func,
            pair(l.grid[0], l.grid[1]),
            pair(l.grid[2], l.block[0]),
            pair(l.block[1], l.block[2]),
            l.shared_mem,
            l.stream,
        ])
    }
}

impl std::hash::Hash for LaunchKey {
    #[inline(always)]
    fn hash<H: Hasher>(&self, state: &mut H) {
        let w = &self.0;
        let mix = w[0]
            ^ w[1].rotate_left(13)
            ^ w[2].rotate_left(29)
            ^ w[3].rotate_left(41)
            ^ w[4].rotate_left(53)
            ^ w[5].rotate_left(7);
        state.write_u64(mix);
    }
}

/// The interning state of one sequence.
pub struct Interner {
    op_iid: [u64; MAX_OP],
    name_iids: Vec<(Name, u64)>,
    fixed_names: Vec<(Name, &'static str)>,
    dyn_debug_names: HashMap<String, u64>,
    next_debug_name: u64,
    ptrs: FastMap<u64, u64>,
    texts: HashMap<String, u64>,
    launches: FastMap<LaunchKey, u64>,
    next_str: u64,
    pending: InternedData,
}

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

impl Interner {
    pub fn new() -> Interner {
        let fixed_names = fixed_names();
        let mut op_iid = [0u64; MAX_OP];
        let mut name_iids = Vec::new();
        for (i, (name, _)) in fixed_names.iter().enumerate() {
            let iid = i as u64 + 1;
            if let Name::Op(op) = name {
                if let Some(slot) = op_iid.get_mut(*op as usize) {
                    *slot = iid;
                }
            }
            name_iids.push((*name, iid));
        }
        let mut me = Interner {
            op_iid,
            name_iids,
            fixed_names,
            dyn_debug_names: HashMap::new(),
            next_debug_name: ARGS.len() as u64 + 1,
            ptrs: FastMap::default(),
            texts: HashMap::new(),
            launches: FastMap::default(),
            next_str: 1,
            pending: InternedData::default(),
        };
        me.clear();
        me
    }

    /// Forgets everything interned (a new file or a reset sequence) and queues the fixed
    /// vocabulary for the next packet.
    pub fn clear(&mut self) {
        self.dyn_debug_names.clear();
        self.next_debug_name = ARGS.len() as u64 + 1;
        self.ptrs.clear();
        self.texts.clear();
        self.launches.clear();
        self.next_str = 1;
        let mut fixed = InternedData::default();
        for (name, text) in &self.fixed_names {
            let iid = self
                .name_iids
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, i)| *i);
            fixed.event_names.push(EventName {
                iid: Some(iid),
                name: Some((*text).to_owned()),
            });
        }
        fixed.event_categories = CATS
            .iter()
            .map(|(c, n)| EventCategory {
                iid: Some(c.iid()),
                name: Some((*n).to_owned()),
            })
            .collect();
        fixed.debug_annotation_names = ARGS
            .iter()
            .map(|(a, n)| DebugAnnotationName {
                iid: Some(a.iid()),
                name: Some((*n).to_owned()),
            })
            .collect();
        self.pending = fixed;
    }

    pub fn name(&self, name: Name) -> u64 {
        match name {
            Name::Op(op) => self.op_iid.get(op as usize).copied().unwrap_or(0),
            other => self
                .name_iids
                .iter()
                .find(|(n, _)| *n == other)
                .map_or(0, |(_, i)| *i),
        }
    }

    /// The iid of a dynamic debug-annotation key, or `None` past the cap (write it inline).
    pub fn debug_name(&mut self, key: &str) -> Option<u64> {
        if let Some(iid) = self.dyn_debug_names.get(key) {
            return Some(*iid);
        }
        if self.dyn_debug_names.len() >= MAX_DYNAMIC {
            return None;
        }
        let iid = self.next_debug_name;
        self.next_debug_name += 1;
        self.dyn_debug_names.insert(key.to_owned(), iid);
        self.pending
            .debug_annotation_names
            .push(DebugAnnotationName {
                iid: Some(iid),
                name: Some(key.to_owned()),
            });
        Some(iid)
    }

    /// The iid of a string value, or `None` past the cap (write it inline).
    pub fn string(&mut self, key: StrKey<'_>) -> Option<u64> {
        let found = match &key {
            StrKey::Ptr(p) => self.ptrs.get(p),
            StrKey::Text(s) => self.texts.get(*s),
        };
        if let Some(iid) = found {
            return Some(*iid);
        }
        if self.strings_full() {
            return None;
        }
        let iid = self.new_string(key.render());
        match key {
            StrKey::Ptr(p) => self.ptrs.insert(p, iid),
            StrKey::Text(s) => self.texts.insert(s.to_owned(), iid),
        };
        Some(iid)
    }

    /// The iid of a kernel launch's whole configuration (value [`vocab::launch_text`]): one
    /// lookup per launch. `None` past the cap (write the text inline).
    #[inline]
    pub fn launch(&mut self, l: &LaunchConfig) -> Option<u64> {
        let key = LaunchKey::new(l);
        if let Some(iid) = self.launches.get(&key) {
            return Some(*iid);
        }
        if self.strings_full() {
            return None;
        }
        let iid = self.new_string(vocab::launch_text(l));
        self.launches.insert(key, iid);
        Some(iid)
    }

    fn strings_full(&self) -> bool {
        self.ptrs.len() + self.texts.len() + self.launches.len() >= MAX_DYNAMIC
    }

    /// Allocates the next string iid and queues its definition.
    fn new_string(&mut self, text: String) -> u64 {
        let iid = self.next_str;
        self.next_str += 1;
        self.pending
            .debug_annotation_string_values
            .push(InternedString {
                iid: Some(iid),
                str: Some(text.into_bytes()),
            });
        iid
    }

    /// Whether definitions are waiting for the next packet.
    #[inline(always)]
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Appends the waiting definitions as field `tag` (`TracePacket.interned_data`) to `buf`.
    pub fn encode_pending(&mut self, tag: u32, buf: &mut Vec<u8>) {
        if let Some(p) = self.take_pending() {
            prost::encoding::message::encode(tag, &p, buf);
        }
    }

    /// Definitions not yet written: they go into the next packet of the sequence.
    pub fn take_pending(&mut self) -> Option<InternedData> {
        if self.pending.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.pending))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_vocabulary_is_declared_once_after_clear() {
        let mut i = Interner::new();
        let first = i.take_pending().expect("fixed vocabulary");
        let malloc = i.name(Name::Op(CudaOp::Malloc));
        assert!(
            first
                .event_names
                .iter()
                .any(|n| n.iid == Some(malloc) && n.name.as_deref() == Some("cudaMalloc"))
        );
        assert!(
            first
                .debug_annotation_names
                .iter()
                .any(|n| n.iid == Some(Arg::Size.iid()) && n.name.as_deref() == Some("size"))
        );
        assert!(i.take_pending().is_none(), "nothing new");
        i.clear();
        assert!(i.take_pending().is_some(), "re-declared after a reset");
    }

    #[test]
    fn dynamic_values_are_interned_once() {
        let mut i = Interner::new();
        i.take_pending();
        let a = i.string(StrKey::Ptr(0x7f00));
        let b = i.string(StrKey::Ptr(0x7f00));
        let c = i.string(StrKey::Text("H2D"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let p = i.take_pending().expect("new values");
        let strs: Vec<_> = p
            .debug_annotation_string_values
            .iter()
            .map(|s| s.str.clone().unwrap_or_default())
            .collect();
        assert_eq!(strs, vec![b"0x7f00".to_vec(), b"H2D".to_vec()]);
        let k1 = i.debug_name("labels.step");
        assert_eq!(k1, i.debug_name("labels.step"));
        assert!(
            k1 > Some(ARGS.len() as u64),
            "dynamic keys do not collide with fixed ones"
        );
    }

    #[test]
    fn a_launch_configuration_is_one_interned_string() {
        let mut i = Interner::new();
        i.take_pending();
        let l = LaunchConfig {
            func: 0x7f00_aa00,
            grid: [16, 4, 1],
            block: [32, 8, 1],
            shared_mem: 1024,
            stream: 0xabcd,
        };
        let a = i.launch(&l);
        assert_eq!(a, i.launch(&l), "same configuration, same iid");
        let other = LaunchConfig {
            block: [32, 8, 2],
            ..l
        };
        let b = i.launch(&other);
        assert!(a.is_some() && b.is_some() && a != b);
        // Swapped dimensions must not collide into the same entry.
        let swapped = LaunchConfig {
            grid: l.block,
            block: l.grid,
            ..l
        };
        assert_ne!(i.launch(&swapped), a);
        let p = i.take_pending().expect("new values");
        let strs: Vec<_> = p
            .debug_annotation_string_values
            .iter()
            .map(|s| String::from_utf8(s.str.clone().unwrap_or_default()).unwrap_or_default())
            .collect();
        assert_eq!(strs.len(), 3, "each distinct configuration declared once");
        assert_eq!(strs[0], vocab::launch_text(&l));
        assert_eq!(vocab::parse_launch(&strs[1]), Some(other));
        assert!(i.take_pending().is_none());
    }

    #[test]
    fn interning_stops_at_the_cap() {
        let mut i = Interner::new();
        for p in 0..MAX_DYNAMIC as u64 {
            assert!(i.string(StrKey::Ptr(p)).is_some());
        }
        let l = LaunchConfig {
            func: 1,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_mem: 0,
            stream: 0,
        };
        assert_eq!(i.launch(&l), None, "written inline past the cap");
        assert_eq!(
            i.string(StrKey::Ptr(0)),
            Some(1),
            "known values keep their iid"
        );
    }

    #[test]
    fn names_are_distinct_and_non_zero() {
        let i = Interner::new();
        let mut seen = std::collections::HashSet::new();
        for op in CudaOp::ALL {
            let iid = i.name(Name::Op(*op));
            assert!(iid > 0 && seen.insert(iid), "{op:?}");
        }
        assert!(seen.insert(i.name(Name::Session)));
    }
}
