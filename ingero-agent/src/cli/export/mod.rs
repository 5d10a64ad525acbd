//! `ingero export`: a recording sent or written elsewhere, one target per file: `otlp` (its
//! step and request spans to an OpenTelemetry Collector) and `perfetto` (several hosts'
//! recordings as one multi-machine Perfetto bundle).

mod otlp;
mod perfetto;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub target: ExportTarget,
}

/// Where a recording goes. Each target is a variant with its own flags.
#[derive(Subcommand, Debug)]
pub enum ExportTarget {
    /// Send a recording's step and request spans to an OpenTelemetry Collector over
    /// OTLP/HTTP (the spans `trace --otlp-endpoint` sends live), or print them with
    /// --dry-run. No root needed.
    Otlp(otlp::OtlpExportArgs),
    /// Bundle recordings (a directory of several hosts', searched recursively) into one TAR
    /// with a perfetto_manifest.json naming each file's machine: the Perfetto UI (v58+) and
    /// trace_processor open it as one timeline with one machine per host, aligned by
    /// REALTIME. No root needed.
    Perfetto(perfetto::PerfettoArgs),
}

pub fn run(args: ExportArgs) -> Result<ExitCode> {
    match args.target {
        ExportTarget::Otlp(a) => otlp::run(a),
        ExportTarget::Perfetto(a) => perfetto::run(a),
    }
}
