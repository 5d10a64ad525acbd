//! The reader's cost of a time window, for `cargo xtask bench window`: a first pass (the skim
//! an analysis of the whole recording starts with: plain packets only, containers skipped
//! unread, every label decoded, the seek marks collected), then for a window the first pass
//! `ingero query --from/--to` makes (the same skim skipping the labels after each file's first
//! restart, then the labels of the stretches the window needs), and the probe events of the
//! window, read through the seek index as `ingero query` reads them (`TraceReader::seek`,
//! `events_only`, `for_each_record`).
//!
//! `cargo run --release -p ingero-trace --example window-scan -- PATH [--window FROM TO]
//! [--full] [-j N]` prints `name value` lines: `first_pass_cpu_s`, `plain_bytes` (the bytes of
//! the packets outside containers: what the first pass reads), `file_bytes`, `restarts`,
//! `extent_ns`, and with `--window` (fractions of the extent, `0.495 0.505`)
//! `window_first_pass_cpu_s`, `window_labels` (label records it decoded), `label_bytes_read`,
//! `window_cpu_s` and `window_records`; `--full` reads the window's records without the index
//! (the whole recording).

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ingero_trace::clock::process_cpu_secs;
use ingero_trace::read::seek::LabelStretches;
use ingero_trace::read::{
    ChunkedPackets, TimeRange, TraceReader, default_inflate_ahead, recording_files,
};

fn main() -> Result<()> {
    const USAGE: &str = "usage: window-scan PATH [--window FROM TO] [--full] [-j N]";
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().context(USAGE)?);
    let mut window = None;
    let mut full = false;
    let mut ahead = default_inflate_ahead();
    while let Some(a) = args.next() {
        let mut fraction = || -> Result<f64> { Ok(args.next().context(USAGE)?.parse::<f64>()?) };
        match a.as_str() {
            "--window" => window = Some((fraction()?, fraction()?)),
            "--full" => full = true,
            "-j" => ahead = args.next().context("-j N")?.parse::<u32>()? > 1,
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    let files = recording_files(&path)?;
    let cpu0 = process_cpu_secs();
    let mut skim = TraceReader::from_files(files.clone(), TimeRange::all()).skip_bundles();
    let mut records = 0u64;
    skim.for_each_record(|_| records += 1)?;
    let (start, end) = skim.plain_clock_bounds().context("no clock snapshots")?;
    let index = skim.seek_index();
    let cpu1 = process_cpu_secs();
    println!("first_pass_cpu_s {:.4}", cpu1 - cpu0);
    println!("first_pass_records {records}");
    println!("restarts {}", index.restarts());
    println!("extent_ns {}", end - start);
    if let Some((from, to)) = window {
        let span = (end - start) as f64;
        let w = TimeRange::new(start + (from * span) as u64, start + (to * span) as u64);
        let cpu1 = process_cpu_secs();
        let (labels, label_bytes) = window_first_pass(&files, w)?;
        let cpu2 = process_cpu_secs();
        println!("window_first_pass_cpu_s {:.4}", cpu2 - cpu1);
        println!("window_labels {labels}");
        println!("label_bytes_read {label_bytes}");
        let reader = TraceReader::from_files(files.clone(), TimeRange::all()).inflate_ahead(ahead);
        let mut reader = if full {
            reader
        } else {
            reader.seek(index, w).events_only()
        };
        let mut n = 0u64;
        reader.for_each_record(|r| {
            if w.admits(r) {
                n += 1;
            }
        })?;
        let cpu3 = process_cpu_secs();
        println!("window_cpu_s {:.4}", cpu3 - cpu2);
        println!("window_records {n}");
        println!("window_files_skipped {}", reader.files_skipped());
    }
    let (mut plain, mut total) = (0u64, 0u64);
    for f in &files {
        let (p, t) = plain_bytes(f)?;
        plain += p;
        total += t;
    }
    println!("plain_bytes {plain}");
    println!("file_bytes {total}");
    Ok(())
}

/// The first pass of an analysis of window `w`, as `ingero query --from/--to` makes it: the
/// skim skipping labels, the tails the marks do not bound, then the labels from the earliest
/// start the seek marks allow for a record overlapping the window; returns the label records
/// decoded and the bytes of the stretches the label reads framed.
fn window_first_pass(files: &[PathBuf], w: TimeRange) -> Result<(u64, u64)> {
    let mut skim = TraceReader::from_files(files.to_vec(), TimeRange::all())
        .skip_bundles()
        .skip_labels();
    let mut labels = 0u64;
    skim.for_each_record(|r| {
        if r.is_label() {
            labels += 1;
        }
    })?;
    let index = skim.seek_index();
    let mut skipped = skim.skipped_labels();
    skipped.read(LabelStretches::Unbounded, |_, _| labels += 1)?;
    let needed = index.label_window(files, w);
    skipped.read(LabelStretches::Overlapping(needed), |_, _| labels += 1)?;
    Ok((labels, skipped.bytes_read()))
}

/// Bytes of the packets outside containers in `file` (framing included), and its size.
fn plain_bytes(file: &Path) -> Result<(u64, u64)> {
    let size = std::fs::metadata(file)?.len();
    let mut packets = ChunkedPackets::new(File::open(file)?);
    let mut n = 0u64;
    while packets.next_plain_range(u64::MAX)?.is_some() {
        n += packets.offset() - packets.packet_start();
    }
    Ok((n, size))
}
