//! Starting a session: discover and attach the probes, open the annotation socket, build the
//! pipeline and the recording, and hand the ring buffers to the reactor. What it returns,
//! [`Daemon`], is the state the drain loop and the shutdown work on.

use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{Context, Result};
use aya::maps::{MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};
use tokio::sync::mpsc;

use ingero_trace::model::{NvtxRecord, SessionInfo};

use super::annotations::{start_ingest, start_nvtx};
use super::attach::{Attached, attach_new, discover_libraries};
use super::config::{DaemonConfig, RecordConfig};
use crate::annotate::{IngestServer, ReceivedAnnotation};
use crate::nvtx::NvtxServer;
use crate::pipeline::Pipeline;
use crate::probes::{LoadOptions, Probes, validate_ringbuf_size};
use crate::recording::Recording;

/// A running session.
pub(super) struct Daemon {
    pub(super) probes: Probes,
    pub(super) attached: Attached,
    pub(super) pipeline: Pipeline,
    pub(super) cuda: AsyncFd<RingBuf<MapData>>,
    pub(super) sched: AsyncFd<RingBuf<MapData>>,
    pub(super) ingest: Option<IngestServer>,
    pub(super) annotations: Option<mpsc::Receiver<ReceivedAnnotation>>,
    /// The NVTX socket beside the annotation socket, and its queue of ranges.
    pub(super) nvtx: Option<NvtxServer>,
    pub(super) nvtx_ranges: Option<mpsc::Receiver<NvtxRecord>>,
    /// The processes traced (`None`: every process that uses CUDA, tracked as they map it).
    pub(super) pids: Option<Vec<u32>>,
    /// Whether newly loaded runtimes are looked for (not with `--cuda-lib`).
    pub(super) rescan: bool,
    pub(super) duration: Option<Duration>,
    /// The table is redrawn every second: not with `--json`, and only on a terminal.
    pub(super) live_table: bool,
}

impl Daemon {
    /// Attaches and starts everything; the order is what scripts and users see on stderr.
    pub(super) async fn start(config: DaemonConfig) -> Result<Daemon> {
        let DaemonConfig {
            pids,
            cuda_libs,
            duration,
            json,
            ringbuf_size,
            ingest,
            record,
            top_kernels,
        } = config;
        // First, so a bad size is refused before anything is looked for or attached.
        let ringbuf_size = validate_ringbuf_size(ringbuf_size)?;
        let libraries = discover_libraries(&pids, &cuda_libs)?;
        let (mut probes, rings) = Probes::load(&LoadOptions {
            ringbuf_size,
            pids: pids.clone(),
        })?;
        let tracepoints = probes.attach_tracepoints()?;
        let mut attached = Attached::default();
        let library_count = attach_new(&mut probes, &mut attached, libraries, pids.is_none())?;
        if library_count == 0 {
            eprintln!(
                "ingero: no libcudart or libcuda found (searched running processes and install places); \
                 tracing scheduler and process events only. Name one with --cuda-lib PATH."
            );
        }
        // Ingest is listening before `attached` is printed: scripts start writers on that line.
        let ingest_config = ingest.clone();
        let (ingest, annotations) = start_ingest(ingest).await?;
        let (nvtx, nvtx_ranges) = match (&ingest, &ingest_config) {
            (Some(server), Some(cfg)) => match start_nvtx(server, cfg).await {
                Some((s, rx)) => (Some(s), Some(rx)),
                None => (None, None),
            },
            _ => (None, None),
        };
        let scope = match &pids {
            Some(pids) => format!("pids {pids:?}"),
            None => "every process that uses CUDA".to_string(),
        };
        let targets = vec![scope.clone()];
        eprintln!(
            "ingero: attached {} probes ({library_count} libraries, {tracepoints} tracepoints); tracing {scope}",
            probes.probe_count()
        );

        let live_table = !json && std::io::stdout().is_terminal();
        let json_out: Option<Box<dyn Write + Send>> = json.then(|| {
            Box::new(std::io::BufWriter::with_capacity(
                1 << 16,
                std::io::stdout(),
            )) as _
        });
        let mut pipeline = Pipeline::new(json_out);
        pipeline.recording = start_recording(record, targets, attached.probe_names())?;
        pipeline.set_names_ring(rings.names);
        pipeline.stats.top_kernels = top_kernels;
        pipeline.nvtx = nvtx.as_ref().map(NvtxServer::shared_counters);
        let cuda = register(rings.cuda)?;
        let sched = register(rings.sched)?;
        Ok(Daemon {
            probes,
            attached,
            pipeline,
            cuda,
            sched,
            ingest,
            annotations,
            nvtx,
            nvtx_ranges,
            rescan: cuda_libs.is_empty(),
            pids,
            duration,
            live_table,
        })
    }
}

/// Opens the recording, its session metadata naming what is traced and with which probes.
fn start_recording(
    record: Option<RecordConfig>,
    targets: Vec<String>,
    probes: Vec<String>,
) -> Result<Option<Recording>> {
    let Some(RecordConfig {
        mut recorder,
        merger,
    }) = record
    else {
        return Ok(None);
    };
    let mut session = SessionInfo::this_host();
    session.targets = targets;
    session.probes = probes;
    recorder.session = session;
    let recording = Recording::start(recorder, merger).context("starting the recording")?;
    if let Some(path) = recording.current_path() {
        eprintln!("ingero: recording to {}", path.display());
    }
    Ok(Some(recording))
}

/// Hands a ring buffer to the reactor, which then wakes the loop when records arrive.
fn register(ring: RingBuf<MapData>) -> Result<AsyncFd<RingBuf<MapData>>> {
    let fd = ring.as_raw_fd();
    // SAFETY: the ring buffer owns its map fd for its whole lifetime and the AsyncFd owns the
    // ring buffer, so the registered descriptor stays open and unchanged until it is dropped.
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(|e| anyhow::anyhow!("registering ring buffer fd {fd} with the reactor: {e}"))
}
