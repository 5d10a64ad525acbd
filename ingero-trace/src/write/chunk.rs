//! The output of the current trace file: packets are encoded into an in-memory chunk, and a
//! chunk goes to the file as ONE outer packet whose only field is `compressed_packets`
//! (`TracePacket` field 50: a zlib stream of `Trace.packet` entries, which trace_processor
//! expands in place).
//!
//! A chunk is written when it reaches [`CHUNK_LIMIT`] raw bytes and on every flush (the caller
//! flushes at least once a second), so a SIGKILL loses at most the packets since the last
//! flush. A packet bigger than the limit (a huge descriptor or statistics packet) goes to the
//! file plain, after the chunk before it. With compression level 0 chunks are written plain:
//! the chunk is then just the write buffer.

use std::path::{Path, PathBuf};

use libdeflater::{CompressionLvl, Compressor};

use super::deflate::PacketDeflater;
use super::error::{Result, WriteError};
use super::files::TraceFile;
use crate::proto::keys::{COMPRESSED_PACKETS, FRAME};
use crate::proto::varint;

/// Raw bytes of packets gathered before they are compressed and written as one packet. Big
/// enough that zlib finds the repetition between calls (ratio ~7–10× on CUDA calls) and that
/// the per-chunk cost is negligible; small enough that a chunk stays in L2 while compressing.
pub const CHUNK_LIMIT: usize = 256 * 1024;

/// Room kept in front of the compressed bytes for the outer packet's header (tag, length,
/// field 50's key and length: at most 1 + 5 + 2 + 5 bytes), so a chunk is one `write`.
const HEADER_ROOM: usize = 16;

/// Highest libdeflate level.
pub const MAX_LEVEL: u32 = 12;

/// How chunks are compressed.
enum Compression {
    /// Level 1: parsed from the packets' structure (`deflate/`).
    Packets(Box<PacketDeflater>),
    /// Levels 2 to 12: libdeflate's general match search.
    Libdeflate(Compressor),
}

pub struct ChunkWriter {
    file: Option<TraceFile>,
    /// Framed packets not yet written (`Trace.packet` entries: tag 0x0A, length, bytes).
    raw: Vec<u8>,
    /// `None`: level 0, chunks are written plain.
    compressor: Option<Compression>,
    /// Compressed output, reused for every chunk; [`HEADER_ROOM`] bytes are kept in front.
    out: Vec<u8>,
    /// Chunks written so far (all files).
    chunks: u64,
    /// Raw (uncompressed) bytes of the chunks written so far (all files).
    chunk_bytes: u64,
}

impl ChunkWriter {
    /// `level`: 0 (no compression), 1 (the packet-structured encoder, fastest) or a
    /// libdeflate level 2..=12.
    pub fn new(level: u32) -> Result<ChunkWriter> {
        let compressor = match level {
            0 => None,
            1 => Some(Compression::Packets(Box::default())),
            l => {
                let lvl = i32::try_from(l)
                    .ok()
                    .and_then(|l| CompressionLvl::new(l).ok());
                match lvl {
                    Some(lvl) => Some(Compression::Libdeflate(Compressor::new(lvl))),
                    None => return Err(WriteError::CompressionLevel(level)),
                }
            }
        };
        Ok(ChunkWriter {
            file: None,
            raw: Vec::with_capacity(CHUNK_LIMIT + 64 * 1024),
            compressor,
            out: Vec::new(),
            chunks: 0,
            chunk_bytes: 0,
        })
    }

