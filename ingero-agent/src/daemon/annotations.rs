//! The annotation side of a session: opening the socket (and the NVTX socket beside it),
//! waiting on their queues in the loop, and passing each annotation and NVTX range on (to
//! `--json` output and the recording).

use std::path::PathBuf;

use anyhow::{Context, Result};
use ingero_trace::model::{AnnotationRecord, NvtxRecord};
use tokio::sync::mpsc::Receiver;

use crate::annotate::{IngestConfig, IngestServer, ReceivedAnnotation};
use crate::nvtx::{self, NvtxServer, NvtxSocketConfig};
use crate::pipeline::Pipeline;

/// The NVTX socket beside the annotation socket (the same directory and group), with the
/// library published there; `None` when it cannot be opened (said on stderr: tracing goes
/// on without NVTX).
pub(super) async fn start_nvtx(
    ingest: &IngestServer,
    config: &IngestConfig,
) -> Option<(NvtxServer, Receiver<NvtxRecord>, Option<PathBuf>)> {
    let path = ingest.socket_path().with_file_name(nvtx::SOCKET_NAME);
    let gid = match config.group.as_deref().map(crate::annotate::resolve_group) {
        Some(Ok(g)) => Some(g),
        _ => None,
    };
    let cfg = NvtxSocketConfig {
        path,
        manage_dir: config.socket_path.is_none(),
        gid,
        allowed_uid: config.nvtx_allowed_uid,
    };
    match NvtxServer::start(&cfg).await {
        Ok((server, rx)) => {
            let published = cfg
                .path
                .parent()
                .map(nvtx::publish_library)
                .transpose()
                .unwrap_or_else(|e| {
                    eprintln!("ingero: publishing the NVTX library: {e:#}");
                    None
                })
                .flatten();
            match &published {
                Some(lib) => eprintln!(
                    "ingero: accepting NVTX ranges on {} (NVTX_INJECTION64_PATH={}; `ingero run -- CMD` sets it)",
                    server.socket_path().display(),
                    lib.display()
                ),
                None => eprintln!(
                    "ingero: accepting NVTX ranges on {}",
                    server.socket_path().display()
                ),
            }
            Some((server, rx, published))
        }
        Err(e) => {
            eprintln!("ingero: NVTX capture is off: {e:#}");
            None
        }
    }
}

/// The next NVTX range; never, without the socket.
pub(super) async fn recv_nvtx(rx: &mut Option<Receiver<NvtxRecord>>) -> Option<NvtxRecord> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

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
