//! Recording a trace session: events and annotations go through the reorder window
//! ([`Merger`]) into the Perfetto writer ([`Recorder`]).
//!
//! The drain loop pushes everything it decodes; each tick releases what the window lets go and
//! flushes the file, so memory stays bounded by the window and the file is at most a second
//! behind. A write error stops recording (and is reported once) but never the tracing itself.
//!
//! The drops total is sampled each tick but written once the window has released what came
//! before it, stamped when it was read: the drops between two samples then happened between
//! their stamps, which is what `ingero explain` places them by (`analyze::losses`).
//!
//! With the live OTLP export, each record written is then moved (not dropped) into a batch
//! with what the writer's tap logged, handed to the exporter on each release
//! (`export::otlp::live::feed`) every 512 records and on each release: the drain loop does a
//! `Vec` push per record and a channel send per batch, nothing more.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;

use ingero_trace::clock::monotonic_now_ns;
use ingero_trace::model::{
    AnnotationRecord, DriverMessage, Event, FinalStats, NvtxRecord, TimelineRecord,
};
use ingero_trace::write::{Recorder, RecorderConfig, Tap};

use crate::export::otlp::live::engine::SessionFacts;
use crate::export::otlp::live::feed::{Feed, FeedBatch};
use crate::timeline::merger::{Merger, MergerConfig};

/// A batch with nothing new but the watermark goes at most this often.
const IDLE_HAND_OFF: Duration = Duration::from_millis(200);
/// Records per hand-off at most: a batch's buffer then stays in the cache while the drain
/// loop fills it (a release at a million events per second writes 100,000 records, 18 MB).
const HAND_OFF_RECORDS: usize = 512;
/// Drops samples waiting for the window (one a second: a window of up to this many seconds;
/// past it the oldest is let go, which loses no drop, the totals being cumulative).
const DROPS_PENDING: usize = 16;

/// What the live export is handed.
struct ExportFeed {
    feed: Feed,
    records: Vec<(u64, TimelineRecord)>,
    tap: Tap,
    last_sent: Instant,
    /// The last watermark handed over (a full buffer goes with it before the release ends).
    watermark: u64,
}

/// The recording half of a trace session.
pub struct Recording {
    merger: Merger,
    recorder: Option<Recorder>,
    /// The first write error; recording stops there.
    pub error: Option<anyhow::Error>,
    export: Option<ExportFeed>,
    /// Drops totals read and not yet written: when read, and the total.
    drops_pending: VecDeque<(u64, u64)>,
}

impl Recording {
    pub fn start(recorder: RecorderConfig, merger: MergerConfig) -> Result<Recording> {
        Ok(Recording {
            merger: Merger::new(merger),
            recorder: Some(Recorder::create(recorder)?),
            error: None,
            export: None,
            drops_pending: VecDeque::with_capacity(DROPS_PENDING),
        })
    }

    /// Hands every record written from now on, with the writer's tap, to the live export.
    pub fn export_to(&mut self, feed: Feed) {
        if let Some(r) = self.recorder.as_mut() {
            r.enable_tap();
        }
        self.export = Some(ExportFeed {
            feed,
            records: Vec::new(),
            tap: Tap::default(),
            last_sent: Instant::now(),
            watermark: 0,
        });
    }

    /// What the exported spans say of the recording: its machine id, session start and file.
    pub fn facts(&self) -> SessionFacts {
        let r = self.recorder.as_ref();
        SessionFacts {
            machine_id: r.map_or(0, Recorder::machine_id),
            machine_name: r.map_or_else(String::new, |r| r.machine_name().to_owned()),
            session_start_realtime_ns: r.map_or(0, Recorder::started_realtime_ns),
            recording: r.map(|r| {
                let p = r.current_path();
                std::fs::canonicalize(p)
                    .unwrap_or_else(|_| p.to_path_buf())
                    .display()
                    .to_string()
            }),
        }
    }

