//! One packet sequence (`trusted_packet_sequence_id`): its interning state, its timestamp
//! encoding and its sequence flags.
//!
//! ingero writes three sequences per file. The main one carries records in time order with
//! timestamps on a sequence-scoped incremental clock (id 64, deltas of CLOCK_MONOTONIC ns:
//! usually 2–3 bytes instead of 9). The late one carries the few records that arrive after a
//! later record was written (a long `cudaDeviceSynchronize` reported on return, an off-CPU
//! interval longer than the merger's window): absolute CLOCK_MONOTONIC timestamps, so order
//! within it does not matter. Both travel in compressed chunks. The plain one (absolute
//! timestamps too) is written outside the chunks: descriptors, session, statistics,
//! annotations and label states, per-second counters and clock snapshots, everything a first
//! pass over the file needs without inflating the chunks.

use super::interner::Interner;
use crate::proto::{
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE, TracePacket, TracePacketDefaults,
    clock_id,
};

/// Sequence ids used in every file.
pub const MAIN_SEQUENCE: u32 = 1;
pub const LATE_SEQUENCE: u32 = 2;
pub const PLAIN_SEQUENCE: u32 = 3;

pub struct Sequence {
    id: u32,
    incremental: bool,
    /// Timestamp of the newest packet on an incremental sequence (the clock's current value).
    last_ts: u64,
    started: bool,
    /// Started before in this file: the next start is a restart, not the sequence's first
    /// packet.
    restarted: bool,
    pub interner: Interner,
}

impl Sequence {
    pub fn new(id: u32, incremental: bool) -> Sequence {
        Sequence {
            id,
            incremental,
            last_ts: 0,
            started: false,
            restarted: false,
            interner: Interner::new(),
        }
    }

    pub fn started(&self) -> bool {
        self.started
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// The value of the timestamp field of a packet at `ts`: a delta on the incremental
    /// sequence (which moves its clock to `ts`; never backwards), else `ts` itself.
    #[inline(always)]
    pub fn timestamp_field(&mut self, ts: u64) -> u64 {
        if self.incremental {
            let ts = ts.max(self.last_ts);
            let delta = ts - self.last_ts;
            self.last_ts = ts;
            delta
        } else {
            ts
        }
    }

    /// The incremental clock's value: no packet on this sequence may be earlier.
    pub fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// Starts the sequence afresh in a new file; the incremental clock keeps its value (the
    /// first packet's clock snapshot re-states it).
    pub fn reset(&mut self) {
        self.started = false;
        self.restarted = false;
        self.interner.clear();
    }

    /// Starts the sequence afresh within the file (see `Recorder::chunk_sequences`): as
    /// [`Self::reset`], but its next first packet does not claim to be the sequence's first.
    pub fn restart(&mut self) {
        let was = self.started || self.restarted;
        self.reset();
        self.restarted = was;
    }

    /// Makes `pkt` the first packet of the sequence: clears incremental state, sets the
    /// defaults (the clock timestamps are on) and declares the fixed vocabulary. For the
    /// incremental sequence the caller adds the clock snapshot that defines clock 64 at
    /// `base_ts`.
    pub fn stamp_first(&mut self, pkt: &mut TracePacket, base_ts: u64) {
        self.started = true;
        if self.incremental {
            self.last_ts = base_ts;
        }
        pkt.trusted_packet_sequence_id = Some(self.id);
        pkt.first_packet_on_sequence = (!self.restarted).then_some(true);
        pkt.sequence_flags = Some(SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
        pkt.trace_packet_defaults = Some(TracePacketDefaults {
            timestamp_clock_id: Some(if self.incremental {
                clock_id::INCREMENTAL_MONOTONIC
            } else {
                clock_id::MONOTONIC
            }),
            track_event_defaults: None,
        });
        pkt.interned_data = self.interner.take_pending();
    }

    /// Sets the sequence fields of a later packet. `ts` must not be before [`Self::last_ts`] on
    /// the incremental sequence (the caller routes such records to the late sequence).
    pub fn stamp(&mut self, pkt: &mut TracePacket, ts: Option<u64>) {
        pkt.trusted_packet_sequence_id = Some(self.id);
        pkt.sequence_flags = Some(SEQ_NEEDS_INCREMENTAL_STATE);
        pkt.interned_data = self.interner.take_pending();
        pkt.timestamp = ts.map(|ts| self.timestamp_field(ts));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_timestamps_are_deltas_and_flags_are_right() {
        let mut s = Sequence::new(MAIN_SEQUENCE, true);
        let mut first = TracePacket::default();
        s.stamp_first(&mut first, 1_000);
        assert_eq!(first.sequence_flags, Some(3));
        assert_eq!(first.first_packet_on_sequence, Some(true));
        assert!(first.interned_data.is_some());
        let mut p = TracePacket::default();
        s.stamp(&mut p, Some(1_500));
        assert_eq!(
            (p.timestamp, p.sequence_flags, p.interned_data.is_none()),
            (Some(500), Some(2), true)
        );
        let mut q = TracePacket::default();
        s.stamp(&mut q, Some(1_500));
        assert_eq!(q.timestamp, Some(0));
        assert_eq!(s.last_ts(), 1_500);
    }

    #[test]
    fn a_restart_clears_state_without_claiming_the_first_packet() {
        let mut s = Sequence::new(MAIN_SEQUENCE, true);
        // Never started in this file: its first start is its first packet.
        s.restart();
        let mut first = TracePacket::default();
        s.stamp_first(&mut first, 1_000);
        assert_eq!(first.first_packet_on_sequence, Some(true));
        s.restart();
        let mut again = TracePacket::default();
        s.stamp_first(&mut again, 2_000);
        assert_eq!(again.first_packet_on_sequence, None);
        assert_eq!(again.sequence_flags, Some(3));
        assert!(again.interned_data.is_some(), "the vocabulary again");
        // A new file starts the sequence anew.
        s.reset();
        let mut next = TracePacket::default();
        s.stamp_first(&mut next, 3_000);
        assert_eq!(next.first_packet_on_sequence, Some(true));
    }

    #[test]
    fn absolute_sequence_keeps_timestamps() {
        let mut s = Sequence::new(LATE_SEQUENCE, false);
        let mut first = TracePacket::default();
        s.stamp_first(&mut first, 0);
        let def = first
            .trace_packet_defaults
            .as_ref()
            .and_then(|d| d.timestamp_clock_id);
        assert_eq!(def, Some(clock_id::MONOTONIC));
        let mut p = TracePacket::default();
        s.stamp(&mut p, Some(42));
        assert_eq!(p.timestamp, Some(42));
    }
}
