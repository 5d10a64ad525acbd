//! The reader's raw scan rate: reads a recording with `TraceReader` and does nothing else, so
//! `cargo xtask bench analyze` can put `query`/`explain` side by side with it.
//!
//! `cargo run --release -p ingero-agent --example scan-trace -- PATH` prints
//! `records N seconds S`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use ingero_agent::read::{TimeRange, TraceReader};

fn main() -> Result<()> {
    let path = PathBuf::from(std::env::args().nth(1).context("usage: scan-trace PATH")?);
    let start = Instant::now();
    let mut n = 0u64;
    for rec in TraceReader::open(&path, TimeRange::all())? {
        rec?;
        n += 1;
    }
    println!("records {n} seconds {:.3}", start.elapsed().as_secs_f64());
    Ok(())
}