    /// The file being written.
    pub fn current_path(&self) -> Option<PathBuf> {
        self.recorder
            .as_ref()
            .map(|r| r.current_path().to_path_buf())
    }

    pub fn push_event(&mut self, event: Event) {
        if self.recorder.is_some() {
            self.merger.push(TimelineRecord::Event(event));
        }
    }

    /// An NVTX range or mark into the reorder window (a range arrives complete, at its end:
    /// one longer than the window is written late, with its own time).
    pub fn push_nvtx(&mut self, nvtx: NvtxRecord) {
        if self.recorder.is_some() {
            self.merger.push(TimelineRecord::Nvtx(nvtx));
        }
    }

    /// Any timeline record into the reorder window (tests and replays that hold records of
    /// every kind).
    pub fn push(&mut self, record: TimelineRecord) {
        if self.recorder.is_some() {
            self.merger.push(record);
        }
    }

    /// An NVIDIA driver message into the reorder window.
    pub fn push_driver(&mut self, message: DriverMessage) {
        if self.recorder.is_some() {
            self.merger.push(TimelineRecord::Driver(message));
        }
    }

    pub fn push_annotation(&mut self, annotation: AnnotationRecord) {
        if self.recorder.is_some() {
            self.merger.push(TimelineRecord::Annotation(annotation));
        }
    }

    /// Writes a record, then keeps it for the live export (when on).
    fn put(&mut self, record: TimelineRecord) {
        self.write(&record);
        if let (Some(x), Some(r)) = (self.export.as_mut(), self.recorder.as_ref()) {
            x.records.push((r.records_written(), record));
            if x.records.len() >= HAND_OFF_RECORDS {
                let watermark = x.watermark;
                self.hand_off(watermark, false);
            }
        }
    }

    /// Hands what was written since the last call to the live export; `watermark`: every
    /// record starting at or before it has been written.
    fn hand_off(&mut self, watermark: u64, last: bool) {
        let Some(x) = self.export.as_mut() else {
            return;
        };
        if let Some(r) = self.recorder.as_mut() {
            r.take_tap(&mut x.tap);
        }
        if !last
            && x.records.is_empty()
            && x.tap.is_empty()
            && x.last_sent.elapsed() < IDLE_HAND_OFF
        {
            return;
        }
        x.last_sent = Instant::now();
        x.watermark = x.watermark.max(watermark);
        let next = x.feed.buffer();
        x.feed.send(FeedBatch {
            records: std::mem::replace(&mut x.records, next),
            tap: std::mem::take(&mut x.tap),
            watermark: x.watermark,
            realtime_offset: self
                .recorder
                .as_ref()
                .and_then(Recorder::first_realtime_offset),
            last,
            ..FeedBatch::default()
        });
    }

    /// The live export's end: writes what the window still holds, ends every open slice and
    /// label state (as finishing does), and hands the last batch over. Records pushed after
    /// this are still recorded, not exported.
    pub fn end_for_export(&mut self) {
        if self.export.is_none() {
            return;
        }
        let pending: Vec<TimelineRecord> = self.merger.drain().map(|r| r.record).collect();
        for record in pending {
            self.put(record);
        }
        if let Some(r) = self.recorder.as_mut() {
            if let Err(e) = r.end_all() {
                self.fail(e);
            }
        }
        self.hand_off(u64::MAX, true);
        self.export = None;
    }

    fn write(&mut self, record: &TimelineRecord) {
        let Some(recorder) = self.recorder.as_mut() else {
            return;
        };
        if let Err(e) = recorder.write(record) {
            self.fail(e);
        }
    }

    fn fail(&mut self, error: impl Into<anyhow::Error>) {
        let error = error.into();
        eprintln!("ingero: recording stopped: {error:#}");
        self.error = Some(error);
        self.recorder = None;
    }

    /// Writes what the reorder window releases by now (called on every drain, so the window
    /// holds little more than its own length).
    pub fn release(&mut self) {
        let now = monotonic_now_ns();
        while let Some(released) = self.merger.pop_ready(now) {
            self.put(released.record);
        }
        if self.export.is_some() {
            let window = u64::try_from(self.merger.config().window.as_nanos()).unwrap_or(u64::MAX);
            self.hand_off(now.saturating_sub(window), false);
        }
    }

