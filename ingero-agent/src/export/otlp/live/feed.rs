//! The hand-off from the recording to the live engine: the records the writer wrote (moved,
//! not copied: the drain loop would drop them next), what its tap logged, and how far the
//! stream has been written. The drain loop never waits here: past the bound on events in
//! flight, a batch's events are left out (counted, and the time they covered remembered so
//! the groups there are sent marked incomplete); its labels always go, so the engine's view
//! of the label states stays right.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender};

use ingero_trace::model::{Event, TimelineRecord};
use ingero_trace::write::Tap;

use super::super::counters::ExportCounters;

/// Events handed over and not yet taken in by the engine, at most.
pub const MAX_EVENTS_IN_FLIGHT: usize = 262_144;
/// Batches in flight at most (one per 512 records and per release; reached by a stuck engine
/// only).
pub const MAX_BATCHES_IN_FLIGHT: usize = 4096;
// (Batches hold at most 512 records, `recording::HAND_OFF_RECORDS`: the event bound above
// is the tighter one.)

/// The records of a batch.
pub type Records = Vec<(u64, TimelineRecord)>;

/// Emptied record buffers the engine hands back, at most: reused, a buffer is neither grown
/// record by record nor its memory faulted in and zeroed again on the drain loop.
pub const SPARE_BUFFERS: usize = 64;

/// One hand-off.
#[derive(Default)]
pub struct FeedBatch {
    /// Each record with its [`ingero_trace::write::Recorder::records_written`] number.
    pub records: Records,
    pub tap: Tap,
    /// Every record starting at or before this was written (`u64::MAX`: all of them, the
    /// recording has ended).
    pub watermark: u64,
    /// The recording's REALTIME − MONOTONIC (its first clock snapshot's).
    pub realtime_offset: Option<i128>,
    /// Time ranges whose events were left out of this batch.
    pub gaps: Vec<(u64, u64)>,
    /// The last batch: the recording ended.
    pub last: bool,
    /// Events in `records` (what `in_flight` counts).
    pub events: usize,
}

fn is_event(r: &TimelineRecord) -> bool {
    matches!(r, TimelineRecord::Event(Event::Cuda(_) | Event::OffCpu(_)))
}

/// The recording's end of the hand-off.
#[derive(Clone)]
pub struct Feed {
    pub(super) tx: Sender<FeedBatch>,
    pub(super) events_in_flight: Arc<AtomicUsize>,
    pub(super) batches_in_flight: Arc<AtomicUsize>,
    /// Set when a whole batch had to be dropped (its labels too): the engine's label view
    /// may be wrong from then on, so every later span is marked incomplete.
    pub(super) desynced: Arc<AtomicBool>,
    pub(super) counters: Arc<ExportCounters>,
    /// Emptied buffers coming back from the engine.
    pub(super) spare: Arc<Mutex<Receiver<Records>>>,
}

impl Feed {
    /// An emptied buffer to fill next (with its room), or a new one.
    pub fn buffer(&self) -> Records {
        self.spare
            .lock()
            .ok()
            .and_then(|r| r.try_recv().ok())
            .unwrap_or_else(|| Vec::with_capacity(512))
    }

    /// Hands `batch` over without waiting.
    pub fn send(&self, mut batch: FeedBatch) {
        batch.events = batch.records.iter().filter(|(_, r)| is_event(r)).count();
        if self.batches_in_flight.load(Relaxed) >= MAX_BATCHES_IN_FLIGHT && !batch.last {
            self.counters
                .events_not_seen
                .fetch_add(batch.events as u64, Relaxed);
            self.desynced.store(true, Relaxed);
            return;
        }
        if self.events_in_flight.load(Relaxed) + batch.events > MAX_EVENTS_IN_FLIGHT {
            let (mut lo, mut hi) = (u64::MAX, 0);
            batch.records.retain(|(_, r)| {
                if !is_event(r) {
                    return true;
                }
                lo = lo.min(r.ts_ns());
                hi = hi.max(r.ts_ns());
                false
            });
            self.counters
                .events_not_seen
                .fetch_add(batch.events as u64, Relaxed);
            if lo <= hi {
                batch.gaps.push((lo, hi));
            }
            batch.events = 0;
        }
        self.events_in_flight.fetch_add(batch.events, Relaxed);
        self.batches_in_flight.fetch_add(1, Relaxed);
        let events = batch.events;
        if self.tx.send(batch).is_err() {
            // The engine is gone (it failed): nothing more will be exported.
            self.events_in_flight.fetch_sub(events, Relaxed);
            self.batches_in_flight.fetch_sub(1, Relaxed);
            self.counters
                .events_not_seen
                .fetch_add(events as u64, Relaxed);
        }
    }
}
