//! The reader's raw scan rate: reads a recording with `TraceReader::for_each_record` (the
//! path `query` and `explain` read through) and does nothing else, so `cargo xtask bench
//! analyze` can put them side by side with it. `--iter` reads through the iterator instead.
//!
//! `cargo run --release -p ingero-agent --example scan-trace -- PATH [--iter]` prints
//! `records N seconds S`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use ingero_agent::read::{TimeRange, TraceReader};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().context("usage: scan-trace PATH [--iter]")?);
    let iter = match args.next().as_deref() {
        None => false,
        Some("--iter") => true,
        Some(other) => anyhow::bail!("unknown argument {other}"),
    };
    let start = Instant::now();
    let mut n = 0u64;
    let mut reader = TraceReader::open(&path, TimeRange::all())?;
    if iter {
        for rec in reader {
            rec?;
            n += 1;
        }
    } else {
        reader.for_each_record(|_| n += 1)?;
    }
    println!("records {n} seconds {:.3}", start.elapsed().as_secs_f64());
    Ok(())
}
