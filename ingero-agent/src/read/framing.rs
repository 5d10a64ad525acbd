//! Packet framing: a trace file is a sequence of `Trace.packet` fields (tag `0x0A`, varint
//! length, bytes). Read one at a time through a buffered reader; a packet cut short by the end
//! of the file (an agent killed mid-write) ends the stream without an error.

use std::io::{BufRead, ErrorKind};

use anyhow::{Context, Result, bail};

/// Upper bound on one packet: far above anything ingero writes, low enough that a corrupt
/// length cannot make the reader allocate gigabytes.
pub const MAX_PACKET: usize = 64 << 20;

pub struct PacketReader<R> {
    inner: R,
    offset: u64,
    truncated: bool,
}

impl<R: BufRead> PacketReader<R> {
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
        let buf = self.inner.fill_buf().context("reading trace")?;
        let Some(b) = buf.first().copied() else {
            return Ok(None);
        };
        self.inner.consume(1);
        Ok(Some(b))
    }

    fn varint(&mut self) -> Result<Option<u64>> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(b) = self.byte()? else {
                return Ok(None);
            };
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(Some(v));
            }
        }
        bail!("malformed varint at offset {}", self.offset)
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
                bail!("packet of {len} bytes at offset {start}: the file is corrupt");
            }
            buf.clear();
            buf.resize(len, 0);
            match self.inner.read_exact(buf) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    self.truncated = true;
                    return Ok(false);
                }
                Err(e) => return Err(e).context("reading trace"),
            }
            self.offset = start + 1 + varint_len(len as u64) + len as u64;
            // Only `Trace.packet` (field 1, length-delimited) carries packets; other
            // length-delimited top-level fields are skipped.
            if tag == 0x0A {
                return Ok(true);
            }
            if tag & 7 != 2 {
                bail!("unexpected top-level field tag {tag:#x} at offset {start}");
            }
        }
    }
}

fn varint_len(v: u64) -> u64 {
    u64::from((64 - (v | 1).leading_zeros()).div_ceil(7))
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
    fn varint_lengths() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(16_384), 3);
    }
}
