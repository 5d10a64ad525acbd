//! The recorder's side of the tap (`tap.rs`): turning it on, handing over what it logged, and
//! the facts a consumer following the recording needs (record numbers, the clock offset the
//! reader will use, the machine id, the session start, the stream time, ending everything
//! before the final statistics).

use super::recorder::Recorder;
use super::tap::{Clamp, Tap};

impl Recorder {
    /// Starts logging label-state edges and clamped slices (see the module docs).
    pub fn enable_tap(&mut self) {
        self.tap.get_or_insert_with(Tap::default);
        self.labels.edges.get_or_insert_with(Vec::new);
    }

    /// Moves what the tap logged since the last call into `out` (appended).
    pub fn take_tap(&mut self, out: &mut Tap) {
        if let Some(edges) = self.labels.edges.as_mut() {
            out.edges.append(edges);
        }
        if let Some(tap) = self.tap.as_mut() {
            out.clamped.append(&mut tap.clamped);
        }
    }

    /// Records passed to [`Recorder::write`] so far: the number of the last one (a [`Clamp`]
    /// names its record by it).
    pub fn records_written(&self) -> u64 {
        self.counters.records
    }

    /// REALTIME − MONOTONIC as the first file's first clock snapshot states it (what a reader
    /// converts the recording's times with, `TraceReader::first_realtime_offset`); `None`
    /// until the first record or `end_all` started the file.
    pub fn first_realtime_offset(&self) -> Option<i128> {
        self.first_real_minus_mono
    }

    /// The machine id stamped on the recording's packets and session.
    pub fn machine_id(&self) -> u32 {
        self.machine_id
    }

    /// The name the session gives its machine (`--machine-name`, else the host name).
    pub fn machine_name(&self) -> &str {
        self.cfg.session.machine()
    }

    /// When the session started, as a CLOCK_REALTIME stamp (the session packet's).
    pub fn started_realtime_ns(&self) -> u64 {
        self.started_realtime_ns
    }

    /// The stream's time: the newest timestamp written (where a late label change takes
    /// effect, and where [`Recorder::end_all`] ends what is open).
    pub fn stream_time(&self) -> u64 {
        self.stream_end()
    }

    /// Ends every open slice and label state at the stream's time, as [`Recorder::finish`]
    /// does first, so the tap sees the last edges before the final statistics are known.
    /// Records written afterwards still go to the file; `finish` ends what they open.
    pub fn end_all(&mut self) -> super::Result<()> {
        self.start_main(crate::clock::monotonic_now_ns())?;
        self.close_all_slices(false)
    }

    /// Logs a shortened slice of the record being written.
    #[inline(never)]
    pub(super) fn tap_clamp(&mut self, duration_ns: u64) {
        let record = self.counters.records;
        if let Some(tap) = self.tap.as_mut() {
            tap.clamped.push(Clamp {
                record,
                duration_ns,
            });
        }
    }
}
