//! The annotation side of a session: opening the socket, waiting on its queue in the loop,
//! and passing each annotation on (to `--json` output and the recording).

use anyhow::{Context, Result};
use ingero_trace::model::AnnotationRecord;
use tokio::sync::mpsc::Receiver;

use crate::annotate::{IngestConfig, IngestServer, ReceivedAnnotation};
use crate::pipeline::Pipeline;

/// Starts the annotation socket when `config` asks for one.
pub(super) async fn start_ingest(
    config: Option<IngestConfig>,
) -> Result<(Option<IngestServer>, Option<Receiver<ReceivedAnnotation>>)> {
    let Some(config) = config else {
        return Ok((None, None));
    };
    let group_given = config.group.is_some();
    let (server, rx) = IngestServer::start(config)
        .await
        .context("starting annotation ingest (--annotate)")?;
    eprintln!(
        "ingero: accepting annotations on {}",
        server.socket_path().display()
    );
    if !group_given {
        if let Ok(user) = std::env::var("SUDO_USER") {
            eprintln!(
                "ingero: only root can write annotations; to let {user} write them, run with \
                 --annotate-group GROUP for a group {user} belongs to"
            );
        }
    }
    Ok((Some(server), Some(rx)))
}

/// The next annotation; never, without a socket.
pub(super) async fn recv(
    rx: &mut Option<Receiver<ReceivedAnnotation>>,
) -> Option<ReceivedAnnotation> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Counts an annotation and writes it wherever events go. The record both outputs take is built
/// once, and not at all when neither is on.
pub(super) fn handle_annotation(pipeline: &mut Pipeline, annotation: ReceivedAnnotation) {
    pipeline.stats.annotations += 1;
    if !pipeline.json_enabled() && pipeline.recording.is_none() {
        return;
    }
    pipeline.write_annotation(AnnotationRecord::from(annotation));
}
