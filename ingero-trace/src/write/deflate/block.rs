//! One DEFLATE block with dynamic Huffman codes (RFC 1951 §3.2.7) from a parsed token stream:
//! literal bytes and (length, distance) copies.

use super::huffman::{Lengths, canonical};

/// Literal/length alphabet (0–255 literals, 256 end of block, 257–285 lengths).
pub const LITLEN_SYMS: usize = 286;
pub const DIST_SYMS: usize = 30;
const END_OF_BLOCK: usize = 256;

pub const MIN_MATCH: usize = 3;
pub const MAX_MATCH: usize = 258;
pub const MAX_DIST: usize = 32_768;

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// The length code (index into `LEN_BASE`) of each match length 0..=258.
const LEN_CODE: [u8; MAX_MATCH + 1] = {
    let mut t = [0u8; MAX_MATCH + 1];
    let mut code = 0;
    let mut len = MIN_MATCH;
    while len <= MAX_MATCH {
        if code + 1 < LEN_BASE.len() && len >= LEN_BASE[code + 1] as usize {
            code += 1;
        }
        t[len] = code as u8;
        len += 1;
    }
    t
};

/// The distance code of `dist` (1..=32768).
#[inline(always)]
fn dist_code(dist: usize) -> usize {
    let d = dist - 1;
    if d < 4 {
        return d;
    }
    let log = (usize::BITS - 1 - d.leading_zeros()) as usize;
    2 * log + ((d >> (log - 1)) & 1)
}

/// A token: a literal byte, or a copy of `len` bytes from `dist` back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token(u32);

const MATCH_FLAG: u32 = 1 << 31;

impl Token {
    #[inline(always)]
    pub fn literal(b: u8) -> Token {
        Token(u32::from(b))
    }

    /// `len` in 3..=258, `dist` in 1..=32768.
    #[inline(always)]
    pub fn copy(len: usize, dist: usize) -> Token {
        debug_assert!((MIN_MATCH..=MAX_MATCH).contains(&len) && (1..=MAX_DIST).contains(&dist));
        Token(MATCH_FLAG | ((len as u32) << 16) | (dist as u32 - 1))
    }
}

/// Tokens of one block with their symbol counts.
pub struct Tokens {
    pub list: Vec<Token>,
    litlen: [u32; LITLEN_SYMS],
    dist: [u32; DIST_SYMS],
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens {
            list: Vec::new(),
            litlen: [0; LITLEN_SYMS],
            dist: [0; DIST_SYMS],
        }
    }
}

impl Tokens {
    pub fn clear(&mut self) {
        self.list.clear();
        self.litlen.fill(0);
        self.dist.fill(0);
    }

    #[inline(always)]
    pub fn literal(&mut self, b: u8) {
        self.litlen[usize::from(b)] += 1;
        self.list.push(Token::literal(b));
    }

    /// A copy of `len` bytes (any length from 3) from `dist` back, split at 258.
    #[inline(always)]
    pub fn copy(&mut self, mut len: usize, dist: usize) {
        while len > 0 {
            // Leave no piece shorter than a match can be.
            let piece = if len > MAX_MATCH && len - MAX_MATCH < MIN_MATCH {
                len - MIN_MATCH
            } else {
                len.min(MAX_MATCH)
            };
            self.litlen[257 + usize::from(LEN_CODE[piece])] += 1;
            self.dist[dist_code(dist)] += 1;
            self.list.push(Token::copy(piece, dist));
            len -= piece;
        }
    }
}

/// An output of bits, least significant first (RFC 1951 §3.1.1).
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits<'_> {
    /// `bits` ≤ 32 bits of `v`.
    #[inline(always)]
    fn put(&mut self, v: u32, bits: u32) {
        debug_assert!(bits <= 32 && u64::from(v) < 1 << bits);
        self.acc |= u64::from(v) << self.n;
        self.n += bits;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    fn finish(mut self) {
        while self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
    }
}

/// Order in which the code length code's lengths are sent.
const CLEN_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Reusable working memory for [`Block::write`].
pub struct Block {
    lengths: Lengths,
    /// The code lengths of both alphabets in sequence, and run-length coded: (symbol 0–18,
    /// extra bits' value).
    seq: Vec<u8>,
    rle: Vec<(u8, u8)>,
    /// Each match length's code and extra bits as one value: (bits, count).
    len_bits: [(u32, u32); MAX_MATCH + 1],
}

impl Default for Block {
    fn default() -> Self {
        Block {
            lengths: Lengths::default(),
            seq: Vec::new(),
            rle: Vec::new(),
            len_bits: [(0, 0); MAX_MATCH + 1],
        }
    }
}

/// Makes sure at least two symbols are used, so the code is complete (one symbol alone would
/// get an incomplete one-bit code, which not every decoder accepts).
fn two_used(freqs: &mut [u32]) {
    let mut used = freqs.iter().filter(|f| **f > 0).count();
    for f in freqs.iter_mut() {
        if used >= 2 {
            break;
        }
        if *f == 0 {
            *f = 1;
            used += 1;
        }
    }
}

