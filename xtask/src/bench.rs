//! `cargo xtask bench`: benchmarks whose numbers go into docs/benchmarks.md.

use anyhow::Result;
use clap::Args;

#[derive(Args)]
pub struct BenchArgs {}

pub fn run(_args: &BenchArgs) -> Result<()> {
    anyhow::bail!("not yet")
}
