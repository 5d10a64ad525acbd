//! `ingero`: traces what CUDA workloads do (CUDA runtime calls, scheduler stalls, process
//! lifecycle) with eBPF, and lets the application label the trace with its own meaning.
//!
//! Data flows one way: kernel → ring buffers → [`decode`] → [`pipeline`] → outputs.

mod cli;
mod decode;
mod discover;
mod live;
mod output;
mod pipeline;
mod probes;
pub mod annotate;
pub mod timeline;

use std::process::ExitCode;

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("INGERO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match cli::run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("ingero: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
