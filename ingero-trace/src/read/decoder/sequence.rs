//! One sequence's incremental state as the reader keeps it: its interned names, argument keys
//! and string values, each resolved once when declared (event name → CUDA op, argument key →
//! slot, string → number, dimensions, memcpy kind or launch configuration), and its clock.

use std::sync::Arc;

use super::iids::IidTable;
use super::values::parse_num;
use crate::fast_map::FastMap;
use crate::model::{LaunchConfig, MemcpyKind};
use crate::proto::scan::{self, Cur, text};
use crate::proto::{EventName as EventNameEntry, InternedData, clock_id};
use crate::vocab::{self, ArgKey, EventName};

pub(super) struct NameEntry {
    pub(super) text: Arc<str>,
    /// The vocabulary's name it is, decided when the name is interned (`None`: a name the
    /// vocabulary does not have).
    pub(super) kind: Option<EventName>,
}

pub(super) struct KeyEntry {
    pub(super) text: Arc<str>,
    pub(super) slot: Option<ArgKey>,
}

/// An interned string value with its readings, computed once.
pub(super) struct StrEntry {
    pub(super) text: Arc<str>,
    pub(super) num: Option<u64>,
    pub(super) dim: Option<[u32; 3]>,
    pub(super) kind: MemcpyKind,
    pub(super) launch: Option<LaunchConfig>,
    /// Where `launch` is in the decoder's launch table (open launches refer to it).
    pub(super) launch_idx: Option<u32>,
}

impl StrEntry {
    pub(super) fn new(text: Arc<str>, launches: &mut Vec<LaunchConfig>) -> StrEntry {
        let launch = vocab::parse_launch(&text);
        let launch_idx = launch.and_then(|l| {
            let idx = u32::try_from(launches.len()).ok()?;
            launches.push(l);
            Some(idx)
        });
        StrEntry {
            num: parse_num(&text),
            dim: vocab::parse_dim3(&text),
            kind: MemcpyKind::from_text(&text),
            launch,
            launch_idx,
            text,
        }
    }
}

#[derive(Default)]
pub(super) struct SeqState {
    pub(super) names: IidTable<NameEntry>,
    pub(super) debug_names: IidTable<KeyEntry>,
    pub(super) strings: IidTable<StrEntry>,
    /// Clock 64's current value (0 until a snapshot or a delta sets it).
    pub(super) clock64: u64,
    /// Whether the defaults' clock is clock 64 (timestamps without their own clock are
    /// deltas): kept as a flag because every hot packet asks.
    pub(super) incremental: bool,
    /// The sequence has packets inside `compressed_packets` containers.
    pub(super) in_bundles: bool,
    /// A container was lost since the sequence's incremental state was last cleared: its
    /// interned names and clock can no longer be trusted, so packets that need them are
    /// skipped until a packet clears that state (as trace_processor does after data loss).
    pub(super) lost: bool,
}

impl SeqState {
    /// A packet's time: its `timestamp` on its clock (the incremental clock 64 moves).
    #[inline(always)]
    pub(super) fn advance(&mut self, timestamp: Option<u64>, clock: Option<u32>) -> u64 {
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
    pub(super) fn set_default_clock(&mut self, clock: Option<u32>) {
        self.incremental = clock == Some(clock_id::INCREMENTAL_MONOTONIC);
    }

    pub(super) fn reset(&mut self) {
        self.names.clear();
        self.debug_names.clear();
        self.strings.clear();
        self.clock64 = 0;
        self.set_default_clock(None);
        self.lost = false;
    }
}

/// Declares a packet's interned data in its sequence's tables, resolving what the fast path
/// needs once.
pub(super) fn intern(
    seq: &mut SeqState,
    b: &[u8],
    names: &FastMap<&'static str, EventName>,
    launches: &mut Vec<LaunchConfig>,
) -> scan::Result<()> {
    let mut c = Cur::new(b);
    while let Some((f, w)) = c.field()? {
        type I = InternedData;
        if !matches!(
            f,
            I::EVENT_NAMES | I::DEBUG_ANNOTATION_NAMES | I::DEBUG_ANNOTATION_STRING_VALUES
        ) {
            continue;
        }
        let (mut iid, mut s): (u64, &[u8]) = (0, &[]);
        let mut cc = Cur::new(w.bytes());
        while let Some((f, w)) = cc.field()? {
            match f {
                // Every interned entry type has its id and its text under these numbers.
                EventNameEntry::IID => iid = w.int(),
                EventNameEntry::NAME => s = w.bytes(),
                _ => {}
            }
        }
        let t: Arc<str> = text(s).into();
        match f {
            I::EVENT_NAMES => {
                let kind = names.get(&*t).copied();
                seq.names.insert(iid, NameEntry { text: t, kind });
            }
            I::DEBUG_ANNOTATION_NAMES => {
                let slot = ArgKey::from_text(&t);
                seq.debug_names.insert(iid, KeyEntry { text: t, slot });
            }
            _ => seq.strings.insert(iid, StrEntry::new(t, launches)),
        }
    }
    Ok(())
}
