//! SIGINT and SIGTERM: the first ends tracing (and starts the orderly shutdown), a second one
//! during shutdown exits at once. With `trace -- CMD`, they go to the command instead, and
//! tracing ends when it exits.

use anyhow::Result;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The two signals that stop tracing.
pub(super) struct Signals {
    sigint: Signal,
    sigterm: Signal,
}

impl Signals {
    /// Starts listening; from here on the default action (dying mid-attach) no longer applies.
    pub(super) fn install() -> Result<Signals> {
        Ok(Signals {
            sigint: signal(SignalKind::interrupt())?,
            sigterm: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for either signal; returns which (`libc::SIGINT` or `libc::SIGTERM`).
    pub(super) async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.sigint.recv() => libc::SIGINT,
            _ = self.sigterm.recv() => libc::SIGTERM,
        }
    }

    /// From now on, a signal ends the process at once (releasing the probes in a child).
    pub(super) fn exit_on_next(mut self) {
        tokio::spawn(async move {
            self.recv().await;
            crate::probes::exit_releasing_in_background(130);
        });
    }
}
