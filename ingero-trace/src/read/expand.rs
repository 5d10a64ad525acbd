//! [`ExpandedPackets`]: a file's packets with `compressed_packets` containers replaced by the
//! packets inside them, for callers that look at raw packets themselves (e.g. the first clock
//! snapshot) instead of going through [`super::TraceReader`].

use std::io::BufRead;

use anyhow::{Context, Result, bail};

use super::PacketReader;
use super::inflate::Inflater;
use crate::proto::TracePacket;
use crate::proto::scan::{Cur, Wire};

pub struct ExpandedPackets<R> {
    inner: PacketReader<R>,
    inf: Inflater,
    outer: Vec<u8>,
    /// The unread part of the last inflated container, in `inf.buf()`.
    pos: usize,
    end: usize,
}

impl<R: BufRead> ExpandedPackets<R> {
    pub fn new(inner: R) -> Self {
        ExpandedPackets {
            inner: PacketReader::new(inner),
            inf: Inflater::default(),
            outer: Vec::new(),
            pos: 0,
            end: 0,
        }
    }

    /// True once the file ended inside a packet.
    pub fn truncated(&self) -> bool {
        self.inner.truncated()
    }

    /// The next packet's bytes into `out`; `false` at the end (clean or truncated). A corrupt
    /// container is an error naming its offset.
    pub fn next_into(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        loop {
            if self.pos < self.end {
                let mut c = Cur::new(&self.inf.buf()[self.pos..self.end]);
                let Ok(Some((num, w))) = c.field() else {
                    self.end = 0;
                    bail!(
                        "cut or malformed packet at byte {} of the container before offset {}",
                        self.pos,
                        self.inner.offset()
                    );
                };
                self.pos += c.pos();
                // Only `Trace.packet` fields carry packets, as at the top of a file.
                if let (1, Wire::Len(p)) = (num, w) {
                    out.clear();
                    out.extend_from_slice(p);
                    return Ok(true);
                }
                continue;
            }
            let start = self.inner.offset();
            if !self.inner.next_into(&mut self.outer)? {
                return Ok(false);
            }
            match compressed(&self.outer) {
                Some(z) => {
                    self.end = self
                        .inf
                        .inflate(z)
                        .with_context(|| format!("the compressed packet at offset {start}"))?;
                    self.pos = 0;
                }
                None => {
                    out.clear();
                    out.extend_from_slice(&self.outer);
                    return Ok(true);
                }
            }
        }
    }
}

/// The zlib stream of a `compressed_packets` container; `None` for a plain packet (or one
/// that does not scan, which the decoder reports).
pub(super) fn compressed(p: &[u8]) -> Option<&[u8]> {
    let mut c = Cur::new(p);
    let mut z = None;
    while let Ok(Some((num, w))) = c.field() {
        if num == TracePacket::COMPRESSED_PACKETS {
            z = Some(w.bytes());
        }
    }
    z
}
