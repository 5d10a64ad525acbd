//! Packet framing: a trace file is a sequence of `Trace.packet` fields (tag `0x0A`, varint
//! length, bytes). Read one at a time through a buffered reader; a packet cut short by the end
//! of the file (an agent killed mid-write) ends the stream without an error.

use std::io::{BufRead, ErrorKind, Read};
use std::ops::Range;

use super::error::FramingError;
use crate::proto::{FRAME, varint, wire_type};

type Result<T> = std::result::Result<T, FramingError>;

/// Upper bound on one packet: far above anything ingero writes, low enough that a corrupt
/// length cannot make the reader allocate gigabytes.
pub const MAX_PACKET: usize = 64 << 20;

/// Reads a file's packets one at a time through a buffered reader, each into the caller's
/// buffer; a packet cut short by the end of the file ends the stream quietly.
pub struct PacketReader<R> {
    inner: R,
    offset: u64,
    truncated: bool,
}

impl<R: BufRead> PacketReader<R> {
    /// Reads the packets of `inner`, a whole trace file from its first byte.
    pub fn new(inner: R) -> Self {
        PacketReader {
            inner,
            offset: 0,
            truncated: false,
        }
    }

    /// Byte offset of the next packet.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// True once the stream ended inside a packet.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    fn byte(&mut self) -> Result<Option<u8>> {
        let buf = self.inner.fill_buf()?;
        let Some(b) = buf.first().copied() else {
            return Ok(None);
        };
        self.inner.consume(1);
        Ok(Some(b))
    }

    fn varint(&mut self) -> Result<Option<u64>> {
        let mut v = varint::Stepper::default();
        loop {
            let Some(b) = self.byte()? else {
                return Ok(None);
            };
            match v.step(b) {
                Ok(Some(value)) => return Ok(Some(value)),
                Ok(None) => {}
                Err(_) => {
                    return Err(FramingError::Varint {
                        offset: self.offset,
                    });
                }
            }
        }
    }

    /// The next packet's bytes into `buf`; `false` at the end (clean or truncated).
    pub fn next_into(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        loop {
            let start = self.offset;
            let Some(tag) = self.byte()? else {
                return Ok(false);
            };
            let Some(len) = self.varint()? else {
                self.truncated = true;
                return Ok(false);
            };
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > MAX_PACKET {
                return Err(FramingError::TooLarge { len, offset: start });
            }
            buf.clear();
            // Read through `take`, so the buffer grows with the bytes that arrive rather than
            // to what a (possibly corrupt) length claims.
            (&mut self.inner).take(len as u64).read_to_end(buf)?;
            if buf.len() < len {
                self.truncated = true;
                return Ok(false);
            }
            self.offset = start + 1 + varint::len(len as u64) as u64 + len as u64;
            // Only `Trace.packet` (field 1, length-delimited) carries packets; other
            // length-delimited top-level fields are skipped.
            if tag == FRAME {
                return Ok(true);
            }
            if tag & 7 != wire_type::LEN {
                return Err(FramingError::UnexpectedField { tag, offset: start });
            }
        }
    }
}

/// Bytes read from the file at a time by [`ChunkedPackets`].
const CHUNK: usize = 1 << 20;

/// The reader's fast framing: reads the file in large chunks and hands out each packet as a
/// slice of its buffer (no per-packet copy, no per-byte `BufRead` calls). Same semantics as
/// [`PacketReader`]: a packet cut short by the end of the file ends the stream quietly.
pub struct ChunkedPackets<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// File offset of `buf[pos]`.
    offset: u64,
    /// File offset of the last packet handed out (its tag).
    start: u64,
    truncated: bool,
}

impl<R: Read> ChunkedPackets<R> {
    /// Reads the packets of `inner`, a whole trace file from its first byte.
    pub fn new(inner: R) -> Self {
        ChunkedPackets {
            inner,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            eof: false,
            offset: 0,
            start: 0,
            truncated: false,
        }
    }

    /// Byte offset of the next packet.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Byte offset of the last packet returned by [`Self::next_range`] (its tag's offset).
    pub fn packet_start(&self) -> u64 {
        self.start
    }

