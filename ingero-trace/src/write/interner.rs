//! Interning for one packet sequence: names, categories, debug-annotation keys and string
//! values become small ids (`iid`s) that packets reference instead of repeating the text.
//!
//! The fixed vocabulary (`crate::vocab`: event names, argument keys, categories) gets fixed
//! iids and is declared once in the sequence's first packet, so the hot path does no hashing
//! for it. Open-ended values (label keys, thread names, stream pointers, kernel launch
//! configurations) are interned on first use and declared in the packet that first uses them.
//! Each table is capped: past the cap a value is written inline, so memory does not grow with
//! the length of the trace.

use std::collections::HashMap;
use std::hash::Hasher;

use ingero_ebpf::cuda_ops::MAX_OP;

use crate::fast_map::FastMap;
use crate::model::LaunchConfig;
use crate::proto::{
    DebugAnnotationName, EventCategory, EventName as ProtoEventName, InternedData, InternedString,
};
use crate::vocab::{self, ArgKey, Category, EventName};

/// Most dynamic entries one sequence interns before writing values inline.
pub const MAX_DYNAMIC: usize = 65_536;

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
            StrKey::Ptr(p) => vocab::ptr_text(*p),
            StrKey::Text(s) => (*s).to_owned(),
        }
    }
}

/// A launch configuration as a hash key: packed into six words, so equality is a few wide
/// compares and the hash one mix of them (the derived `Hash` of its arrays feeds
/// [`FastHasher`](crate::fast_map::FastHasher) byte by byte).
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
    /// Every fixed event name; its iid is its place here, from 1.
    fixed_names: Vec<EventName>,
    dyn_debug_names: HashMap<String, u64>,
    next_debug_name: u64,
    /// Event names outside the vocabulary (kernel names of launch slices), after the fixed.
    dyn_names: HashMap<String, u64>,
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
        let fixed_names: Vec<EventName> = EventName::all().collect();
        let mut op_iid = [0u64; MAX_OP];
        for (i, name) in fixed_names.iter().enumerate() {
            if let EventName::Op(op) = name {
                if let Some(slot) = op_iid.get_mut(*op as usize) {
                    *slot = i as u64 + 1;
                }
            }
        }
        let mut me = Interner {
            op_iid,
            fixed_names,
            dyn_debug_names: HashMap::new(),
            next_debug_name: ArgKey::ALL.len() as u64 + 1,
            dyn_names: HashMap::new(),
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
        self.next_debug_name = ArgKey::ALL.len() as u64 + 1;
        self.dyn_names.clear();
        self.ptrs.clear();
        self.texts.clear();
        self.launches.clear();
        self.next_str = 1;
        let mut fixed = InternedData::default();
        for (i, name) in self.fixed_names.iter().enumerate() {
            fixed.event_names.push(ProtoEventName {
                iid: Some(i as u64 + 1),
                name: Some(name.text().to_owned()),
            });
        }
        fixed.event_categories = Category::ALL
            .iter()
            .map(|c| EventCategory {
                iid: Some(c.iid()),
                name: Some(c.text().to_owned()),
            })
            .collect();
        fixed.debug_annotation_names = ArgKey::ALL
            .iter()
            .map(|a| DebugAnnotationName {
                iid: Some(a.iid()),
                name: Some(a.text().to_owned()),
            })
            .collect();
        self.pending = fixed;
    }

    /// The fixed iid of `name` (0 for none, which no fixed name has).
    #[inline(always)]
    pub fn name(&self, name: EventName) -> u64 {
        match name {
            // Every CUDA call asks: an array index, kept inline.
            EventName::Op(op) => self.op_iid.get(op as usize).copied().unwrap_or(0),
            other => self.other_name(other),
        }
    }

    #[inline(never)]
    fn other_name(&self, name: EventName) -> u64 {
        self.fixed_names
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| i as u64 + 1)
    }

    /// The iid of an event name outside the vocabulary (a kernel's), or `None` past the cap
    /// (name the slice by its op instead).
    pub fn dynamic_name(&mut self, text: &str) -> Option<u64> {
        if let Some(iid) = self.dyn_names.get(text) {
            return Some(*iid);
        }
        if self.dyn_names.len() >= MAX_DYNAMIC {
            return None;
        }
        let iid = (self.fixed_names.len() + self.dyn_names.len()) as u64 + 1;
        self.dyn_names.insert(text.to_owned(), iid);
        self.pending.event_names.push(ProtoEventName {
            iid: Some(iid),
            name: Some(text.to_owned()),
        });
        Some(iid)
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
    use ingero_ebpf::CudaOp;

    #[test]
    fn fixed_vocabulary_is_declared_once_after_clear() {
        let mut i = Interner::new();
        let first = i.take_pending().expect("fixed vocabulary");
        let malloc = i.name(EventName::Op(CudaOp::Malloc));
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
                .any(|n| n.iid == Some(ArgKey::Size.iid()) && n.name.as_deref() == Some("size"))
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
            k1 > Some(ArgKey::ALL.len() as u64),
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
            let iid = i.name(EventName::Op(*op));
            assert!(iid > 0 && seen.insert(iid), "{op:?}");
        }
        assert!(seen.insert(i.name(EventName::Instant(vocab::Instant::Session))));
    }
}
