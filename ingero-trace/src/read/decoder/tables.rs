//! [`Tables`]: everything the decoding paths share about one file: each sequence's interned
//! state and clock, the tracks with their open slices, the launch configurations, and what
//! the clock snapshots said. The scanner path (`scanner.rs`) and the fast paths (`fast.rs`)
//! both work on it; neither owns it.

use std::sync::Arc;

use super::args::Slots;
use super::iids::IidTable;
use super::label_skip::LabelSkip;
use super::sequence::SeqState;
use super::slices::Track;
use super::track_kind::TrackKind;
use super::values::Val;
use crate::fast_map::FastMap;
use crate::model::LaunchConfig;
use crate::read::seek::Mark;
use crate::vocab::EventName;

/// The decoding state of one file (packets already expanded from their containers).
pub(super) struct Tables {
    pub(super) seqs: IidTable<SeqState>,
    pub(super) tracks: IidTable<Track>,
    /// Every launch configuration interned in this file, never removed: open launches refer
    /// to it by index, so a sequence reset cannot pull it from under them.
    pub(super) launches: Vec<LaunchConfig>,
    /// The fixed event names by text (from `vocab::EventName`), to resolve interned names.
    pub(super) names: FastMap<&'static str, EventName>,
    /// Scratch for a slice's interned arguments.
    pub(super) scratch: Slots,
    /// Scratch for an instant's arguments (kept empty between packets).
    pub(super) instant_args: Vec<(Arc<str>, Val)>,
    /// Set by the caller while it feeds the packets of a `compressed_packets` bundle.
    pub(super) in_bundle: bool,
    /// Some sequence is [`SeqState::lost`]: the fast path leaves every packet it has not
    /// remembered to the scanner, which skips those of lost sequences.
    pub(super) lost_seqs: bool,
    /// Packets skipped because their sequence was lost.
    pub(super) lost_packets: u64,
    pub(super) clocks: ClocksSeen,
    /// The seek mark the last packet outside bundles was (taken by the caller).
    pub(super) mark: Option<Mark>,
    /// Whether label packets are skipped (`label_skip.rs`).
    pub(super) label_skip: LabelSkip,
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            seqs: IidTable::default(),
            tracks: IidTable::default(),
            launches: Vec::new(),
            names: EventName::all().map(|n| (n.text(), n)).collect(),
            scratch: Slots::EMPTY,
            instant_args: Vec::new(),
            in_bundle: false,
            lost_seqs: false,
            lost_packets: 0,
            clocks: ClocksSeen::default(),
            mark: None,
            label_skip: LabelSkip::default(),
        }
    }
}

impl Tables {
    /// What track `uuid`'s descriptor made it (`None`: not described).
    #[inline(always)]
    pub(super) fn kind(&self, uuid: u64) -> Option<&TrackKind> {
        self.tracks.get(uuid).and_then(|t| t.kind.as_ref())
    }

    /// Whether the fast path may decode packets it has not remembered (see `lost_seqs`).
    #[inline(always)]
    pub(super) fn all_seqs_whole(&self) -> bool {
        !self.lost_seqs
    }

    /// A container could not be read (a corrupt zlib stream or inner packet): the sequences
    /// that travel in containers lose their incremental state until a packet clears it, and
    /// the slices open on CUDA and off-CPU tracks are dropped, since their ends may have been
    /// in it. Label states and spans (outside containers) stay.
    pub(super) fn container_lost(&mut self) {
        for s in self.seqs.values_mut() {
            if s.in_bundles {
                s.lost = true;
                self.lost_seqs = true;
            }
        }
        for t in self.tracks.values_mut() {
            if matches!(t.kind, Some(TrackKind::Thread(_) | TrackKind::OffCpu(_))) {
                t.open.clear();
                t.bodies.clear();
                t.end_key = None;
            }
        }
    }
}

/// What the clock snapshots of a file said so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClocksSeen {
    /// Min and max MONOTONIC value of the snapshots outside bundles.
    pub plain_bounds: Option<(u64, u64)>,
    /// REALTIME − MONOTONIC of the first snapshot with both, in file order.
    pub realtime_offset: Option<i128>,
}

impl ClocksSeen {
    /// Adds what a later file (or the rest of this one) saw.
    pub fn merge(&mut self, later: &ClocksSeen) {
        if let Some((lo, hi)) = later.plain_bounds {
            self.add_plain(lo);
            self.add_plain(hi);
        }
        self.realtime_offset = self.realtime_offset.or(later.realtime_offset);
    }

    pub(super) fn add_plain(&mut self, mono: u64) {
        self.plain_bounds = Some(match self.plain_bounds {
            Some((lo, hi)) => (lo.min(mono), hi.max(mono)),
            None => (mono, mono),
        });
    }
}