    /// Releases what is ready, then flushes the file and samples the drop counter. Call once a
    /// second.
    pub fn tick(&mut self, drops_total: u64) {
        self.release();
        let now = monotonic_now_ns();
        if self.drops_pending.len() >= DROPS_PENDING {
            self.drops_pending.pop_front();
        }
        self.drops_pending.push_back((now, drops_total));
        // Written where the merger's releases have reached, not at once: a record still in
        // the window is older than the sample, and would be written late behind it.
        let window = u64::try_from(self.merger.config().window.as_nanos()).unwrap_or(u64::MAX);
        self.write_drops(now.saturating_sub(window));
        let Some(recorder) = self.recorder.as_mut() else {
            return;
        };
        if let Err(e) = recorder.flush() {
            self.fail(e);
        }
    }

    /// Writes the drops samples read by `up_to`.
    fn write_drops(&mut self, up_to: u64) {
        while let Some(&(ts, total)) = self.drops_pending.front() {
            if ts > up_to {
                break;
            }
            self.drops_pending.pop_front();
            let Some(recorder) = self.recorder.as_mut() else {
                return;
            };
            if let Err(e) = recorder.record_drops(ts, total) {
                self.fail(e);
                return;
            }
        }
    }

    /// Writes everything still in the window, then the final statistics; returns the files.
    pub fn finish(mut self, mut stats: FinalStats) -> Result<Vec<PathBuf>> {
        let pending: Vec<TimelineRecord> = self.merger.drain().map(|r| r.record).collect();
        for record in &pending {
            self.write(record);
        }
        self.write_drops(u64::MAX);
        let counters = self.merger.counters();
        stats.recorder.extend([
            ("merger_late".to_string(), counters.late),
            ("merger_forced".to_string(), counters.forced),
        ]);
        match (self.recorder.take(), self.error.take()) {
            (Some(recorder), None) => Ok(recorder.finish(&stats)?),
            (_, Some(e)) => Err(e),
            (None, None) => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_trace::model::{CounterKind, ReadRecord, SessionInfo};
    use ingero_trace::read::{TimeRange, TraceReader};

    #[test]
    fn drops_samples_are_stamped_when_read_and_all_written() {
        let dir = std::env::temp_dir().join(format!("ingero-recording-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("drops.pftrace");
        let recorder = RecorderConfig {
            path: Some(path.clone()),
            session: SessionInfo::default(),
            chown_to_sudo_user: false,
            ..Default::default()
        };
        let merger = MergerConfig {
            window: Duration::from_millis(50),
            ..Default::default()
        };
        let mut rec = Recording::start(recorder, merger).expect("recording");
        let mut read_between = Vec::new();
        for total in [10, 20, 30] {
            let before = monotonic_now_ns();
            rec.tick(total);
            read_between.push((before, monotonic_now_ns(), total));
            // Longer than the window: the sample before is written at this tick.
            std::thread::sleep(Duration::from_millis(60));
        }
        let files = rec.finish(FinalStats::default()).expect("finish");
        assert_eq!(files, vec![path.clone()]);
        let samples: Vec<(u64, i64)> = TraceReader::open(&path, TimeRange::all())
            .expect("open")
            .filter_map(|r| match r {
                Ok(ReadRecord::Counter(c)) if c.kind == CounterKind::Drops => {
                    Some((c.ts_ns, c.value))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            samples.len(),
            3,
            "the last one too, at the end: {samples:?}"
        );
        for ((ts, value), (before, after, total)) in samples.iter().zip(&read_between) {
            assert_eq!(*value, i64::try_from(*total).unwrap_or(-1));
            assert!(
                (*before..=*after).contains(ts),
                "{ts} not when read ({before}..{after})"
            );
        }
    }
}
