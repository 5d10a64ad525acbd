//! [`FileDecoder`]: the public per-file decoder. Feeds plain packets to the decoder and
//! expands `compressed_packets` containers: their inner packets are decoded in order, as if
//! they stood in the file in place of the container. In skim mode containers are skipped
//! unopened (the first pass of an analysis reads only what the writer keeps outside them).
//!
//! A container that cannot be read (a corrupt zlib stream, a malformed inner packet) is
//! lost, not fatal: what it still held is dropped, the loss is counted with its reason, and
//! decoding goes on with the next packet (see `Decoder::container_lost` for what that costs
//! the packets after it).
//!
//! Given an [`InflateAhead`] for its file, it takes each container's output from that
//! helper thread instead of inflating it, and inflates itself whenever the helper has none.
//!
//! A reader seeking to a window ([`super::seek`]) tells it which packets outside containers
//! to decode ([`Outside`]): around the window only the plain sequence's (and not, say, a
//! chunk sequence's oversized packet, whose state was never read), or only track descriptors
//! when it wants the chunks' records alone.

use super::ahead::InflateAhead;
use super::decoder::{ClocksSeen, Decoder, Paths, Step};
use super::error::InflateError;
use super::error::{LossReason, PacketError};
use super::inflate::Inflater;
use super::seek::Mark;
use crate::model::ReadRecord;
use crate::proto::scan::Cur;
use crate::proto::{FRAME, TracePacket, varint, wire_type};

/// Which packets outside `compressed_packets` containers are decoded (containers are decoded
/// or skipped as [`FileDecoder::skip_bundles`] says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outside {
    /// Every one.
    All,
    /// Track descriptors always; the packets on the writer's plain sequence (that of its
    /// seek marks) when `plain`; those on any other sequence when `others`.
    Only {
        plain_sequence: u32,
        plain: bool,
        others: bool,
    },
}

impl Outside {
    /// Whether the top-level packet `bytes` is decoded.
    fn keeps(self, bytes: &[u8]) -> bool {
        let Outside::Only {
            plain_sequence,
            plain,
            others,
        } = self
        else {
            return true;
        };
        let mut sequence = 0;
        let mut c = Cur::new(bytes);
        while let Ok(Some((f, w))) = c.field() {
            match f {
                TracePacket::TRACK_DESCRIPTOR | TracePacket::COMPRESSED_PACKETS => return true,
                TracePacket::TRUSTED_PACKET_SEQUENCE_ID => sequence = w.int(),
                _ => {}
            }
        }
        if sequence == u64::from(plain_sequence) {
            plain
        } else {
            others
        }
    }
}

/// The decoding state of one file.
pub struct FileDecoder {
    dec: Decoder,
    inf: Inflater,
    /// The helper inflating this file's containers ahead, if any.
    ahead: Option<InflateAhead>,
    /// The unread part of the last inflated container, in `inf.buf()`.
    pos: usize,
    end: usize,
    packets: u64,
    skip_bundles: bool,
    bundles_skipped: u64,
    /// Containers lost so far, and why the last one was.
    lost: u64,
    last_loss: Option<LossReason>,
    outside: Outside,
    /// Packets outside containers left undecoded by `outside`.
    outside_skipped: u64,
}

impl Default for FileDecoder {
    fn default() -> Self {
        FileDecoder::new()
    }
}

impl FileDecoder {
    /// A decoder at the start of a file, with no helper thread and skim mode off.
    pub fn new() -> FileDecoder {
        FileDecoder::with_paths(Paths::All)
    }

    /// A decoder limited to some of its paths (tests compare them).
    pub(crate) fn with_paths(paths: Paths) -> FileDecoder {
        FileDecoder {
            dec: Decoder::new(paths),
            inf: Inflater::default(),
            ahead: None,
            pos: 0,
            end: 0,
            packets: 0,
            skip_bundles: false,
            bundles_skipped: 0,
            lost: 0,
            last_loss: None,
            outside: Outside::All,
            outside_skipped: 0,
        }
    }

    /// Which packets outside containers to decode from here on.
    pub(crate) fn set_outside(&mut self, outside: Outside) {
        self.outside = outside;
    }

    /// Packets outside containers left undecoded so far (see [`Outside`]).
    pub fn outside_skipped(&self) -> u64 {
        self.outside_skipped
    }

    /// The seek mark the last packet was, if it was one (see [`super::seek`]).
    pub fn take_mark(&mut self) -> Option<Mark> {
        self.dec.take_mark()
    }

    /// The containers from here on are skipped, not decoded: the helper inflating them, out
    /// of step from now, goes.
    pub(crate) fn leave_chunks(&mut self) {
        self.ahead = None;
    }

    /// Skips `compressed_packets` containers without inflating them (framing only).
    pub fn skip_bundles(&mut self, yes: bool) {
        self.skip_bundles = yes;
    }