    /// True once the stream ended inside a packet.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The buffer the ranges returned by [`Self::next_range`] index.
    pub fn buf(&self) -> &[u8] {
        &self.buf
    }

    /// Moves the unread bytes to the front and reads more, growing the buffer to hold at
    /// least `need` unread bytes.
    fn refill(&mut self, need: usize) -> Result<()> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        // Towards `need` at most doubling the bytes held: a length field is trusted only as far
        // as the file backs it (a corrupt 64 MiB one in a small file allocates no 64 MiB).
        let want = need.min(self.end.max(CHUNK / 2) * 2).max(CHUNK);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The next packet's position in [`Self::buf`]; `None` at the end (clean or truncated).
    pub fn next_range(&mut self) -> Result<Option<Range<usize>>> {
        loop {
            let avail = &self.buf[self.pos..self.end];
            let Some(&tag) = avail.first() else {
                if self.eof {
                    return Ok(None);
                }
                self.refill(1)?;
                continue;
            };
            // The length varint after the tag.
            let mut hdr = 1;
            let Some(len) = varint::read(avail, &mut hdr) else {
                if avail.len() > 1 + varint::MAX_LEN {
                    return Err(FramingError::Varint {
                        offset: self.offset,
                    });
                }
                if self.eof {
                    self.truncated = true;
                    return Ok(None);
                }
                self.refill(avail.len() + 1 + varint::MAX_LEN)?;
                continue;
            };
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > MAX_PACKET {
                return Err(FramingError::TooLarge {
                    len,
                    offset: self.offset,
                });
            }
            let total = hdr + len;
            if avail.len() < total {
                if self.eof {
                    self.truncated = true;
                    return Ok(None);
                }
                self.refill(total)?;
                continue;
            }
            let start = self.pos + hdr;
            self.pos += total;
            self.start = self.offset;
            self.offset += total as u64;
            // Only `Trace.packet` (field 1, length-delimited) carries packets; other
            // length-delimited top-level fields are skipped.
            if tag == FRAME {
                return Ok(Some(start..start + len));
            }
            if tag & 7 != wire_type::LEN {
                return Err(FramingError::UnexpectedField {
                    tag,
                    offset: self.offset - total as u64,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_packets_and_stops_quietly_on_a_cut() {
        let mut file = vec![0x0A, 3, 1, 2, 3, 0x0A, 0];
        file.extend([0x0A, 200, 1, 5, 5]); // length 200, only 3 bytes
        let mut r = PacketReader::new(&file[..]);
        let mut buf = Vec::new();
        assert!(r.next_into(&mut buf).expect("first"));
        assert_eq!(buf, [1, 2, 3]);
        assert!(r.next_into(&mut buf).expect("empty packet"));
        assert!(buf.is_empty());
        assert_eq!(r.offset(), 7);
        assert!(!r.next_into(&mut buf).expect("truncated is not an error"));
        assert!(r.truncated());
    }

    #[test]
    fn chunked_reader_matches_the_packet_reader_at_every_cut() {
        let mut file = Vec::new();
        for n in [0usize, 1, 5, 127, 128, 300, 20_000] {
            file.push(FRAME);
            varint::put(&mut file, n as u64);
            file.extend((0..n).map(|i| i as u8));
        }
        for cut in (0..file.len()).step_by(37).chain([file.len()]) {
            let bytes = &file[..cut];
            let mut a = PacketReader::new(bytes);
            let mut b = ChunkedPackets::new(bytes);
            let mut buf = Vec::new();
            loop {
                let got_a = a.next_into(&mut buf).expect("packet reader");
                let got_b = b.next_range().expect("chunked");
                assert_eq!(got_a, got_b.is_some(), "cut {cut}");
                let Some(r) = got_b else { break };
                assert_eq!(&b.buf()[r], &buf[..], "cut {cut}");
                assert_eq!(a.offset(), b.offset());
            }
            assert_eq!(a.truncated(), b.truncated(), "cut {cut}");
        }
    }
}
