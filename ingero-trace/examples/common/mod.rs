//! Measuring helpers shared by the benchmark examples (`record-bench`, `read-bench`). A
//! directory without `main.rs`, so Cargo does not take it for an example of its own.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use ingero_trace::clock::process_cpu_secs;
use ingero_trace::model::ReadRecord;
use ingero_trace::read::{TimeRange, TraceReader, empty_record};

/// Reads the file through `next_into` (one reused record): (wall seconds, (CPU seconds of
/// the process, the reader's helper thread included, records)).
pub fn read_into(path: &Path) -> Result<(f64, (f64, u64))> {
    let start = Instant::now();
    let cpu = process_cpu_secs();
    let mut reader = TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all());
    let mut rec: ReadRecord = empty_record();
    let mut count = 0u64;
    let mut dur = 0u64;
    while reader.next_into(&mut rec)? {
        if let ReadRecord::Cuda(c) = &rec {
            dur = dur.wrapping_add(c.duration_ns);
        }
        count += 1;
    }
    // Keeps the records' contents live, so the decode cannot be optimised away.
    std::hint::black_box(dur);
    Ok((
        start.elapsed().as_secs_f64(),
        (process_cpu_secs() - cpu, count),
    ))
}
