//! The reader's raw scan rate: reads a recording with `TraceReader::for_each_record` (the
//! path `query` and `explain` read through) and does nothing else, so `cargo xtask bench
//! analyze` can put them side by side with it. `--iter` reads through the iterator instead;
//! `-j 1` inflates in the reading thread, `-j 2` on a helper thread as well
//! (`TraceReader::inflate_ahead`; default: the reader's, as for `ingero query -j`).
//!
//! `cargo run --release -p ingero-trace --example scan-trace -- PATH [--iter] [-j N]` prints
//! `records N seconds S`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use ingero_trace::read::{TimeRange, TraceReader, default_inflate_ahead};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(
        args.next()
            .context("usage: scan-trace PATH [--iter] [-j N]")?,
    );
    let mut iter = false;
    let mut ahead = default_inflate_ahead();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iter" => iter = true,
            "-j" => ahead = args.next().context("-j N")?.parse::<u32>()? > 1,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let start = Instant::now();
    let mut n = 0u64;
    let mut reader = TraceReader::open(&path, TimeRange::all())?.inflate_ahead(ahead);
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
