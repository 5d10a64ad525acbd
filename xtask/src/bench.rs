//! `cargo xtask bench probes|drain|record|analyze`: benchmarks whose numbers go into
//! docs/benchmarks.md. Each reports ratios against a baseline measured in the same run, never a
//! pass/fail on absolute time.

mod drain;
mod probes;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};

use crate::util::{run as run_cmd, workspace_root};

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

/// Compiles a C fixture from tests/fixtures into target/bench.
pub fn compile_fixture(name: &str, output: &str, extra: &[&str]) -> Result<PathBuf> {
    let root = workspace_root();
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir).context("creating target/bench")?;
    let out = dir.join(output);
    run_cmd(
        std::process::Command::new("cc")
            .args(["-O2", "-Wall", "-o"])
            .arg(&out)
            .arg(root.join("tests/fixtures").join(format!("{name}.c")))
            .args(extra),
    )?;
    if !out.exists() {
        bail!("{} was not built", out.display());
    }
    Ok(out)
}