    /// Starts writing `file`. The previous file must have been closed.
    pub fn open(&mut self, file: TraceFile) {
        debug_assert!(self.file.is_none() && self.raw.is_empty());
        self.file = Some(file);
    }

    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(TraceFile::path)
    }

    /// The buffer to append framed packets to; call [`ChunkWriter::packet_done`] after each.
    #[inline(always)]
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.raw
    }

    /// The size the file will have counting the pending chunk uncompressed: what rotation
    /// compares with `max_file_size`. Counting the raw size keeps the decision independent of
    /// when chunks happen to be compressed; a compressed file therefore ends up smaller than
    /// the limit by at most the savings on its last chunk.
    #[inline(always)]
    pub fn size(&self) -> u64 {
        self.file.as_ref().map_or(0, TraceFile::bytes) + self.raw.len() as u64
    }

    /// A packet starting at `start` in [`ChunkWriter::buf`] is complete: writes the chunk when
    /// it has reached the limit.
    #[inline(always)]
    pub fn packet_done(&mut self, start: usize) -> Result<()> {
        if self.raw.len() < CHUNK_LIMIT {
            return Ok(());
        }
        self.spill(start)
    }

    #[cold]
    fn spill(&mut self, start: usize) -> Result<()> {
        if self.compressor.is_some() && self.raw.len() - start > CHUNK_LIMIT {
            // Compressing one oversized packet with the chunk would make a chunk of unbounded
            // size for the reader to inflate; plain, it is read like any other packet.
            self.write_chunk(start)?;
            // Written: a failure below must not write it again on the next attempt.
            self.raw.drain(..start);
            let file = self.file.as_mut().ok_or(WriteError::NoFile)?;
            file.write_all(&self.raw)?;
            self.raw.clear();
            return Ok(());
        }
        self.flush_chunk()
    }

    /// Chunks written so far.
    pub fn chunks_written(&self) -> u64 {
        self.chunks
    }

    /// Whether the next packet is the first of a chunk (nothing is pending).
    #[inline(always)]
    pub fn at_chunk_head(&self) -> bool {
        self.raw.is_empty()
    }

    /// Raw bytes of the chunks written so far.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }

    /// Whether packets are gathered into compressed chunks (any level but 0).
    pub fn compressed(&self) -> bool {
        self.compressor.is_some()
    }

    /// The packet at `buf()[start..]` goes to the file now, ahead of the pending chunk (whose
    /// packets stay in order among themselves): for packets that must not wait for a chunk.
    pub fn write_plain(&mut self, start: usize) -> Result<()> {
        let file = self.file.as_mut().ok_or(WriteError::NoFile)?;
        let res = file.write_all(&self.raw[start..]);
        self.raw.truncate(start);
        res
    }

    /// Writes the pending chunk (compressed unless level 0).
    pub fn flush_chunk(&mut self) -> Result<()> {
        let n = self.raw.len();
        self.write_chunk(n)?;
        self.raw.clear();
        Ok(())
    }

    /// Writes `raw[..end]` as one chunk; the caller clears `raw`.
    fn write_chunk(&mut self, end: usize) -> Result<()> {
        if end == 0 {
            return Ok(());
        }
        self.chunks += 1;
        self.chunk_bytes += end as u64;
        let file = self.file.as_mut().ok_or(WriteError::NoFile)?;
        let clen = match self.compressor.as_mut() {
            None => return file.write_all(&self.raw[..end]),
            Some(Compression::Packets(z)) => {
                self.out.resize(HEADER_ROOM, 0);
                z.zlib(&self.raw[..end], &mut self.out);
                self.out.len() - HEADER_ROOM
            }
            Some(Compression::Libdeflate(c)) => {
                let bound = c.zlib_compress_bound(end);
                self.out.resize(HEADER_ROOM + bound, 0);
                c.zlib_compress(&self.raw[..end], &mut self.out[HEADER_ROOM..])
                    .map_err(WriteError::Compress)?
            }
        };
        let field_len = COMPRESSED_PACKETS.len() + varint::len(clen as u64) + clen;
        let mut header = Vec::with_capacity(HEADER_ROOM);
        header.push(FRAME);
        varint::put(&mut header, field_len as u64);
        header.extend_from_slice(&COMPRESSED_PACKETS);
        varint::put(&mut header, clen as u64);
        let at = HEADER_ROOM - header.len();
        self.out[at..HEADER_ROOM].copy_from_slice(&header);
        file.write_all(&self.out[at..HEADER_ROOM + clen])
    }

    /// Writes the pending chunk and hands everything to the kernel: after this a SIGKILL
    /// loses nothing written so far.
    pub fn flush(&mut self) -> Result<()> {
        self.flush_chunk()?;
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }

    /// Writes the pending chunk and closes the file: its path and size, if one was open.
    pub fn close(&mut self) -> Result<Option<(PathBuf, u64)>> {
        self.flush_chunk()?;
        match self.file.take() {
            Some(f) => {
                let bytes = f.bytes();
                Ok(Some((f.close()?, bytes)))
            }
            None => Ok(None),
        }
    }
}

impl Drop for ChunkWriter {
    /// A recorder dropped without `finish` (an error on the way out) still writes what it
    /// holds, as the buffered writer before it did; errors have nowhere to go here.
    fn drop(&mut self) {
        // A panic may have stopped in the middle of a packet: better lose the chunk than end
        // the file with a corrupt one.
        if self.file.is_some() && !std::thread::panicking() {
            let _ = self.flush_chunk();
        }
    }
}
