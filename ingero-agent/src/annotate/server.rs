//! The ingest server: binds the socket, accepts connections within the
//! limits, and owns the state they share ([`Shared`]: counters, global rate
//! limit, clock, queue to the timeline).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::config::IngestConfig;
use super::conn::serve;
use super::counters::IngestCountersSnapshot;
use super::listener::{SocketIdentity, bind_socket, remove_if_ours};
use super::perms::{resolve_group, sudo_hint};
use super::received::{Peer, ReceivedAnnotation};
use super::shared::Shared;

/// First pause after a failed accept (EMFILE, ENFILE, ENOMEM...).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause between accept attempts.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A running annotation socket server.
#[derive(Debug)]
pub struct IngestServer {
    path: PathBuf,
    identity: SocketIdentity,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
}

impl IngestServer {
    /// Bind the socket (refusing unsafe directories, symlinks and live
    /// sockets of another agent) and start accepting. Accepted annotations
    /// arrive on the returned receiver; when it is not drained fast enough,
    /// lines are dropped and counted rather than slowing writers. Must be
    /// called inside a tokio runtime.
    pub async fn start(
        cfg: IngestConfig,
    ) -> anyhow::Result<(IngestServer, mpsc::Receiver<ReceivedAnnotation>)> {
        let gid = cfg.group.as_deref().map(resolve_group).transpose()?;
        let (path, manage_dir) = match &cfg.socket_path {
            Some(p) => (p.clone(), false),
            None => (ingero_annotate::socket_path::agent_socket_path(), true),
        };
        let bound = bind_socket(&path, gid, manage_dir)
            .await
            .with_context(|| format!("starting annotation ingest on {}", path.display()))?;
        if gid.is_none() {
            if let Some(hint) = sudo_hint(&bound.path) {
                tracing::warn!("{hint}");
            }
        }
        tracing::info!(path = %bound.path.display(), "annotation socket listening");
        let (shared, rx) = Shared::new(&cfg);
        let (stop, stop_rx) = watch::channel(false);
        let accept_task = tokio::spawn(accept_loop(
            bound.listener,
            shared.clone(),
            cfg.max_conns,
            stop_rx,
        ));
        let server = IngestServer {
            path: bound.path,
            identity: bound.identity,
            shared,
            stop,
            accept_task,
        };
        Ok((server, rx))
    }

    /// Where the socket is.
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// Current counters.
    pub fn counters(&self) -> IngestCountersSnapshot {
        self.shared.counters.snapshot()
    }

    /// Stop accepting, close every connection, and remove the socket if the
    /// file at the path is still the one we bound. The receiver sees the end
    /// of the stream once the last queued annotation is taken.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.accept_task.await {
            tracing::warn!(error = %e, "annotation accept loop ended abnormally");
        }
        remove_if_ours(&self.path, self.identity);
    }
}

async fn accept_loop(
    listener: UnixListener,
    shared: Arc<Shared>,
    max_conns: usize,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            // Reap finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    if conns.len() >= max_conns {
                        // Closing at once tells the client to retry later;
                        // keeping it would let one user exhaust descriptors.
                        shared.counters.connection_refused();
                        drop(stream);
                        continue;
                    }
                    let peer = match stream.peer_cred() {
                        Ok(c) => Peer {
                            uid: c.uid(),
                            gid: c.gid(),
                            pid: c.pid().and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0),
                        },
                        Err(e) => {
                            // Without credentials there is no provenance and
                            // no authorisation: refuse the connection.
                            tracing::warn!(error = %e, "SO_PEERCRED failed; closing annotation connection");
                            shared.counters.connection_refused();
                            continue;
                        }
                    };
                    shared.counters.connection_opened();
                    let shared = shared.clone();
                    conns.spawn(async move {
                        let guard = ClosedOnDrop(shared.clone());
                        serve(stream, shared, peer).await;
                        drop(guard);
                    });
                }
                Err(e) => {
                    // EMFILE and friends: the listener stays readable, so
                    // retrying at once would spin. Back off and try again.
                    tracing::warn!(error = %e, retry_in = ?backoff, "accepting annotation connection failed");
                    tokio::select! {
                        _ = stop.changed() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
        }
    }
    // Aborts every connection task; their guards run, their Arcs drop.
    conns.shutdown().await;
}

/// Decrements `connections_open` however a connection task ends (including
/// being aborted at shutdown).
struct ClosedOnDrop(Arc<Shared>);

impl Drop for ClosedOnDrop {
    fn drop(&mut self) {
        self.0.counters.connection_closed();
    }
}
