//! A slice's arguments as the two decoding paths hold them, behind one [`Args`] lookup by
//! [`ArgKey`]: [`Slots`] (interned keys with integer or interned string values, the fast
//! paths) and [`ListArgs`] (resolved names and values, the general path).

use std::sync::Arc;

use super::iids::IidTable;
use super::sequence::StrEntry;
use super::values::Val;
use crate::model::{LaunchConfig, MemcpyKind};
use crate::vocab::{self, ARG_KEYS, ArgKey};

/// A slice's interned arguments by known key, with how to read each value: the scratch the
/// interned paths fill before resolving a slice at its begin.
#[derive(Clone, Copy)]
pub(super) struct Slots {
    /// Which keys have a value, one bit per [`ArgKey::index`].
    pub(super) present: u64,
    /// The value is an `int_value` (read as signed).
    signed: u64,
    /// The value is a string iid on the slice's sequence.
    string: u64,
    v: [u64; ARG_KEYS],
}

/// How a value is stored in [`Slots`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotVal {
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
    pub(super) const EMPTY: Slots = Slots {
        present: 0,
        signed: 0,
        string: 0,
        v: [0; ARG_KEYS],
    };

    /// Forgets every value (values are read only under their `present` bit).
    #[inline(always)]
    pub(super) fn clear(&mut self) {
        self.present = 0;
        self.signed = 0;
        self.string = 0;
    }

    /// Stores a value; the first occurrence of a key wins, as on the general path.
    #[inline(always)]
    pub(super) fn put(&mut self, k: ArgKey, v: u64, how: SlotVal) {
        let bit = 1u64 << k.index();
        if self.present & bit != 0 {
            return;
        }
        self.present |= bit;
        match how {
            SlotVal::Unsigned => {}
            SlotVal::Signed => self.signed |= bit,
            SlotVal::StrIid => self.string |= bit,
        }
        self.v[k.index()] = v;
    }
}

/// Reads a slice's interned arguments, resolving strings in its sequence's table.
pub(super) struct SlotArgs<'a> {
    pub(super) s: &'a Slots,
    pub(super) strings: &'a IidTable<StrEntry>,
}

impl SlotArgs<'_> {
    #[inline]
    fn str_entry(&self, k: ArgKey) -> Option<&StrEntry> {
        self.strings.get(self.s.v[k.index()])
    }
}

/// Argument lookups shared by the fast and the general path.
pub(super) trait Args {
    fn u(&self, k: ArgKey) -> Option<u64>;
    fn i(&self, k: ArgKey) -> Option<i64>;
    fn dim(&self, k: ArgKey) -> Option<[u32; 3]>;
    fn kind(&self, k: ArgKey) -> MemcpyKind;
    fn text(&self, k: ArgKey) -> Option<&str>;
    fn launch(&self, k: ArgKey) -> Option<LaunchConfig>;
    fn arc(&self, k: ArgKey) -> Option<Arc<str>>;
}

impl Args for SlotArgs<'_> {
    #[inline]
    fn u(&self, k: ArgKey) -> Option<u64> {
        let bit = 1u64 << k.index();
        if self.s.present & bit == 0 {
            return None;
        }
        let v = self.s.v[k.index()];
        if self.s.string & bit != 0 {
            self.str_entry(k).and_then(|e| e.num)
        } else if self.s.signed & bit != 0 {
            u64::try_from(v as i64).ok()
        } else {
            Some(v)
        }
    }
    #[inline]
    fn i(&self, k: ArgKey) -> Option<i64> {
        let bit = 1u64 << k.index();
        if self.s.present & bit != 0 && self.s.signed & bit != 0 {
            return Some(self.s.v[k.index()] as i64);
        }
        self.u(k).and_then(|v| i64::try_from(v).ok())
    }
    #[inline]
    fn dim(&self, k: ArgKey) -> Option<[u32; 3]> {
        let bit = 1u64 << k.index();
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).and_then(|e| e.dim)
    }
    #[inline]
    fn kind(&self, k: ArgKey) -> MemcpyKind {
        let bit = 1u64 << k.index();
        if self.s.present & self.s.string & bit == 0 {
            return NO_KIND;
        }
        self.str_entry(k).map_or(NO_KIND, |e| e.kind)
    }
    fn text(&self, k: ArgKey) -> Option<&str> {
        let bit = 1u64 << k.index();
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).map(|e| &*e.text)
    }
    #[inline]
    fn launch(&self, k: ArgKey) -> Option<LaunchConfig> {
        let bit = 1u64 << k.index();
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).and_then(|e| e.launch)
    }
    fn arc(&self, k: ArgKey) -> Option<Arc<str>> {
        let bit = 1u64 << k.index();
        if self.s.present & self.s.string & bit == 0 {
            return None;
        }
        self.str_entry(k).map(|e| e.text.clone())
    }
}

/// The general path's arguments: resolved names and values, first occurrence wins.
pub(super) struct ListArgs<'a>(pub(super) &'a [(Arc<str>, Val)]);

impl Args for ListArgs<'_> {
    fn u(&self, k: ArgKey) -> Option<u64> {
        u64_of(self.0, k)
    }
    fn i(&self, k: ArgKey) -> Option<i64> {
        find(self.0, k).and_then(Val::as_i64)
    }
    fn dim(&self, k: ArgKey) -> Option<[u32; 3]> {
        find(self.0, k)
            .and_then(Val::as_str)
            .and_then(vocab::parse_dim3)
    }
    fn kind(&self, k: ArgKey) -> MemcpyKind {
        MemcpyKind::from_text(find(self.0, k).and_then(Val::as_str).unwrap_or(""))
    }
    fn text(&self, k: ArgKey) -> Option<&str> {
        find(self.0, k).and_then(Val::as_str)
    }
    fn launch(&self, k: ArgKey) -> Option<LaunchConfig> {
        self.text(k).and_then(vocab::parse_launch)
    }
    fn arc(&self, k: ArgKey) -> Option<Arc<str>> {
        match find(self.0, k) {
            Some(Val::S(s)) => Some(s.clone()),
            _ => None,
        }
    }
}

/// The first value of `key` among resolved arguments (first occurrence wins, as in slots).
pub(super) fn find(args: &[(Arc<str>, Val)], key: ArgKey) -> Option<&Val> {
    let key = key.text();
    args.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
}

/// [`find`] as a number.
pub(super) fn u64_of(args: &[(Arc<str>, Val)], key: ArgKey) -> Option<u64> {
    find(args, key).and_then(Val::as_u64)
}

/// What [`MemcpyKind::from_text`] reads from an absent or empty `kind` (a constant:
/// computing it costs a search).
const NO_KIND: MemcpyKind = MemcpyKind::Unknown(0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_kind_is_what_an_empty_kind_reads_as() {
        assert_eq!(MemcpyKind::from_text(""), NO_KIND);
    }
}
