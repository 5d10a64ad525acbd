//! Packet framing: a trace file is a sequence of `Trace.packet` fields (tag `0x0A`, varint
//! length, bytes). Read one at a time through a buffered reader; a packet cut short by the end
//! of the file (an agent killed mid-write) ends the stream without an error.

use std::io::{BufRead, ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;

use super::error::FramingError;
use crate::proto::keys::COMPRESSED_PACKETS;
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

/// Bytes read after a seek while skimming ([`ChunkedPackets::next_plain_range`]): enough for
/// the plain packets the writer puts between two chunks and the next chunk's header, whose
/// body is then skipped with a seek instead of being read. Each further read without a seek
/// between takes twice as much, up to [`CHUNK`] (a file of plain packets is read in large
/// reads).
const SKIM_READ: usize = 4 << 10;

/// What the framing found next.
enum Framed {
    Packet(Range<usize>),
    End,
    /// A container whose body is not in the buffer: this many bytes of it are still to skip.
    Skip(u64),
}

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
    /// Reads stay small: containers are being skipped.
    skimming: bool,
    /// The size of the next read while skimming.
    skim_read: usize,
    /// Containers starting before this offset are skipped (while skimming).
    skip_before: u64,
    /// Containers skipped unread.
    skipped: u64,
    /// The file's length as last measured (skipping checks a container's end against it).
    len: u64,
}

impl<R: Read> ChunkedPackets<R> {
    /// Reads the packets of `inner`, a whole trace file from its first byte.
    pub fn new(inner: R) -> Self {
        Self::new_at(inner, 0)
    }

    /// Reads the packets of `inner`, positioned at file offset `offset` (a packet's start).
    pub fn new_at(inner: R, offset: u64) -> Self {
        ChunkedPackets {
            inner,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            eof: false,
            offset,
            start: offset,
            truncated: false,
            skimming: false,
            skim_read: SKIM_READ,
            skip_before: 0,
            skipped: 0,
            len: 0,
        }
    }

