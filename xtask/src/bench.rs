//! `cargo xtask bench probes|drain|record|analyze`: benchmarks whose numbers go into
//! docs/benchmarks.md. Each reports ratios against a baseline measured in the same run, never a
//! pass/fail on absolute time.

mod drain;
mod probes;

use anyhow::Result;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, ValueEnum)]
pub enum Suite {
    /// Probe cost against the bare-uprobe floor, drain capacity, end-to-end call rate.
    Probes,
}

#[derive(Args)]
pub struct BenchArgs {
    #[arg(value_enum)]
    pub suite: Suite,
    /// Seconds per timed run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
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
    }
}
