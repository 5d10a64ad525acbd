//! Fuzzes the trace reader: the input is a recording file. Reading it must not panic (a
//! panic, like a hang past `-timeout` or memory past `-rss_limit_mb`, is libFuzzer's
//! finding), must give the same records, error, damage report and counts with and without the
//! helper thread that inflates containers ahead, must yield from `for_each_record` what the
//! iterator yields, and must yield no more records than the file's size allows.
//!
//! `TraceReader` reads files by path (its helper opens the file a second time), so each input
//! is written to one temporary file per fuzzing process. The same checks run in CI as
//! property tests (`ingero-trace/tests/reader_properties.rs`); this target is for long runs
//! on a machine with nightly: `cargo +nightly fuzz run trace_reader`.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ingero_trace::model::ReadRecord;
use ingero_trace::read::{Damage, TimeRange, TraceReader};
use libfuzzer_sys::fuzz_target;

/// Everything one reading says (the error as text: its type is not the contract).
#[derive(Debug, PartialEq)]
struct Reading {
    records: Vec<ReadRecord>,
    error: Option<String>,
    damage: Vec<Damage>,
    containers_lost: u64,
    packets_skipped: u64,
    packets: u64,
    truncated: bool,
}

fn read(path: &Path, ahead: bool) -> Reading {
    let mut reader =
        TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()).inflate_ahead(ahead);
    let mut records = Vec::new();
    let mut error = None;
    for r in reader.by_ref() {
        match r {
            Ok(r) => records.push(r),
            Err(e) => {
                error = Some(format!("{e:#}"));
                break;
            }
        }
    }
    if error.is_some() {
        assert!(reader.next().is_none(), "the reader went on after an error");
    }
    Reading {
        records,
        error,
        damage: reader.damage().to_vec(),
        containers_lost: reader.containers_lost(),
        packets_skipped: reader.packets_skipped(),
        packets: reader.packets(),
        truncated: !reader.truncated_files().is_empty(),
    }
}

/// The records and error of [`TraceReader::for_each_record`], which has its own hot loop.
fn read_each(path: &Path) -> (Vec<ReadRecord>, Option<String>) {
    let mut reader =
        TraceReader::from_files(vec![path.to_path_buf()], TimeRange::all()).inflate_ahead(false);
    let mut records = Vec::new();
    let res = reader.for_each_record(|r| records.push(r.clone()));
    (records, res.err().map(|e| format!("{e:#}")))
}

/// This process's input file (libFuzzer's `-fork` and `-jobs` run several processes).
fn input_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("ingero-fuzz-{}.pftrace", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = input_path();
    std::fs::write(path, data).expect("writing the input to a file");
    let alone = read(path, false);
    let ahead = read(path, true);
    assert_eq!(ahead, alone, "the helper thread changed the reading");
    let (each, error) = read_each(path);
    assert!(
        each == alone.records,
        "for_each_record yields other records"
    );
    assert_eq!(
        error, alone.error,
        "for_each_record ends with another error"
    );
    // Each record takes a packet of at least two bytes, in the file or inflated from it, and
    // deflate inflates at most 1032 bytes per byte.
    let most = (data.len() + 1032 * data.len()) / 2 + 1;
    assert!(
        alone.records.len() <= most,
        "{} records",
        alone.records.len()
    );
});
