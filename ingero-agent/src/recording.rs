//! Recording a trace session: events and annotations go through the reorder window
//! ([`Merger`]) into the Perfetto writer ([`Recorder`]).
//!
//! The drain loop pushes everything it decodes; each tick releases what the window lets go and
//! flushes the file, so memory stays bounded by the window and the file is at most a second
//! behind. A write error stops recording (and is reported once) but never the tracing itself.

use std::path::PathBuf;

use anyhow::Result;

use ingero_trace::clock::monotonic_now_ns;
use ingero_trace::model::{AnnotationRecord, Event, FinalStats, NvtxRecord, TimelineRecord};
use ingero_trace::write::{Recorder, RecorderConfig};

use crate::timeline::merger::{Merger, MergerConfig};

/// The recording half of a trace session.
pub struct Recording {
    merger: Merger,
    recorder: Option<Recorder>,
    /// The first write error; recording stops there.
    pub error: Option<anyhow::Error>,
}

impl Recording {
    pub fn start(recorder: RecorderConfig, merger: MergerConfig) -> Result<Recording> {
        Ok(Recording {
            merger: Merger::new(merger),
            recorder: Some(Recorder::create(recorder)?),
            error: None,
        })
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

    pub fn push_annotation(&mut self, annotation: AnnotationRecord) {
        if self.recorder.is_some() {
            self.merger.push(TimelineRecord::Annotation(annotation));
        }
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
            self.write(&released.record);
        }
    }

    /// Releases what is ready, then flushes the file and samples the drop counter. Call once a
    /// second.
    pub fn tick(&mut self, drops_total: u64) {
        self.release();
        // Stamped where the merger's releases have reached, not now: a record still in its
        // window is older than now, and a sample at now would put it behind the main
        // sequence's clock (written late, and outside a short recording's extent).
        let window = u64::try_from(self.merger.config().window.as_nanos()).unwrap_or(u64::MAX);
        let released_up_to = monotonic_now_ns().saturating_sub(window);
        let Some(recorder) = self.recorder.as_mut() else {
            return;
        };
        let result = recorder
            .record_drops(released_up_to, drops_total)
            .and_then(|_| recorder.flush());
        if let Err(e) = result {
            self.fail(e);
        }
    }

    /// Writes everything still in the window, then the final statistics; returns the files.
    pub fn finish(mut self, mut stats: FinalStats) -> Result<Vec<PathBuf>> {
        let pending: Vec<TimelineRecord> = self.merger.drain().map(|r| r.record).collect();
        for record in &pending {
            self.write(record);
        }
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
