//! `TracePacket.compressed_packets` (field 50): a zlib stream of `Trace.packet` entries,
//! inflated with libdeflate into one reused buffer.
//!
//! libdeflate needs the whole output in one buffer and does not say how large it must be, so
//! the buffer starts at the writer's usual chunk size with room to spare and doubles on
//! `InsufficientSpace` up to [`MAX_PACKET`]; it keeps its size for the next chunk.

use libdeflater::{DecompressionError, Decompressor};

use super::error::InflateError;
use super::framing::MAX_PACKET;

/// First output buffer size: the writer's chunks inflate to ~256 KiB.
const INITIAL: usize = 1 << 20;

pub struct Inflater {
    d: Decompressor,
    buf: Vec<u8>,
}

impl Default for Inflater {
    fn default() -> Self {
        Inflater {
            d: Decompressor::new(),
            buf: Vec::new(),
        }
    }
}

impl Inflater {
    /// Inflates `src` and returns the length of the output in [`Self::buf`].
    pub fn inflate(&mut self, src: &[u8]) -> Result<usize, InflateError> {
        if self.buf.is_empty() {
            self.buf.resize(INITIAL, 0);
        }
        loop {
            match self.d.zlib_decompress(src, &mut self.buf) {
                Ok(n) => return Ok(n),
                Err(DecompressionError::BadData) => return Err(InflateError::Corrupt),
                Err(DecompressionError::InsufficientSpace) => {
                    if self.buf.len() >= MAX_PACKET {
                        return Err(InflateError::TooLarge { limit: MAX_PACKET });
                    }
                    let next = (self.buf.len() * 2).min(MAX_PACKET);
                    self.buf.resize(next, 0);
                }
            }
        }
    }

    /// The output buffer; the last inflated chunk is its first `n` bytes.
    pub fn buf(&self) -> &[u8] {
        &self.buf
    }

    /// Puts `buf` in place of the output buffer (which it returns): a chunk inflated
    /// elsewhere becomes the last inflated chunk, or this one is handed over. An empty
    /// buffer is sized on the next [`Self::inflate`].
    pub fn swap_buf(&mut self, buf: Vec<u8>) -> Vec<u8> {
        std::mem::replace(&mut self.buf, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libdeflater::{CompressionLvl, Compressor};

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut c = Compressor::new(CompressionLvl::fastest());
        let mut out = vec![0; c.zlib_compress_bound(data.len())];
        let n = c.zlib_compress(data, &mut out).expect("compress");
        out.truncate(n);
        out
    }

    #[test]
    fn grows_the_buffer_and_rejects_garbage() {
        let big: Vec<u8> = (0..3 * INITIAL).map(|i| (i % 251) as u8).collect();
        let mut inf = Inflater::default();
        let n = inf.inflate(&zlib(&big)).expect("inflate");
        assert_eq!(&inf.buf()[..n], &big[..]);
        let n = inf.inflate(&zlib(b"small")).expect("inflate again");
        assert_eq!(&inf.buf()[..n], b"small");
        let mut bad = zlib(&big);
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        assert_eq!(inf.inflate(&bad), Err(InflateError::Corrupt));
        assert_eq!(inf.inflate(b"not zlib"), Err(InflateError::Corrupt));
    }
}
