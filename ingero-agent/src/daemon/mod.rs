//! The tracing daemon behind `ingero trace`: discover CUDA runtimes, attach, drain the ring
//! buffers into the pipeline (live table, `--json` lines, recording), merge annotations from
//! the socket, until the duration ends or a signal arrives.
//!
//! It takes a plain [`DaemonConfig`] (the command line builds one; nothing here knows clap).
//! One file per stage: `config` (what to trace), `signals` (SIGINT/SIGTERM), `attach` (which
//! libraries: discovery, attaching each once, rescans), `setup` (probes, annotation ingest,
//! pipeline, recording and rings: a running `Daemon`), `annotations` (the ingest side of the
//! loop), `drain` (the loop), `report` (stats lines, the live table, the final statistics),
//! `shutdown`; `command` runs the command of `trace -- CMD`, whose exit ends the session.
//!
//! Shutdown order matters: stop the probes first so nothing new arrives, then drain both rings
//! to empty, then print the final summary and exit; a forked child releases the uprobes, which
//! the kernel unregisters slowly. A second signal exits at once.

mod annotations;
mod attach;
mod command;
mod config;
mod drain;
mod report;
mod setup;
mod shutdown;
mod signals;

use std::process::ExitCode;

use anyhow::{Context, Result};

pub use config::{CommandConfig, DaemonConfig, RecordConfig, nvtx_peer_allowed};

/// Traces until the configured duration ends or a signal arrives, then shuts down in order.
/// Does not return once tracing started: the process exits while a child releases the probes.
pub fn run(config: DaemonConfig) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(trace(config))
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
