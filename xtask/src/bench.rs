//! `cargo xtask bench probes|annotate|record|analyze|nvtx|window|otlp`: benchmarks whose numbers go
//! into docs/benchmarks*.md. Each reports ratios against a baseline measured in the same run, never a
//! pass/fail on absolute time.

mod analyze;
mod annotate;
mod drain;
mod nvtx;
mod otlp;
mod probes;
mod record;
mod window;

use anyhow::Result;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, ValueEnum)]
pub enum Suite {
    /// Probe cost against the bare-uprobe floor, drain capacity, end-to-end call rate.
    Probes,
    /// Annotation ingest rate on one core, and the Python client's write() cost against 0.1.1.
    Annotate,
    /// Bytes per CUDA call, writer and reader throughput of the Perfetto recording.
    Record,
    /// `ingero query` and `explain` on a 10 M-event recording, beside the reader's raw scan.
    Analyze,
    /// libingero_nvtx.so: ns per NVTX push+pop pair without a tool, with no agent, with an
    /// agent, and a sustained paced run with zero drops.
    Nvtx,
    /// A 1 % time window of a multi-GB recording against the full scan, and the first pass per
    /// GB of labels at two recording lengths.
    Window,
    /// The OTLP export: CPU and bytes per exported span, the drain path with export on vs
    /// off, the live engine's CPU per event.
    Otlp,
}

#[derive(Args)]
pub struct BenchArgs {
    #[arg(value_enum)]
    pub suite: Suite,
    /// Seconds per timed run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// `window`: the size of the longer generated recording, in GB.
    #[arg(long, default_value_t = 2.0)]
    pub size_gb: f64,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    match args.suite {
        Suite::Probes => {
            let drain = drain::run()?;
            let probes = probes::run(args.seconds)?;
            println!("{}", probes.markdown());
            println!("{drain}");
            Ok(())
        }
        Suite::Annotate => {
            println!("{}", annotate::run_all()?);
            Ok(())
        }
        Suite::Record => {
            println!("{}", record::run()?);
            Ok(())
        }
        Suite::Analyze => {
            println!("{}", analyze::run()?);
            Ok(())
        }
        Suite::Nvtx => {
            println!("{}", nvtx::run()?);
            Ok(())
        }
        Suite::Window => {
            println!("{}", window::run(args.size_gb)?);
            Ok(())
        }
        Suite::Otlp => {
            println!("{}", otlp::run()?);
            Ok(())
        }
    }
}