    /// Containers [`Self::next_plain_range`] skipped so far.
    pub fn containers_skipped(&self) -> u64 {
        self.skipped
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
        let stop = if self.skimming {
            let read = self.skim_read;
            self.skim_read = (read * 2).min(CHUNK);
            need.max(self.end + read).min(self.buf.len())
        } else {
            self.buf.len()
        };
        loop {
            match self.inner.read(&mut self.buf[self.end..stop]) {
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
        self.skimming = false;
        match self.frame(false)? {
            Framed::Packet(r) => Ok(Some(r)),
            // Only asked to skip when `skip` is set.
            Framed::End | Framed::Skip(_) => Ok(None),
        }
    }

    /// The next packet, or with `skip`, the next one that is not a `compressed_packets`
    /// container (the writer's containers hold that field first; a container cut short by
    /// the end of the file ends the stream as a truncated packet does).
    fn frame(&mut self, skip: bool) -> Result<Framed> {
        loop {
            let avail = &self.buf[self.pos..self.end];
            let Some(&tag) = avail.first() else {
                if self.eof {
                    return Ok(Framed::End);
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
                    return Ok(Framed::End);
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
            if skip
                && tag == FRAME
                && len >= COMPRESSED_PACKETS.len()
                && self.offset < self.skip_before
            {
                let Some(key) = avail.get(hdr..hdr + COMPRESSED_PACKETS.len()) else {
                    if self.eof {
                        self.truncated = true;
                        return Ok(Framed::End);
                    }
                    self.refill(hdr + COMPRESSED_PACKETS.len())?;
                    continue;
                };
                if key == COMPRESSED_PACKETS {
                    self.skipped += 1;
                    self.start = self.offset;
                    self.offset += total as u64;
                    if avail.len() >= total {
                        self.pos += total;
                        continue;
                    }
                    let rest = (total - avail.len()) as u64;
                    self.pos = self.end;
                    return Ok(Framed::Skip(rest));
                }
            }
            if avail.len() < total {
                if self.eof {
                    self.truncated = true;
                    return Ok(Framed::End);
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
                return Ok(Framed::Packet(start..start + len));
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

impl<R: Read + Seek> ChunkedPackets<R> {
    /// The next packet that is not a `compressed_packets` container starting before file
    /// offset `skip_before`, the containers before it skipped with a seek, unread
    /// ([`Self::containers_skipped`] counts them); `None` at the end (clean or truncated).
    /// Reads stay small meanwhile: a skim of a file costs its plain packets, not its chunks.
    pub fn next_plain_range(&mut self, skip_before: u64) -> Result<Option<Range<usize>>> {
        self.skimming = true;
        self.skip_before = skip_before;
        loop {
            match self.frame(true)? {
                Framed::Packet(r) => return Ok(Some(r)),
                Framed::End => return Ok(None),
                Framed::Skip(rest) => {
                    if !self.seek_past(rest)? {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Moves the file `rest` bytes on, to [`Self::offset`], past a container the buffer held
    /// only the start of; `false` (truncated) when the file ends before.
    fn seek_past(&mut self, rest: u64) -> Result<bool> {
        let target = self.offset;
        if target > self.len {
            // Measured again only when a container seems to reach past it (the file grows
            // while it is written).
            let here = self.inner.stream_position()?;
            self.len = self.inner.seek(SeekFrom::End(0))?;
            self.inner.seek(SeekFrom::Start(here))?;
        }
        if target > self.len {
            self.truncated = true;
            self.eof = true;
            return Ok(false);
        }
        let delta = i64::try_from(rest).unwrap_or(i64::MAX);
        self.inner.seek(SeekFrom::Current(delta))?;
        self.skim_read = SKIM_READ;
        self.pos = 0;
        self.end = 0;
        self.eof = false;
        Ok(true)
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
    fn skimming_skips_containers_unread_and_cuts_as_reading_does() {
        // Plain packets and containers (field 50 first) of every size around the skim's
        // small reads, one container holding field 50 after another field (framed as a plain
        // packet: only the writer's layout is recognised).
        let mut file = Vec::new();
        let mut plain = Vec::new();
        let mut containers = 0;
        let packet = |file: &mut Vec<u8>, body: &[u8]| {
            file.push(FRAME);
            varint::put(file, body.len() as u64);
            file.extend_from_slice(body);
        };
        for (i, n) in [3usize, 10, 5000, 1, 70_000, 200, 4095, 4096, 9000, 0]
            .iter()
            .enumerate()
        {
            let mut c = COMPRESSED_PACKETS.to_vec();
            varint::put(&mut c, *n as u64);
            c.extend((0..*n).map(|k| k as u8));
            packet(&mut file, &c);
            containers += 1;
            let p: Vec<u8> = vec![0x40, i as u8, 0x52, 1, 7];
            packet(&mut file, &p);
            plain.push(p);
        }
        let mut odd = vec![0x40, 1];
        odd.extend_from_slice(&COMPRESSED_PACKETS);
        odd.extend([2, 9, 9]);
        packet(&mut file, &odd);
        plain.push(odd);
        for cut in (0..file.len()).step_by(97).chain([file.len()]) {
            let bytes = &file[..cut];
            let mut whole = ChunkedPackets::new(bytes);
            let mut skim = ChunkedPackets::new(std::io::Cursor::new(bytes));
            let mut want = Vec::new();
            while let Some(r) = whole.next_range().expect("read") {
                let p = &whole.buf()[r];
                if !p.starts_with(&COMPRESSED_PACKETS) {
                    want.push(p.to_vec());
                }
            }
            let mut got = Vec::new();
            while let Some(r) = skim.next_plain_range(u64::MAX).expect("skim") {
                got.push(skim.buf()[r].to_vec());
            }
            assert_eq!(got, want, "cut {cut}");
            assert_eq!(skim.truncated(), whole.truncated(), "cut {cut}");
            if cut == file.len() {
                assert_eq!(got, plain);
                assert_eq!(skim.containers_skipped(), containers);
                assert_eq!(skim.offset(), file.len() as u64);
            }
        }
        // Containers from an offset on are handed out like any packet.
        let mut skim = ChunkedPackets::new(std::io::Cursor::new(&file[..]));
        let mut n = 0;
        while skim.next_plain_range(5_060).expect("skim").is_some() {
            n += 1;
        }
        assert_eq!(
            n,
            plain.len() + containers as usize - 4,
            "the four before 5,060 skipped"
        );
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