    /// Takes the containers' outputs from `ahead`, a helper inflating the same file from its
    /// start (given before the first packet).
    pub(crate) fn inflate_ahead(&mut self, ahead: InflateAhead) {
        self.ahead = Some(ahead);
    }

    /// Skips the label packets (annotations, label states, spans, NVTX) from the file's first
    /// restart mark on, when that mark says the writer restated its label states after each
    /// restart (their interned names and tracks are still read): `read::labels` reads them
    /// later, for the stretches a window needs.
    pub fn skip_labels(&mut self, yes: bool) {
        self.dec.skip_labels(yes);
    }

    /// Label packets skipped so far (see [`Self::skip_labels`]).
    pub fn labels_skipped(&self) -> u64 {
        self.dec.labels_skipped()
    }

    /// Reads labels afresh from here on, a restart mark: no longer skipped, and the label
    /// states left open by what was read before forgotten (the restart restates those open
    /// across it).
    pub(crate) fn read_labels_afresh(&mut self) {
        self.dec.read_labels_afresh();
    }

    /// Containers skipped so far.
    pub fn bundles_skipped(&self) -> u64 {
        self.bundles_skipped
    }

    /// Containers that could not be read so far.
    pub fn containers_lost(&self) -> u64 {
        self.lost
    }

    /// Why the last container was lost.
    pub fn last_loss(&self) -> Option<&LossReason> {
        self.last_loss.as_ref()
    }

    /// Packets skipped after a lost container because they needed the state it held.
    pub fn packets_skipped(&self) -> u64 {
        self.dec.lost_packets()
    }

    /// Gives up the current container: see the module docs.
    #[cold]
    fn lose_container(&mut self, why: LossReason) {
        self.end = 0;
        self.pos = 0;
        self.lost += 1;
        self.last_loss = Some(why);
        self.dec.container_lost();
    }

    /// What the clock snapshots said so far (see [`ClocksSeen`]).
    pub fn clocks(&self) -> ClocksSeen {
        self.dec.clocks()
    }

