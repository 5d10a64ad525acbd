//! The command line: clap definitions and one module per command.

mod annotate;
mod check;
mod explain;
mod export;
mod otlp;
mod query;
mod run;
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
    /// Attach to CUDA runtime libraries and the scheduler, and show or stream what happens;
    /// with `-- CMD ARGS…`, run that command, trace it and stop when it exits.
    Trace(trace::TraceArgs),
    /// Run a command with NVTX capture on (NVTX_INJECTION64_PATH pointing at ingero's
    /// injection library), for an agent tracing with `ingero trace`. No root needed.
    Run(run::RunArgs),
    /// Say whether tracing will work on this host: privileges, kernel, tracefs, a test probe,
    /// the CUDA libraries found and what they export. Exits non-zero when it cannot.
    Check(check::CheckArgs),
    /// Send annotations to a running agent (labels as flags, or NDJSON lines) and report
    /// which were accepted.
    Annotate(annotate::AnnotateArgs),
    /// Slice a recording: latency per operation, rows per label group (--group-by), per
    /// request (--by-request), or the raw events (--events). No root needed.
    Query(query::QueryArgs),
    /// Explain a recording: findings (tail latency, slow steps, leaks, contention, errors)
    /// with evidence, root cause and fixes; or rank requests (--by-request).
    Explain(explain::ExplainArgs),
    /// Send or write a recording elsewhere: `export otlp` replays its step and request spans
    /// to an OpenTelemetry Collector, `export perfetto` bundles several hosts' recordings into
    /// one multi-machine Perfetto trace. No root needed.
    Export(export::ExportArgs),
}

pub fn run() -> Result<ExitCode> {
    match Cli::parse().command {
        Command::Trace(args) => trace::run(args),
        Command::Run(args) => run::run(args),
        Command::Check(args) => check::run(args),
        Command::Query(args) => query::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Export(args) => export::run(args),
        Command::Annotate(args) => {
            let code = annotate::run(args)?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
    }
}
