//! A memo of the writer's hot packets. Before its timestamp, a slice end or a call's begin is
//! the same bytes every time its track (and arguments) repeat, and what those bytes mean
//! depends only on the interning tables and track descriptors, which change only on the
//! general path. So the fast path remembers what it decided for such bytes, keyed by the
//! bytes themselves, and the general path forgets everything whenever it runs.

use ingero_ebpf::CudaOp;

use super::plan::CudaPrep;

/// What a remembered packet does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Ends the innermost slice of track `uuid`.
    End { seq: u64, uuid: u64 },
    /// Begins a launch (entry `idx` of the launch table) on track `uuid`.
    Launch {
        seq: u64,
        uuid: u64,
        op: CudaOp,
        idx: u32,
    },
    /// Begins another CUDA call on track `uuid`, resolved as the memo's body `body`.
    Call { seq: u64, uuid: u64, body: u32 },
}

/// Up to 32 bytes as words that cover them all (overlapping at the end), with the length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key {
    len: usize,
    w: [u64; 4],
}

impl Key {
    /// The key of 8 to 32 bytes.
    #[inline(always)]
    pub(super) fn of(b: &[u8]) -> Option<Key> {
        let len = b.len();
        if !(8..=32).contains(&len) {
            return None;
        }
        let word = |at: usize| {
            b.get(at..at + 8)
                .and_then(|s| s.first_chunk::<8>())
                .map_or(0, |c| u64::from_le_bytes(*c))
        };
        let last = b.last_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c));
        let mid = if len > 16 { word(8) } else { 0 };
        let mid2 = if len > 24 { word(16) } else { 0 };
        Some(Key {
            len,
            w: [word(0), mid, mid2, last],
        })
    }

    /// Whether `b` is the bytes of this key (`Key::of(b) == Some(self)`), with two loads for
    /// keys of up to 16 bytes (slice ends).
    #[inline(always)]
    pub(super) fn matches(&self, b: &[u8]) -> bool {
        if b.len() != self.len {
            return false;
        }
        if self.len > 16 {
            return Key::of(b).as_ref() == Some(self);
        }
        match (b.first_chunk::<8>(), b.last_chunk::<8>()) {
            (Some(f), Some(l)) => {
                u64::from_le_bytes(*f) == self.w[0] && u64::from_le_bytes(*l) == self.w[3]
            }
            _ => false,
        }
    }

    #[inline(always)]
    fn slot(&self) -> usize {
        let h = self.w[0] ^ self.w[1].rotate_left(17) ^ self.w[2].rotate_left(31) ^ self.w[3];
        ((h ^ self.len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BITS)) as usize
    }
}

/// 33 to 64 bytes (the begins of calls with several arguments) as eight words, the last
/// zero-padded; the length tells the padding from zero bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LongKey {
    len: usize,
    w: [u64; 8],
}

impl LongKey {
    fn of(b: &[u8]) -> Option<LongKey> {
        let len = b.len();
        if !(33..=64).contains(&len) {
            return None;
        }
        let mut w = [0u64; 8];
        for (word, c) in w.iter_mut().zip(b.chunks(8)) {
            let mut a = [0u8; 8];
            a[..c.len()].copy_from_slice(c);
            *word = u64::from_le_bytes(a);
        }
        Some(LongKey { len, w })
    }

    fn slot(&self) -> usize {
        let h = self
            .w
            .iter()
            .fold(self.len as u64, |h, w| h.rotate_left(23) ^ w);
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - LONG_BITS)) as usize
    }
}

/// 256 entries: with 64, the launches of a two-thread recording (a few shapes per thread,
/// begin and end) collided often enough to send one packet in twenty down the layout match.
const BITS: u32 = 8;
/// Long keys are rarer (memcpy, event and stream calls with their arguments).
const LONG_BITS: u32 = 6;

/// Resolved calls kept for [`Action::Call`]; past this many (entries replaced by collisions
/// leave theirs behind) the memo starts over.
const MAX_BODIES: usize = 4 << BITS;

/// A direct-mapped table: a collision replaces the older entry.
pub(super) struct Memo {
    slots: Vec<Option<(Key, Action)>>,
    long: Vec<Option<(LongKey, Action)>>,
    bodies: Vec<CudaPrep>,
    /// Something was remembered since the last [`Memo::clear`]: a skim, whose packets all
    /// take the general path, then clears nothing (clearing the tables took a microsecond a
    /// packet).
    dirty: bool,
}

