//! Turns the packets of one file into [`ReadRecord`]s: keeps each sequence's interning tables
//! and clock, the track tree from the descriptors, and the open slices per track.
//!
//! Packets are read in place, not through prost: a CUDA call is two packets (begin, end) and
//! building owned prost structs for them dominated the reader's time. Interned entries are
//! resolved once, when they are declared (event name → CUDA op, argument key → a fixed slot,
//! string value → pointer, dimensions, memcpy kind or launch configuration), so the hot path
//! is table indexing. A slice begin whose arguments are all interned and known (every CUDA
//! call and off-CPU interval ingero writes) is kept as a resolved body until its end;
//! anything else (annotations, session, inline strings past the writer's interning cap,
//! foreign traces) takes the general path, which resolves arguments by name.
//!
//! The modules, from the bytes up:
//! - `values`, `iids`, `sequence`: argument values, id-indexed tables, one sequence's
//!   interned state and clock;
//! - `views`, `args`: in-place views of track events and their arguments, and the two ways a
//!   slice's arguments are held ([`args::Slots`] and [`args::ListArgs`]);
//! - `track_kind`, `describe`, `plan`, `slices`, `instants`: what a track is, what a slice
//!   begin resolves to, the open slices and the records they and the instants become;
//! - `tables`: the state all of the above make up for one file;
//! - `label_skip`: label packets skipped by a first pass, and the label states a restart
//!   restates;
//! - `scanner`: the path that decodes any packet; `fast` (with `memo`): the writer's own
//!   layouts, decoded without the scanner; `annotations`: the writer's annotations read
//!   straight into their records.

mod annotations;
mod args;
mod describe;
mod fast;
mod iids;
mod instants;
mod label_skip;
mod memo;
mod nvtx;
mod plan;
mod scanner;
mod sequence;
mod slices;
mod tables;
mod track_kind;
mod values;
mod views;

pub(crate) use scanner::Step;
pub use tables::ClocksSeen;

use self::fast::FastPath;
use self::tables::Tables;
use crate::model::{CounterKind, CounterSample, ReadRecord};
use crate::proto::scan::Malformed;

/// Placeholder for a record slot (allocates nothing).
pub fn empty_record() -> ReadRecord {
    ReadRecord::Counter(CounterSample {
        kind: CounterKind::Drops,
        ts_ns: 0,
        value: 0,
    })
}

/// The decoder's paths, fastest first; each falls back to the next on anything it does not
/// expect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "only the tests choose the slower paths")
)]
pub(crate) enum Paths {
    /// The writer's exact packet layouts (`fast.rs`), then the scanner.
    #[default]
    All,
    /// The scanner, with interned arguments resolved through slots.
    Scanner,
    /// The scanner, every argument resolved by name.
    General,
}

/// The decoding state of one file (packets already expanded from their containers) and the
/// paths that decode it.
#[derive(Default)]
pub(super) struct Decoder {
    tables: Tables,
    fast: FastPath,
    /// Which paths may decode a packet (tests compare them).
    paths: Paths,
}

impl Decoder {
    pub(super) fn new(paths: Paths) -> Decoder {
        Decoder {
            paths,
            ..Default::default()
        }
    }

    /// Marks the packets that follow as (not) inside a `compressed_packets` container.
    pub(super) fn set_in_bundle(&mut self, yes: bool) {
        self.tables.in_bundle = yes;
    }

    /// Packets skipped because their sequence was lost.
    pub(super) fn lost_packets(&self) -> u64 {
        self.tables.lost_packets
    }

    /// What the clock snapshots said so far.
    pub(super) fn clocks(&self) -> ClocksSeen {
        self.tables.clocks
    }

    /// A container could not be read: see [`Tables::container_lost`].
    pub(super) fn container_lost(&mut self) {
        self.fast.forget();
        self.tables.container_lost();
    }

    /// The seek mark the last packet was, if it was one.
    pub(super) fn take_mark(&mut self) -> Option<crate::read::seek::Mark> {
        self.tables.mark.take()
    }

    /// Skips label packets from the file's first restart mark on, when it says the writer
    /// restated its label states (see `label_skip.rs`).
    pub(super) fn skip_labels(&mut self, yes: bool) {
        self.tables.label_skip.wanted = yes;
    }

    /// Label packets skipped so far.
    pub(super) fn labels_skipped(&self) -> u64 {
        self.tables.label_skip.skipped
    }

    /// Labels are read from here on (a restart mark), afresh: see
    /// `LabelSkip::read_afresh`.
    pub(super) fn read_labels_afresh(&mut self) {
        self.fast.forget();
        let t = &mut self.tables;
        t.label_skip.read_afresh(&mut t.tracks);
    }

    /// Packets the byte-layout match decoded so far.
    pub(super) fn layout_hits(&self) -> u64 {
        self.fast.layout_hits()
    }

    /// The fast path alone, when enabled: `Some(true)` when `bytes` wrote a record into
    /// `slot`, `Some(false)` when it completed none, `None` (nothing changed) when it needs
    /// [`Self::packet`].
    #[inline(always)]
    pub(super) fn try_fast(&mut self, bytes: &[u8], slot: &mut ReadRecord) -> Option<bool> {
        if self.paths != Paths::All {
            return None;
        }
        self.fast.packet(&mut self.tables, bytes, slot)
    }

    /// [`Self::try_fast`], calling `f` on the record the packet completes; `after` is what
    /// follows the packet in its container. `Some(n)`: it also took the `n` bytes after the
    /// packet (see [`FastPath::each`]).
    #[inline(always)]
    pub(super) fn try_fast_each(
        &mut self,
        bytes: &[u8],
        after: &[u8],
        slot: &mut ReadRecord,
        f: &mut impl FnMut(&ReadRecord),
    ) -> Option<usize> {
        if self.paths != Paths::All {
            return None;
        }
        self.fast.each(&mut self.tables, bytes, after, slot, f)
    }

    /// Decodes one packet; if it completes a record (at most one per packet), writes it into
    /// `slot`, reusing the slot's allocations when it already holds a record of the same kind.
    /// `slot` is untouched otherwise.
    #[inline(always)]
    pub(super) fn packet<'a>(
        &mut self,
        bytes: &'a [u8],
        slot: &mut ReadRecord,
    ) -> Result<Step<'a>, Malformed> {
        if self.paths == Paths::All {
            if let Some(done) = self.fast.packet(&mut self.tables, bytes, slot) {
                return Ok(Step::done(done));
            }
        }
        self.packet_slow(bytes, slot)
    }

    /// [`Self::packet`] through the scanner alone (packets the fast path never takes).
    pub(super) fn packet_general<'a>(
        &mut self,
        bytes: &'a [u8],
        slot: &mut ReadRecord,
    ) -> Result<Step<'a>, Malformed> {
        self.packet_slow(bytes, slot)
    }

    #[inline(never)]
    fn packet_slow<'a>(
        &mut self,
        bytes: &'a [u8],
        slot: &mut ReadRecord,
    ) -> Result<Step<'a>, Malformed> {
        // It may change the tables the memo's decisions were made on.
        self.fast.forget();
        scanner::packet(&mut self.tables, self.paths != Paths::General, bytes, slot)
    }
}

#[cfg(test)]
mod tests;