    /// Packets the fast path's byte-layout match decoded so far.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "only the tests count fast-path packets")
    )]
    pub(crate) fn layout_packets(&self) -> u64 {
        self.dec.layout_hits()
    }

    /// Packets decoded so far, counting those inside containers and not the containers.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Decodes one packet (all the inner packets of a container), pushing what it completes
    /// onto `out`.
    pub fn packet(&mut self, bytes: &[u8], out: &mut Vec<ReadRecord>) -> Result<(), PacketError> {
        let mut slot = super::empty_record();
        let mut more = self.packet_into(bytes, &mut slot)?;
        while more {
            out.push(std::mem::replace(&mut slot, super::empty_record()));
            more = self.pending_into(&mut slot);
        }
        Ok(())
    }

    /// Decodes one packet; if it completes a record, writes it into `slot`, reusing the slot's
    /// allocations when it already holds a record of the same kind, and returns `true`. `slot`
    /// is untouched otherwise.
    ///
    /// A plain packet completes at most one record. A `compressed_packets` container is
    /// decoded up to its first record; call [`Self::pending_into`] until it returns `false`
    /// for the rest, before the next packet.
    pub fn packet_into(
        &mut self,
        bytes: &[u8],
        slot: &mut ReadRecord,
    ) -> Result<bool, PacketError> {
        if self.pos < self.end {
            return Err(PacketError::ContainerPending);
        }
        if self.outside != Outside::All && !self.outside.keeps(bytes) {
            self.outside_skipped += 1;
            return Ok(false);
        }
        self.packets += 1;
        self.dec.set_in_bundle(false);
        // A skim decodes plain packets only, none of them in the layouts of the fast path
        // (the chunks' hot packets): straight to the scanner.
        let step = if self.skip_bundles || self.outside != Outside::All {
            self.dec.packet_general(bytes, slot)?
        } else {
            self.dec.packet(bytes, slot)?
        };
        match step {
            Step::Nothing => Ok(false),
            Step::Record => Ok(true),
            Step::Compressed(_) if self.skip_bundles => {
                // No container is inflated: a helper would only be out of step.
                self.packets -= 1;
                self.ahead = None;
                self.bundles_skipped += 1;
                Ok(false)
            }
            Step::Compressed(z) => {
                self.packets -= 1;
                match self.inflate(z) {
                    Ok(n) => self.end = n,
                    Err(e) => {
                        self.lose_container(LossReason::Inflate(e));
                        return Ok(false);
                    }
                }
                self.pos = 0;
                self.dec.set_in_bundle(true);
                Ok(self.pending_into(slot))
            }
        }
    }

    /// Inflates a container's stream into `inf`, or takes it inflated from the helper.
    fn inflate(&mut self, z: &[u8]) -> Result<usize, InflateError> {
        let Some(ahead) = self.ahead.as_mut() else {
            return self.inf.inflate(z);
        };
        match ahead.take(z) {
            Some(out) => out.map(|(buf, n)| {
                ahead.give_back(self.inf.swap_buf(buf));
                n
            }),
            None => {
                self.ahead = None;
                self.inf.inflate(z)
            }
        }
    }

    /// The next record from the container given to [`Self::packet_into`]; `false` once its
    /// inner packets are all decoded. Never an error: a container that turns out unreadable
    /// is lost instead (see the module docs), which also ends it.
    #[inline]
    pub fn pending_into(&mut self, slot: &mut ReadRecord) -> bool {
        if self.hot_into(slot) {
            return true;
        }
        self.pending_slow(slot)
    }

    /// The hot loop: the writer's slice begins and ends, straight out of the inflated buffer,
    /// with the position in a register. `true` when it wrote a record into `slot`; `false`
    /// at the end of the container or at a packet it does not take (which
    /// [`Self::pending_into`] then decodes).
    #[inline(always)]
    pub(super) fn hot_into(&mut self, slot: &mut ReadRecord) -> bool {
        self.hot_loop(|dec, p, _| dec.try_fast(p, slot).map(|stop| (0, stop)))
    }

    /// The hot loop of [`Self::hot_into`], calling `f` on every record instead of stopping at
    /// it; returns at the end of the container or at a packet it does not take.
    #[inline(always)]
    pub(super) fn hot_each(&mut self, slot: &mut ReadRecord, f: &mut impl FnMut(&ReadRecord)) {
        self.hot_loop(|dec, p, after| dec.try_fast_each(p, after, slot, f).map(|n| (n, false)));
    }

    /// Walks the inflated container's one-byte-length packets through `take` (the fast path,
    /// given the packet and the bytes after it: `None` when it does not take the packet, else
    /// how many bytes after it it took as well (a slice end it decoded with its begin) and
    /// `true` to stop there). `true` when it stopped that way; `false` at the end or at a
    /// packet not taken.
    #[inline(always)]
    fn hot_loop(
        &mut self,
        mut take: impl FnMut(&mut Decoder, &[u8], &[u8]) -> Option<(usize, bool)>,
    ) -> bool {
        let FileDecoder {
            dec,
            inf,
            pos,
            end,
            packets,
            ..
        } = self;
        let buf = inf.buf().get(..*end).unwrap_or_default();
        let mut at = *pos;
        let mut n = 0u64;
        let mut stopped = false;
        while let Some(&[FRAME, len]) = buf.get(at..at + 2) {
            let next = at + 2 + usize::from(len);
            let Some(p) = buf.get(at + 2..next).filter(|_| len < 0x80) else {
                break;
            };
            let after = buf.get(next..).unwrap_or_default();
            let Some((extra, stop)) = take(dec, p, after) else {
                break;
            };
            at = next + extra;
            n += 1 + u64::from(extra > 0);
            if stop {
                stopped = true;
                break;
            }
        }
        *pos = at;
        *packets += n;
        stopped
    }

    /// [`Self::pending_into`] past a packet the hot loop does not take: decodes it, then goes
    /// on as that loop would (less quickly). A malformed inner packet loses the rest of its
    /// container (see the module docs).
    #[inline(never)]
    fn pending_slow(&mut self, slot: &mut ReadRecord) -> bool {
        while self.pos < self.end {
            let at = self.pos;
            let buf = &self.inf.buf()[..self.end];
            let Some((tag, range)) = inner_packet(buf, at) else {
                self.lose_container(LossReason::CutInnerPacket { at });
                return false;
            };
            self.pos = range.end;
            if tag != FRAME {
                // As at the top of a file: other length-delimited fields are skipped.
                if tag & 7 != wire_type::LEN {
                    self.lose_container(LossReason::UnexpectedField { tag, at });
                    return false;
                }
                continue;
            }
            self.packets += 1;
            let step = self.dec.packet(&buf[range], slot);
            match step {
                Ok(Step::Nothing) => {}
                Ok(Step::Record) => return true,
                Ok(Step::Compressed(_)) => {
                    self.lose_container(LossReason::Nested { at });
                    return false;
                }
                Err(source) => {
                    self.lose_container(LossReason::InnerPacket { at, source });
                    return false;
                }
            }
        }
        false
    }
}

/// The framing of the packet at `at` in an inflated container: its tag and its bytes'
/// position. `None` when the header or the packet runs past the end.
#[inline(always)]
fn inner_packet(buf: &[u8], at: usize) -> Option<(u8, std::ops::Range<usize>)> {
    // `varint::read` takes a one-byte length (every slice begin and end) on its fast path.
    let tag = *buf.get(at)?;
    let mut i = at + 1;
    let len = varint::read(buf, &mut i)?;
    let end = i.checked_add(usize::try_from(len).ok()?)?;
    (end <= buf.len()).then_some((tag, i..end))
}