impl Default for Memo {
    fn default() -> Self {
        Memo {
            slots: vec![None; 1 << BITS],
            long: vec![None; 1 << LONG_BITS],
            bodies: Vec::new(),
            dirty: false,
        }
    }
}

impl Memo {
    /// What `rest` (a packet past its timestamp) was found to do, if remembered.
    #[inline(always)]
    pub fn get(&self, rest: &[u8]) -> Option<Action> {
        let Some(k) = Key::of(rest) else {
            return self.get_long(rest);
        };
        match self.slots.get(k.slot()) {
            Some(Some((key, a))) if *key == k => Some(*a),
            _ => None,
        }
    }

    #[inline(never)]
    fn get_long(&self, rest: &[u8]) -> Option<Action> {
        let k = LongKey::of(rest)?;
        match self.long.get(k.slot()) {
            Some(Some((key, a))) if *key == k => Some(*a),
            _ => None,
        }
    }

    #[inline(always)]
    pub fn put(&mut self, rest: &[u8], a: Action) {
        self.dirty = true;
        if let Some(k) = Key::of(rest) {
            if let Some(s) = self.slots.get_mut(k.slot()) {
                *s = Some((k, a));
            }
        } else if let Some(k) = LongKey::of(rest) {
            if let Some(s) = self.long.get_mut(k.slot()) {
                *s = Some((k, a));
            }
        }
    }

    /// Remembers that `rest` begins the call `body` on track `uuid` of sequence `seq`.
    #[inline]
    pub fn put_call(&mut self, rest: &[u8], seq: u64, uuid: u64, body: CudaPrep) {
        if self.bodies.len() >= MAX_BODIES {
            self.clear();
        }
        let Ok(idx) = u32::try_from(self.bodies.len()) else {
            return;
        };
        self.bodies.push(body);
        self.put(
            rest,
            Action::Call {
                seq,
                uuid,
                body: idx,
            },
        );
    }

    /// The resolved call of an [`Action::Call`].
    #[inline(always)]
    pub fn body(&self, idx: u32) -> Option<&CudaPrep> {
        self.bodies.get(idx as usize)
    }

    /// Forgets everything (the tables the actions were decided on may have changed).
    #[inline]
    pub fn clear(&mut self) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        self.slots.fill(None);
        self.long.fill(None);
        self.bodies.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tell_every_byte_apart() {
        let base: Vec<u8> = (0..32u8).collect();
        for len in 8..=32 {
            let k = Key::of(&base[..len]).expect("key");
            for i in 0..len {
                let mut b = base[..len].to_vec();
                b[i] ^= 0x40;
                assert_ne!(Key::of(&b), Some(k), "len {len}, byte {i}");
            }
        }
        for len in 8..=32 {
            let k = Key::of(&base[..len]).expect("key");
            assert!(k.matches(&base[..len]), "len {len}");
            assert!(!k.matches(&base[..len - 1]), "len {len}");
            for i in 0..len {
                let mut b = base[..len].to_vec();
                b[i] ^= 0x40;
                assert!(!k.matches(&b), "len {len}, byte {i}");
            }
        }
        assert_eq!(Key::of(&base[..7]), None);
        assert_eq!(Key::of(&[0; 33]), None);
        let base: Vec<u8> = (0..64u8).collect();
        for len in 33..=64 {
            let k = LongKey::of(&base[..len]).expect("long key");
            for i in 0..len {
                let mut b = base[..len].to_vec();
                b[i] ^= 0x40;
                assert_ne!(LongKey::of(&b), Some(k), "len {len}, byte {i}");
            }
        }
        // Zero padding is not a zero byte.
        assert_ne!(LongKey::of(&[0; 33]), LongKey::of(&[0; 34]));
        assert_eq!(LongKey::of(&[0; 32]), None);
        assert_eq!(LongKey::of(&[0; 65]), None);
    }

    #[test]
    fn remembers_until_cleared() {
        let mut m = Memo::default();
        let a = Action::End { seq: 1, uuid: 3 };
        let bytes = [7u8; 15];
        assert_eq!(m.get(&bytes), None);
        m.put(&bytes, a);
        assert_eq!(m.get(&bytes), Some(a));
        assert_eq!(m.get(&bytes[..14]), None);
        let long = [9u8; 40];
        let b = Action::End { seq: 2, uuid: 5 };
        m.put(&long, b);
        assert_eq!(m.get(&long), Some(b));
        assert_eq!(m.get(&long[..39]), None);
        assert_eq!(m.get(&bytes), Some(a));
        m.clear();
        assert_eq!(m.get(&bytes), None);
        assert_eq!(m.get(&long), None);
    }
}
