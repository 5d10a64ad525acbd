//! Protobuf varints: the one encoder and decoder every part of the crate uses (the writer's
//! encoders, the chunk framing, the deflate parser, the reader's framing, scanner and fast
//! path).
//!
//! A varint is 1 to 10 bytes, 7 bits each, least significant first; every byte but the last
//! has its high bit set. Decoding accepts exactly what protobuf does: at most 10 bytes (bits
//! beyond 64 of a 10th byte are dropped, as upstream decoders do).

/// The most bytes a 64-bit varint takes.
pub const MAX_LEN: usize = 10;

/// Bytes `v` takes as a varint.
#[inline(always)]
pub fn len(v: u64) -> usize {
    ((64 - (v | 1).leading_zeros()) as usize).div_ceil(7)
}

/// Appends `v` as a varint.
#[inline(always)]
pub fn put(out: &mut Vec<u8>, v: u64) {
    put_with(v, |b| out.push(b));
}

/// Hands `v`'s varint bytes to `byte` one at a time, first to last: [`put`] for writers that
/// are not a `Vec` (the record encoder's reserved room).
#[inline(always)]
pub fn put_with(mut v: u64, mut byte: impl FnMut(u8)) {
    while v >= 0x80 {
        byte((v as u8) | 0x80);
        v >>= 7;
    }
    byte(v as u8);
}

/// The varint at `*at` in `b`, moving `*at` past it; `None` (and `*at` unchanged) when it runs
/// past the end of `b` or past [`MAX_LEN`] bytes.
#[inline(always)]
pub fn read(b: &[u8], at: &mut usize) -> Option<u64> {
    // One- and two-byte values (keys, small ids, lengths under 16 KiB, most timestamp deltas)
    // are nearly every varint the reader meets.
    let x = *b.get(*at)?;
    if x < 0x80 {
        *at += 1;
        return Some(u64::from(x));
    }
    let y = *b.get(*at + 1)?;
    if y < 0x80 {
        *at += 2;
        return Some(u64::from(x & 0x7f) | (u64::from(y) << 7));
    }
    read_long(b, at)
}

/// [`read`] for varints of three bytes or more.
#[inline(never)]
fn read_long(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for (i, x) in b.get(*at..)?.iter().take(MAX_LEN).enumerate() {
        v |= u64::from(x & 0x7f) << (7 * i);
        if *x < 0x80 {
            *at += i + 1;
            return Some(v);
        }
    }
    None
}

/// The varint at the start of `p` and the bytes after it; `None` as for [`read`]. Its slice
/// patterns check the length once for the common one- to three-byte values.
#[inline(always)]
pub fn take(p: &[u8]) -> Option<(u64, &[u8])> {
    match p {
        [x, rest @ ..] if *x < 0x80 => Some((u64::from(*x), rest)),
        [x, y, rest @ ..] if *y < 0x80 => Some((u64::from(x & 0x7f) | (u64::from(*y) << 7), rest)),
        [x, y, z, rest @ ..] if *z < 0x80 => Some((
            u64::from(x & 0x7f) | (u64::from(y & 0x7f) << 7) | (u64::from(*z) << 14),
            rest,
        )),
        _ => {
            let mut at = 0;
            let v = read_long(p, &mut at)?;
            Some((v, p.get(at..)?))
        }
    }
}

/// Moves `*at` past the varint there without computing its value; `None` as for [`read`].
#[inline(always)]
pub fn skip(b: &[u8], at: &mut usize) -> Option<()> {
    let rest = b.get(*at..)?;
    let n = rest.iter().take(MAX_LEN).position(|x| *x < 0x80)?;
    *at += n + 1;
    Some(())
}

/// Whether `b` is exactly one varint: only its last byte lacks the continuation bit.
#[inline(always)]
pub fn is_one(b: &[u8]) -> bool {
    match b {
        [] => false,
        [.., last] if *last >= 0x80 || b.len() > MAX_LEN => false,
        [head @ .., _] => head.iter().fold(0x80u8, |a, x| a & x) >= 0x80,
    }
}

/// Reads a varint one byte at a time, for sources that hand out bytes singly (the framing of a
/// file read through a buffer).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stepper {
    value: u64,
    bytes: usize,
}

/// A varint longer than [`MAX_LEN`] bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("varint longer than {MAX_LEN} bytes")]
pub struct TooLong;

impl Stepper {
    /// Adds the next byte: `Ok(Some(value))` when it ends the varint.
    #[inline]
    pub fn step(&mut self, x: u8) -> Result<Option<u64>, TooLong> {
        if self.bytes == MAX_LEN {
            return Err(TooLong);
        }
        self.value |= u64::from(x & 0x7f) << (7 * self.bytes);
        self.bytes += 1;
        Ok((x < 0x80).then_some(self.value))
    }
}

