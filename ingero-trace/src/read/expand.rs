//! [`ExpandedPackets`]: a file's packets with `compressed_packets` containers replaced by the
//! packets inside them, for callers that look at raw packets themselves (e.g. the first clock
//! snapshot) instead of going through [`super::TraceReader`].

use std::io::BufRead;

use super::PacketReader;
use super::error::{FramingError, LossReason};
use super::inflate::Inflater;
use crate::proto::scan::{Cur, Wire};
use crate::proto::{Trace, TracePacket};

/// Streams a file's packets with each `compressed_packets` container replaced by the packets
/// inside it, in order.
pub struct ExpandedPackets<R> {
    inner: PacketReader<R>,
    inf: Inflater,
    outer: Vec<u8>,
    /// The unread part of the last inflated container, in `inf.buf()`.
    pos: usize,
    end: usize,
    /// File offset of the last container.
    container: u64,
}

/// Why [`ExpandedPackets`] could not go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// The file's own framing is broken.
    #[error(transparent)]
    Framing(#[from] FramingError),
    /// A container could not be expanded.
    #[error("the compressed packet at offset {offset}: {reason}")]
    Container {
        /// File offset of the container.
        offset: u64,
        /// Why it could not be read.
        reason: LossReason,
    },
}

impl<R: BufRead> ExpandedPackets<R> {
    /// Expands the packets of `inner`, a whole trace file from its first byte.
    pub fn new(inner: R) -> Self {
        ExpandedPackets {
            inner: PacketReader::new(inner),
            inf: Inflater::default(),
            outer: Vec::new(),
            pos: 0,
            end: 0,
            container: 0,
        }
    }

    /// True once the file ended inside a packet.
    pub fn truncated(&self) -> bool {
        self.inner.truncated()
    }

    /// The next packet's bytes into `out`; `false` at the end (clean or truncated). A corrupt
    /// container is an error naming its offset.
    pub fn next_into(&mut self, out: &mut Vec<u8>) -> Result<bool, ExpandError> {
        loop {
            if self.pos < self.end {
                let mut c = Cur::new(&self.inf.buf()[self.pos..self.end]);
                let Ok(Some((num, w))) = c.field() else {
                    self.end = 0;
                    return Err(ExpandError::Container {
                        offset: self.container,
                        reason: LossReason::CutInnerPacket { at: self.pos },
                    });
                };
                self.pos += c.pos();
                // Only `Trace.packet` fields carry packets, as at the top of a file.
                if let (Trace::PACKET, Wire::Len(p)) = (num, w) {
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
                    self.container = start;
                    self.end = self.inf.inflate(z).map_err(|e| ExpandError::Container {
                        offset: start,
                        reason: LossReason::Inflate(e),
                    })?;
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
