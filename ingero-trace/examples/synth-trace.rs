//! Writes a synthetic recording through the real `Recorder`: the fixed scenario (every record
//! kind) followed by N launch-dominated CUDA calls.
//!
//! `cargo run -p ingero-trace --example synth-trace -- OUT.pftrace [--events N] [--max-file-size BYTES] [--restart-bytes BYTES] [--labels] [--machine NAME ID]`
//!
//! `--labels` adds a `step` annotation every 2,000 calls and a `request_id` span every 500.
//! `--restart-bytes` sets how often the sequences inside chunks start afresh (1: every chunk).
//! `--machine NAME ID` records as a simulated host (machine name and id) instead of this one.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ingero_trace::synth;

fn main() -> Result<()> {
    const USAGE: &str = "usage: synth-trace OUT.pftrace [--events N] [--max-file-size BYTES] \
                         [--restart-bytes BYTES] [--labels] [--machine NAME ID]";
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let mut o = synth::TraceOptions::default();
    let number = |args: &mut dyn Iterator<Item = String>, flag: &str| -> Result<u64> {
        args.next()
            .with_context(|| format!("{flag} needs a number"))?
            .parse()
            .with_context(|| flag.to_owned())
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => o.events = number(&mut args, "--events")?,
            "--max-file-size" => o.max_file_size = number(&mut args, "--max-file-size")?,
            "--restart-bytes" => o.restart_bytes = number(&mut args, "--restart-bytes")?,
            "--labels" => o.labels = true,
            "--machine" => {
                let name = args.next().context("--machine needs a name and an id")?;
                let id = number(&mut args, "--machine")?;
                o.machine = Some((name, u32::try_from(id).context("--machine: id")?));
            }
            _ if a.starts_with("--") => bail!("unknown option {a}\n{USAGE}"),
            _ => out = Some(PathBuf::from(a)),
        }
    }
    let out = out.context(USAGE)?;
    let files = synth::write_trace(out, &o)?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}
