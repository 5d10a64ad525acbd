//! A minimal, allocation-free protobuf wire-format scanner: varints, fixed-width and
//! length-delimited fields over a borrowed byte slice, unknown fields skipped.
//!
//! The reader's hot path decodes two packets per CUDA call; building prost structs for them
//! (an owned `String`/`Vec` per field) cost more than everything else together, so fields are
//! read in place and only what a record needs is copied out.

use super::varint;
use super::wire_type::{FIXED32, FIXED64, LEN, VARINT};

/// A message that is not valid protobuf. A plain unit error rather than `anyhow::Error`: the
/// scanner's results flow through every field of every packet, and a droppable error type
/// there cost measurably; callers add context when converting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed protobuf: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// What the scanner's fallible calls return.
pub type Result<T> = std::result::Result<T, Malformed>;

/// A cursor over one message's bytes.
#[derive(Clone, Copy)]
pub struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

/// One field's value as found on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire<'a> {
    /// A varint, as its unsigned value (zigzag and sign are the field type's business).
    Varint(u64),
    /// Eight little-endian bytes.
    Fixed64(u64),
    /// Four little-endian bytes.
    Fixed32(u32),
    /// A length-delimited field's bytes (a string, bytes, a message or a packed array).
    Len(&'a [u8]),
}

impl<'a> Wire<'a> {
    /// The value as an integer (varint or fixed); 0 for a length-delimited field.
    #[inline]
    pub fn int(self) -> u64 {
        match self {
            Wire::Varint(v) | Wire::Fixed64(v) => v,
            Wire::Fixed32(v) => u64::from(v),
            Wire::Len(_) => 0,
        }
    }

    /// The bytes of a length-delimited field; empty otherwise.
    #[inline]
    pub fn bytes(self) -> &'a [u8] {
        match self {
            Wire::Len(b) => b,
            _ => &[],
        }
    }
}

impl<'a> Cur<'a> {
    /// A cursor at the start of `b`, one message's bytes.
    #[inline]
    pub fn new(b: &'a [u8]) -> Self {
        Cur { b, i: 0 }
    }

    /// Bytes read so far.
    #[inline]
    pub fn pos(&self) -> usize {
        self.i
    }

    /// Whether every byte of the message has been read.
    #[inline]
    pub fn at_end(&self) -> bool {
        self.i >= self.b.len()
    }

    /// Reads one varint; an error when it runs past the message or over 10 bytes.
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64> {
        match varint::read(self.b, &mut self.i) {
            Some(v) => Ok(v),
            None => Err(self.varint_error()),
        }
    }

    /// Why the varint at the cursor could not be read.
    #[cold]
    fn varint_error(&self) -> Malformed {
        let rest = self.b.get(self.i..).unwrap_or_default();
        if rest.len() >= varint::MAX_LEN && rest[..varint::MAX_LEN].iter().all(|b| *b >= 0x80) {
            Malformed("varint longer than 10 bytes")
        } else {
            Malformed("varint runs past the end of its message")
        }
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.i.checked_add(n).filter(|e| *e <= self.b.len());
        let Some(end) = end else {
            return Err(Malformed("field runs past the end of its message"));
        };
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    /// The next field: `(field number, value)`, or `None` at the end of the message. Groups
    /// (wire types 3 and 4, unused by Perfetto) are rejected.
    #[inline(always)]
    pub fn field(&mut self) -> Result<Option<(u32, Wire<'a>)>> {
        if self.at_end() {
            return Ok(None);
        }
        let key = self.varint()?;
        let num = u32::try_from(key >> 3).unwrap_or(u32::MAX);
        let v = match (key & 7) as u8 {
            VARINT => Wire::Varint(self.varint()?),
            FIXED64 => {
                let s = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(s);
                Wire::Fixed64(u64::from_le_bytes(a))
            }
            LEN => {
                let n = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
                Wire::Len(self.take(n)?)
            }
            FIXED32 => {
                let s = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(s);
                Wire::Fixed32(u32::from_le_bytes(a))
            }
            _ => return Err(Malformed("unsupported wire type")),
        };
        Ok(Some((num, v)))
    }
}

/// Bytes as text, replacing invalid UTF-8 (the writer only writes valid UTF-8).
pub fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_wire_type_and_rejects_overruns() {
        // field 1 varint 300, field 2 fixed64 7, field 3 bytes "ab", field 4 fixed32 9.
        let msg = [
            0x08, 0xAC, 0x02, 0x11, 7, 0, 0, 0, 0, 0, 0, 0, 0x1A, 2, b'a', b'b', 0x25, 9, 0, 0, 0,
        ];
        let mut c = Cur::new(&msg);
        assert_eq!(c.field().ok().flatten(), Some((1, Wire::Varint(300))));
        assert_eq!(c.field().ok().flatten(), Some((2, Wire::Fixed64(7))));
        assert_eq!(c.field().ok().flatten(), Some((3, Wire::Len(b"ab"))));
        assert_eq!(c.field().ok().flatten(), Some((4, Wire::Fixed32(9))));
        assert!(c.field().ok().flatten().is_none());
        assert!(Cur::new(&[0x1A, 5, 1]).field().is_err(), "length past end");
        assert!(Cur::new(&[0x08, 0x80]).field().is_err(), "cut varint");
        let ten = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(
            Cur::new(&ten).field().ok().flatten(),
            Some((1, Wire::Varint(u64::MAX)))
        );
    }

    #[test]
    fn varint_errors_say_why_and_good_varints_move_the_cursor() {
        let mut eleven = vec![0xff; 10];
        eleven.push(0x01);
        assert_eq!(
            Cur::new(&eleven).varint(),
            Err(Malformed("varint longer than 10 bytes"))
        );
        assert_eq!(
            Cur::new(&[0xff, 0xff]).varint(),
            Err(Malformed("varint runs past the end of its message"))
        );
        assert_eq!(
            Cur::new(&[]).varint(),
            Err(Malformed("varint runs past the end of its message"))
        );
        for v in [0, 1, 127, 128, 16_383, 16_384, 1 << 35, u64::MAX] {
            let mut b = Vec::new();
            varint::put(&mut b, v);
            b.push(0x2a);
            let mut c = Cur::new(&b);
            assert_eq!(c.varint(), Ok(v));
            assert_eq!(c.pos(), varint::len(v), "cursor after {v}");
        }
    }
}