/// A message ending with the varint field whose one-byte key is `key` (the writer ends
/// every packet with its timestamp): the bytes before that field, and its value. The
/// field is found from the end, since a varint's last byte is the only one without the
/// continuation bit and a one-byte key has none either. What precedes it is not checked:
/// the reader trusts the split only once it knows those bytes in full (its memo's exact
/// bytes, or the writer's layout matched field by field), so a message that merely ends
/// in such bytes still decodes as what it is.
#[inline(always)]
pub fn split_trailing_field(p: &[u8], key: u8) -> Option<(&[u8], u64)> {
    // Most gaps between packets take two bytes (128 ns to 16 µs).
    match p {
        [head @ .., k, a, b] if *k == key && *a >= 0x80 && *b < 0x80 => {
            Some((head, u64::from(a & 0x7f) | (u64::from(*b) << 7)))
        }
        [head @ .., k, a] if *k == key && *a < 0x80 => Some((head, u64::from(*a))),
        [head @ .., k, a, b, c] if *k == key && (*a & *b) >= 0x80 && *c < 0x80 => Some((
            head,
            u64::from(a & 0x7f) | (u64::from(b & 0x7f) << 7) | (u64::from(*c) << 14),
        )),
        _ => split_trailing_field_long(p, key),
    }
}

/// [`split_trailing_field`] for varints of 4 to 10 bytes (gaps of 268 ms and more).
#[inline(never)]
fn split_trailing_field_long(p: &[u8], key: u8) -> Option<(&[u8], u64)> {
    let [.., last] = p else {
        return None;
    };
    if *last >= 0x80 {
        return None;
    }
    let cont = p
        .iter()
        .rev()
        .skip(1)
        .take(MAX_LEN - 1)
        .take_while(|b| **b >= 0x80)
        .count();
    let at = p.len().checked_sub(cont + 2)?;
    if p[at] != key {
        return None;
    }
    let mut i = at + 1;
    let value = read(p, &mut i)?;
    Some((&p[..at], value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: [u64; 12] = [
        0,
        1,
        127,
        128,
        300,
        16_383,
        16_384,
        2_097_151,
        2_097_152,
        1 << 40,
        (1 << 63) - 1,
        u64::MAX,
    ];

    #[test]
    fn every_reader_decodes_what_put_encodes() {
        for v in SAMPLES {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b.len(), len(v), "{v}");
            let mut at = 0;
            assert_eq!(read(&b, &mut at), Some(v), "{v}");
            assert_eq!(at, b.len());
            let mut tail = b.clone();
            tail.push(7);
            assert_eq!(take(&tail), Some((v, &[7][..])), "{v}");
            let mut at = 0;
            assert_eq!(skip(&b, &mut at), Some(()));
            assert_eq!(at, b.len());
            assert!(is_one(&b), "{v}");
            let mut s = Stepper::default();
            let stepped: Vec<_> = b.iter().map(|x| s.step(*x)).collect();
            assert_eq!(stepped.last(), Some(&Ok(Some(v))));
            assert!(stepped[..b.len() - 1].iter().all(|r| *r == Ok(None)));
        }
    }

    #[test]
    fn cut_and_overlong_varints_are_refused() {
        let mut at = 0;
        assert_eq!(read(&[0x80], &mut at), None);
        assert_eq!(read(&[0x80, 0x80], &mut at), None);
        assert_eq!(read(&[], &mut at), None);
        let eleven = [0xff; 11];
        assert_eq!(read(&eleven, &mut at), None);
        assert_eq!(skip(&eleven, &mut at), None);
        assert_eq!(at, 0, "nothing consumed on failure");
        assert!(!is_one(&eleven));
        assert!(!is_one(&[0x01, 0x01]), "two varints");
        assert!(!is_one(&[0x80]), "cut");
        let mut s = Stepper::default();
        assert!((0..10).all(|_| s.step(0xff) == Ok(None)));
        assert_eq!(s.step(0x01), Err(TooLong));
    }

    #[test]
    fn split_trailing_field_takes_the_trailing_timestamp_of_any_length() {
        const TIMESTAMP: u8 = 0x40;
        let with_ts = |head: &[u8], ts: u64| {
            let mut p = head.to_vec();
            p.push(TIMESTAMP);
            put(&mut p, ts);
            p
        };
        let split = |p: &[u8]| split_trailing_field(p, TIMESTAMP).map(|(h, v)| (h.to_vec(), v));
        // A head ending in bytes that look like a varint's (0x40 included) and in one
        // with the continuation bit, which cannot end a message but must not confuse the
        // split.
        for head in [
            &[0x50, 0x01, 0x90, 0x06, 0xc6, 0xa5, 0x2d][..],
            &[0x58, 0x40],
            &[0xff],
        ] {
            for ts in SAMPLES {
                let p = with_ts(head, ts);
                assert_eq!(
                    split(&p),
                    Some((head.to_vec(), ts)),
                    "head {head:x?}, ts {ts}"
                );
            }
        }
        // No trailing timestamp: the timestamp first, a cut varint, nothing at all.
        let mut first = vec![TIMESTAMP, 0x85, 0x03];
        first.extend_from_slice(&[0x50, 0x01]);
        assert_eq!(split(&first), None);
        assert_eq!(split(&[0x50, 0x01, TIMESTAMP, 0x85]), None);
        assert_eq!(split(&[TIMESTAMP]), None);
        assert_eq!(split(&[]), None);
        // Eleven varint bytes are too many.
        let mut long = vec![0x50, 0x01, TIMESTAMP];
        long.extend_from_slice(&[0xff; 10]);
        long.push(0x01);
        assert_eq!(split(&long), None);
        // Another key is not the timestamp's.
        assert_eq!(
            split_trailing_field(&[0x50, 0x01, 0x48, 0x02], TIMESTAMP),
            None
        );
    }
}
