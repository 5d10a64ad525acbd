//! The LZ77 parse of a chunk of framed packets (`0x0A len payload`, as the writer gathers
//! them), made from what a packet is rather than by searching: a packet whose bytes before its
//! trailing timestamp were written before (the same call on the same thread) is one copy of
//! them plus the timestamp as literals; any other packet is compared byte by byte with the
//! last packet of the same shape (frame and first two bytes), runs of 3 or more equal bytes
//! becoming copies. Bytes that are not framed packets are literals.

use std::hash::Hasher;

use super::block::{MAX_DIST, MIN_MATCH, Tokens};
use crate::fast_map::FastHasher;
use crate::proto::keys::{FRAME, TIMESTAMP};
use crate::proto::varint;

/// Entries of the table of packets by their bytes before the timestamp.
const EXACT_BITS: u32 = 12;
/// Entries of the table of packets by shape.
const SHAPE_BITS: u32 = 10;
const NONE: u32 = u32::MAX;

/// Reusable tables; positions are into the chunk being parsed.
pub struct Parser {
    /// (start, length of the key) of the last packet with a key of this hash.
    exact: Vec<(u32, u32)>,
    /// Start of the last packet of this shape.
    shape: Vec<u32>,
}

impl Default for Parser {
    fn default() -> Self {
        Parser {
            exact: vec![(NONE, 0); 1 << EXACT_BITS],
            shape: vec![NONE; 1 << SHAPE_BITS],
        }
    }
}

/// A packet's frame at `at`: the payload's range. `None` unless a `0x0A` tag and a length
/// varint that fits in `plain`.
#[inline(always)]
fn frame(plain: &[u8], at: usize) -> Option<(usize, usize)> {
    match plain.get(at..at + 2)? {
        // Packets under 128 bytes: nearly all of them.
        [FRAME, len] if *len < 0x80 => {
            let end = at + 2 + usize::from(*len);
            (end <= plain.len()).then_some((at + 2, end))
        }
        [FRAME, _] => frame_long(plain, at),
        _ => None,
    }
}

#[inline(never)]
fn frame_long(plain: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut i = at + 1;
    let len = usize::try_from(varint::read(plain, &mut i)?).ok()?;
    let end = i.checked_add(len)?;
    (end <= plain.len()).then_some((i, end))
}

/// The little-endian word at `at`, zero-padded past the end of `b`.
#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(w) => w.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c)),
        None => {
            let mut w = [0u8; 8];
            let rest = b.get(at..).unwrap_or_default();
            w[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(w)
        }
    }
}

/// The top `bits` bits of the interner's hash of `b`, fed a word at a time.
#[inline(always)]
fn hash_bytes(b: &[u8], bits: u32) -> usize {
    let mut h = FastHasher::default();
    h.write_usize(b.len());
    let mut at = 0;
    while at < b.len() {
        h.write_u64(word(b, at));
        at += 8;
    }
    (h.finish() >> (64 - bits)) as usize
}

/// Whether the `n` bytes at `a` and at `b` are equal (a word at a time).
#[inline(always)]
fn same(plain: &[u8], a: usize, b: usize, n: usize) -> bool {
    let (Some(x), Some(y)) = (plain.get(a..a + n), plain.get(b..b + n)) else {
        return false;
    };
    if n < 8 {
        return x == y;
    }
    let mut i = 0;
    while i + 8 < n {
        if word(x, i) != word(y, i) {
            return false;
        }
        i += 8;
    }
    // The last word, overlapping the one before.
    word(x, n - 8) == word(y, n - 8)
}

/// How many bytes from `a` on equal those from `b` on, up to `n`.
#[inline(always)]
fn common(plain: &[u8], a: usize, b: usize, n: usize) -> usize {
    let x = &plain[a..a + n];
    let y = &plain[b..b + n];
    let mut i = 0;
    while i + 8 <= n {
        let d = word(x, i) ^ word(y, i);
        if d != 0 {
            return i + (d.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + x[i..]
        .iter()
        .zip(&y[i..])
        .take_while(|(p, q)| p == q)
        .count()
}

impl Parser {
    /// Parses `plain` into `t` (cleared first).
    pub fn parse(&mut self, plain: &[u8], t: &mut Tokens) {
        t.clear();
        // At most one token per byte: no reallocation while parsing.
        t.list.reserve(plain.len());
        if plain.len() >= NONE as usize {
            // Positions would not fit the tables (chunks are far smaller than this).
            for b in plain {
                t.literal(*b);
            }
            return;
        }
        self.exact.fill((NONE, 0));
        self.shape.fill(NONE);
        let mut at = 0;
        while at < plain.len() {
            let Some((body, end)) = frame(plain, at) else {
                for b in &plain[at..] {
                    t.literal(*b);
                }
                return;
            };
            // The key: the packet up to its timestamp field's key byte, if it ends with one.
            let key_end = varint::split_trailing_field(&plain[body..end], TIMESTAMP)
                .map_or(end, |(head, _)| body + head.len() + 1);
            let key = &plain[at..key_end];
            let h = hash_bytes(key, EXACT_BITS);
            let (prev, prev_len) = self.exact[h];
            // The frame and the first two bytes (sequence id) in one word.
            let shape_slot = ((word(&plain[..end], at) & 0xFFFF_FFFF)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                >> (64 - SHAPE_BITS)) as usize;
            let shaped = self.shape[shape_slot];
            if prev != NONE
                && prev_len as usize == key.len()
                && at - prev as usize <= MAX_DIST
                && key.len() >= MIN_MATCH
                && same(plain, prev as usize, at, key.len())
            {
                t.copy(key.len(), at - prev as usize);
                for b in &plain[key_end..end] {
                    t.literal(*b);
                }
            } else if shaped != NONE && at - shaped as usize <= MAX_DIST {
                self.diff(plain, at, end, shaped as usize, t);
            } else {
                for b in &plain[at..end] {
                    t.literal(*b);
                }
            }
            self.exact[h] = (at as u32, key.len() as u32);
            self.shape[shape_slot] = at as u32;
            at = end;
        }
    }

    /// `plain[at..end]` as copies from `reference` on (the same offsets, so one distance)
    /// where at least 3 bytes agree, literals elsewhere.
    fn diff(&self, plain: &[u8], at: usize, end: usize, reference: usize, t: &mut Tokens) {
        let dist = at - reference;
        let mut i = at;
        while i < end {
            let run = common(plain, i, i - dist, end - i);
            if run >= MIN_MATCH {
                t.copy(run, dist);
                i += run;
            } else {
                t.literal(plain[i]);
                i += 1;
            }
        }
    }
}
