//! The command line: clap definitions and one module per command.

mod trace;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ingero",
    version,
    about = "Trace CUDA workloads with eBPF and label the trace from inside the application",
    long_about = None,
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Attach to CUDA runtime libraries and the scheduler, and show or stream what happens.
    Trace(trace::TraceArgs),
}

pub fn run() -> Result<ExitCode> {
    match Cli::parse().command {
        Command::Trace(args) => trace::run(args),
    }
}
