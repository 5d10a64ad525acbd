//! The user-space pipeline after the ring buffers: decode each record, update the live
//! statistics, write `--json` lines, and hand events to the recording. It is fed raw record
//! bytes, so the drain benchmark can replay captured records through exactly the code the agent
//! runs.

use std::{
    collections::BTreeMap,
    io::{self, Write},
};

use ingero_trace::json::{Line, write_line};
use serde::Serialize;

use crate::{
    decode::{self, DecodeError},
    live::Stats,
    recording::Recording,
};

/// Where events go.
pub struct Pipeline {
    pub stats: Stats,
    json: Option<Box<dyn Write + Send>>,
    /// Records that could not be decoded, by reason (never silently lost).
    pub decode_errors: BTreeMap<&'static str, u64>,
    /// Set when writing `--json` output failed (for example a closed pipe).
    pub output_error: Option<io::Error>,
    /// With `--record`: the reorder window and the trace file.
    pub recording: Option<Recording>,
}

impl Pipeline {
    /// A pipeline that writes JSON lines to `json` when given, and always keeps statistics.
    pub fn new(json: Option<Box<dyn Write + Send>>) -> Self {
        Pipeline {
            stats: Stats::default(),
            json,
            decode_errors: BTreeMap::new(),
            output_error: None,
            recording: None,
        }
    }

    /// Handles one ring buffer record.
    pub fn handle_record(&mut self, bytes: &[u8]) {
        match decode::decode(bytes) {
            Ok(event) => {
                self.stats.record(&event);
                // The view is built only with `--json`: this is the drain path.
                if self.json_enabled() {
                    self.write_json_line(&Line::of_event(&event));
                }
                if let Some(recording) = self.recording.as_mut() {
                    recording.push_event(event);
                }
            }
            Err(err) => self.count_decode_error(err),
        }
    }

    /// Writes one `--json` line (an event, an annotation, a stats line) when `--json` is on.
    /// After the first failed write nothing more is written, and that first error is kept: it
    /// is what ends tracing and what the summary reports.
    pub fn write_json_line(&mut self, line: &impl Serialize) {
        if let (Some(out), None) = (self.json.as_mut(), &self.output_error) {
            if let Err(e) = write_line(&mut **out, line) {
                self.output_error = Some(e);
            }
        }
    }

    fn count_decode_error(&mut self, err: DecodeError) {
        self.stats.decode_errors += 1;
        let key = match err {
            DecodeError::Short(_) => "decode_short_record",
            DecodeError::UnknownKind(_) => "decode_unknown_kind",
            DecodeError::WrongSize { .. } => "decode_wrong_size",
            DecodeError::UnknownOp(_) => "decode_unknown_op",
            DecodeError::UnknownReason(_) => "decode_unknown_reason",
        };
        *self.decode_errors.entry(key).or_default() += 1;
    }

    pub fn json_enabled(&self) -> bool {
        self.json.is_some()
    }

    pub fn flush(&mut self) {
        if let Some(out) = self.json.as_mut() {
            if let Err(e) = out.flush() {
                self.output_error.get_or_insert(e);
            }
        }
    }
}
