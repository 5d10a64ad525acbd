//! `ingero check`: the flags, and the exit code from [`crate::check`]'s verdict (0 when tracing
//! can work here, 1 when a check failed).

use std::{path::PathBuf, process::ExitCode};

use anyhow::Result;
use clap::Args;

use crate::check::{self, CheckOptions, render};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Check this libcudart, libcuda or libnccl instead of discovering them (repeatable).
    #[arg(long = "cuda-lib", value_name = "PATH")]
    pub cuda_lib: Vec<PathBuf>,
    /// Print one JSON object (schema: docs/json-schema.md) instead of a line per check.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let report = check::run(&CheckOptions {
        cuda_libs: args.cuda_lib,
    });
    if args.json {
        println!("{}", render::json(&report));
    } else {
        print!("{}", render::text(&report));
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
