//! Recording benchmarks: bytes per CUDA call on a launch-dominated workload, writer throughput
//! and reader throughput, on one core. Prints one `name value unit` line per figure.
//!
//! `cargo run --release -p ingero-agent --example record-bench -- [--events N] [--dir DIR]`

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use ingero_agent::read::{TimeRange, TraceReader};
use ingero_agent::record::{FinalStats, Recorder, RecorderConfig, synth};
use ingero_agent::timeline::record::TimelineRecord;

fn write(path: PathBuf, records: &[TimelineRecord], stamp_machine_id: bool) -> Result<(f64, u64)> {
    let cfg = RecorderConfig {
        path: Some(path.clone()),
        max_file_size: u64::MAX,
        stamp_machine_id,
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let start = Instant::now();
    let mut rec = Recorder::create_with(cfg, false)?;
    for r in records {
        rec.write(r)?;
    }
    rec.finish(&FinalStats::default())?;
    let secs = start.elapsed().as_secs_f64();
    Ok((secs, std::fs::metadata(&path).context("trace size")?.len()))
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut n = 2_000_000u64;
    let mut dir = std::env::temp_dir();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => n = args.next().context("--events N")?.parse()?,
            "--dir" => dir = PathBuf::from(args.next().context("--dir DIR")?),
            _ => {}
        }
    }
    let records: Vec<TimelineRecord> = synth::launches(n, synth::SCENARIO_T0).collect();
    let path = dir.join(format!(
        "ingero-record-bench-{}.pftrace",
        std::process::id()
    ));

    let (secs, bytes) = write(path.clone(), &records, false)?;
    println!("bytes_per_call {:.2} bytes", bytes as f64 / n as f64);
    println!("writer_throughput {:.2} M calls/s", n as f64 / secs / 1e6);
    let (_, bytes_mid) = write(path.clone(), &records, true)?;
    println!(
        "bytes_per_call_with_machine_id {:.2} bytes",
        bytes_mid as f64 / n as f64
    );
    let (secs, bytes) = write(path.clone(), &records, false)?;

    let start = Instant::now();
    let mut reader = TraceReader::from_files(vec![path.clone()], TimeRange::all());
    let mut count = 0u64;
    for r in reader.by_ref() {
        r?;
        count += 1;
    }
    let rsecs = start.elapsed().as_secs_f64();
    println!(
        "reader_throughput {:.2} M records/s ({} packets, {:.2} M packets/s)",
        count as f64 / rsecs / 1e6,
        reader.packets(),
        reader.packets() as f64 / rsecs / 1e6
    );
    println!("reader_bandwidth {:.0} MB/s", bytes as f64 / rsecs / 1e6);
    let _ = secs;
    std::fs::remove_file(&path).ok();
    Ok(())
}
