//! Writes a synthetic recording through the real `Recorder`: the fixed scenario (every record
//! kind) followed by N launch-dominated CUDA calls.
//!
//! `cargo run -p ingero-agent --example synth-trace -- OUT.pftrace [--events N] [--max-file-size BYTES] [--labels]`
//!
//! `--labels` adds a `step` annotation every 2,000 calls and a `request_id` span every 500.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ingero_agent::record::{DEFAULT_MAX_FILE_SIZE, synth};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let mut events = 0u64;
    let mut max_file_size = DEFAULT_MAX_FILE_SIZE;
    let mut labels = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => {
                events = args
                    .next()
                    .context("--events needs a number")?
                    .parse()
                    .context("--events")?
            }
            "--max-file-size" => {
                max_file_size = args
                    .next()
                    .context("--max-file-size needs bytes")?
                    .parse()
                    .context("--max-file-size")?
            }
            "--labels" => labels = true,
            _ if a.starts_with("--") => bail!("unknown option {a}"),
            _ => out = Some(PathBuf::from(a)),
        }
    }
    let out = out.context(
        "usage: synth-trace OUT.pftrace [--events N] [--max-file-size BYTES] [--labels]",
    )?;
    let files = synth::write_trace(out, events, max_file_size, labels)?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}
