//! The tracing daemon behind `ingero trace`: discover CUDA runtimes, attach, drain the ring
//! buffers into the pipeline (live table, `--json` lines, recording), merge annotations from
//! the socket, until the duration ends or a signal arrives.
//!
//! It takes a plain [`DaemonConfig`] (the command line builds one; nothing here knows clap).
//! One file per stage: `config` (what to trace), `signals` (SIGINT/SIGTERM), `attach` (which
//! libraries: discovery, attaching each once, rescans), `setup` (probes, annotation ingest,
//! pipeline, recording and rings: a running `Daemon`), `annotations` (the ingest side of the
//! loop), `drain` (the loop), `report` (stats lines, the live table, the final statistics),
//! `shutdown`; `command` runs the command of `trace -- CMD`, whose exit ends the session, and
//! `command_libraries` finds the libraries that command will load before it starts.
//!
//! Shutdown order matters: stop the probes first so nothing new arrives, then drain both rings
//! to empty, then print the final summary and exit; a forked child releases the uprobes, which
//! the kernel unregisters slowly. A second signal exits at once.

mod annotations;
mod attach;
mod command;
mod command_libraries;
mod config;
mod drain;
mod report;
mod setup;
mod shutdown;
mod signals;

#[cfg(test)]
mod runtime_tests;

use std::process::ExitCode;

use anyhow::{Context, Result};

pub use config::{CommandConfig, DaemonConfig, RecordConfig, nvtx_peer_allowed};

/// Worker threads for the annotation and NVTX sockets' tasks: one is enough (each line costs
/// microseconds), and it is not the drain loop's.
const SOCKET_WORKERS: usize = 1;

/// Traces until the configured duration ends or a signal arrives, then shuts down in order.
/// Does not return once tracing started: the process exits while a child releases the probes.
pub fn run(config: DaemonConfig) -> Result<ExitCode> {
    runtime()?.block_on(trace(config))
}

/// The session's runtime.
fn runtime() -> Result<tokio::runtime::Runtime> {
    // The drain loop runs on this thread (`block_on`); the sockets' accept and connection tasks
    // (`tokio::spawn`) run on a worker of their own. A burst of probe records (`import torch`
    // registers ~24k kernels) then cannot hold up a client's annotation until its process has
    // exited and the pid check rejects it: the server checks and stamps each line as it
    // arrives, and only the hand-off to the timeline waits for the loop (a bounded queue).
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SOCKET_WORKERS)
        .thread_name("ingero-sockets")
        .enable_all()
        .build()
        .context("starting the async runtime")
}

async fn trace(config: DaemonConfig) -> Result<ExitCode> {
    // Installed first: a signal that arrives while attaching must still shut down cleanly.
    let mut signals = signals::Signals::install()?;
    let command_given = config.command.is_some();
    let mut daemon = setup::Daemon::start(config).await?;
    // A command that could not start ends the session at once (recording closed cleanly).
    if !command_given || daemon.command.is_some() {
        drain::run(&mut daemon, &mut signals).await?;
    }
    shutdown::finish(daemon, signals).await
}