impl Block {
    /// Appends `t` as one final dynamic-Huffman block to `out` (which must end on a byte
    /// boundary: the block is the whole DEFLATE stream).
    pub fn write(&mut self, t: &mut Tokens, out: &mut Vec<u8>) {
        t.litlen[END_OF_BLOCK] += 1;
        two_used(&mut t.litlen);
        two_used(&mut t.dist);
        let mut ll_lens = [0u8; LITLEN_SYMS];
        let mut d_lens = [0u8; DIST_SYMS];
        self.lengths.build(&t.litlen, 15, &mut ll_lens);
        self.lengths.build(&t.dist, 15, &mut d_lens);
        let hlit = ll_lens
            .iter()
            .rposition(|l| *l > 0)
            .map_or(257, |i| (i + 1).max(257));
        let hdist = d_lens.iter().rposition(|l| *l > 0).map_or(1, |i| i + 1);

        // The two length sequences as one, run-length coded (§3.2.7).
        self.rle.clear();
        self.seq.clear();
        self.seq.extend_from_slice(&ll_lens[..hlit]);
        self.seq.extend_from_slice(&d_lens[..hdist]);
        let all = &self.seq;
        let mut i = 0;
        while i < all.len() {
            let v = all[i];
            let run = all[i..].iter().take_while(|x| **x == v).count();
            if v == 0 {
                let mut r = run;
                while r >= 11 {
                    let k = r.min(138);
                    self.rle.push((18, (k - 11) as u8));
                    r -= k;
                }
                if r >= 3 {
                    self.rle.push((17, (r - 3) as u8));
                    r = 0;
                }
                for _ in 0..r {
                    self.rle.push((0, 0));
                }
            } else {
                self.rle.push((v, 0));
                let mut r = run - 1;
                while r >= 3 {
                    let k = r.min(6);
                    self.rle.push((16, (k - 3) as u8));
                    r -= k;
                }
                for _ in 0..r {
                    self.rle.push((v, 0));
                }
            }
            i += run;
        }
        let mut c_freqs = [0u32; 19];
        for (s, _) in &self.rle {
            c_freqs[usize::from(*s)] += 1;
        }
        two_used(&mut c_freqs);
        let mut c_lens = [0u8; 19];
        self.lengths.build(&c_freqs, 7, &mut c_lens);
        let hclen = CLEN_ORDER
            .iter()
            .rposition(|s| c_lens[*s] > 0)
            .map_or(4, |i| (i + 1).max(4));

        let mut ll_codes = [0u16; LITLEN_SYMS];
        let mut d_codes = [0u16; DIST_SYMS];
        let mut c_codes = [0u16; 19];
        canonical(&ll_lens, &mut ll_codes);
        canonical(&d_lens, &mut d_codes);
        canonical(&c_lens, &mut c_codes);

        // Each length with its extra bits, as one value to write: (bits, count).
        for (len, e) in self.len_bits.iter_mut().enumerate().skip(MIN_MATCH) {
            let lc = usize::from(LEN_CODE[len]);
            let (code, n) = (u32::from(ll_codes[257 + lc]), u32::from(ll_lens[257 + lc]));
            let extra = (len - usize::from(LEN_BASE[lc])) as u32;
            *e = (code | extra << n, n + u32::from(LEN_EXTRA[lc]));
        }
        // Room for every token at its longest (15 + 5 + 15 + 13 bits): no reallocation below.
        out.reserve(t.list.len() * 6 + 512);
        let mut b = Bits { out, acc: 0, n: 0 };
        b.put(1, 1); // BFINAL
        b.put(2, 2); // BTYPE: dynamic Huffman
        b.put((hlit - 257) as u32, 5);
        b.put((hdist - 1) as u32, 5);
        b.put((hclen - 4) as u32, 4);
        for s in &CLEN_ORDER[..hclen] {
            b.put(u32::from(c_lens[*s]), 3);
        }
        for (s, extra) in &self.rle {
            let s = usize::from(*s);
            b.put(u32::from(c_codes[s]), u32::from(c_lens[s]));
            match s {
                16 => b.put(u32::from(*extra), 2),
                17 => b.put(u32::from(*extra), 3),
                18 => b.put(u32::from(*extra), 7),
                _ => {}
            }
        }
        for tok in &t.list {
            let v = tok.0;
            if v & MATCH_FLAG == 0 {
                let s = v as usize;
                b.put(u32::from(ll_codes[s]), u32::from(ll_lens[s]));
                continue;
            }
            let len = ((v >> 16) & 0x1ff) as usize;
            let dist = (v & 0xffff) as usize + 1;
            let (lv, ln) = self.len_bits[len];
            b.put(lv, ln);
            let dc = dist_code(dist);
            let n = u32::from(d_lens[dc]);
            let extra = (dist - usize::from(DIST_BASE[dc])) as u32;
            b.put(
                u32::from(d_codes[dc]) | extra << n,
                n + u32::from(DIST_EXTRA[dc]),
            );
        }
        b.put(
            u32::from(ll_codes[END_OF_BLOCK]),
            u32::from(ll_lens[END_OF_BLOCK]),
        );
        b.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_distance_codes_match_the_rfc_tables() {
        for (len, c) in LEN_CODE.iter().enumerate().skip(MIN_MATCH) {
            let c = usize::from(*c);
            let base = usize::from(LEN_BASE[c]);
            assert!(len >= base && len - base < 1 << LEN_EXTRA[c], "len {len}");
        }
        assert_eq!(LEN_CODE[258], 28);
        assert_eq!(LEN_CODE[257], 27);
        for dist in 1..=MAX_DIST {
            let c = dist_code(dist);
            let base = usize::from(DIST_BASE[c]);
            assert!(
                dist >= base && dist - base < 1 << DIST_EXTRA[c],
                "dist {dist}"
            );
        }
    }
}
