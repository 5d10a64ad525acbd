//! Starting a session: discover and attach the probes, open the annotation socket, build the
//! pipeline and the recording, and hand the ring buffers to the reactor. What it returns,
//! [`Daemon`], is the state the drain loop and the shutdown work on.

use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::export::otlp::live::run::OtlpRun;
use anyhow::{Context, Result};
use aya::maps::{MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};
use tokio::sync::mpsc;

use ingero_trace::model::{NvtxRecord, SessionInfo};

use super::annotations::{start_ingest, start_nvtx};
use super::attach::{Attached, attach_new, attach_nvtx, discover_libraries};
use super::command::{self, Running};
use super::command_libraries::command_libraries;
use super::config::{DaemonConfig, RecordConfig};
use crate::annotate::{IngestConfig, IngestServer, ReceivedAnnotation};
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
    /// The processes whose mapped libraries a rescan looks at (`None`: every process).
    pub(super) search_pids: Option<Vec<u32>>,
    /// Whether a process that maps a CUDA library becomes traced (no `--pid`, no command).
    pub(super) track_mappers: bool,
    /// The command of `trace -- CMD` while it runs.
    pub(super) command: Option<Running>,
    /// What ingero exits with: 0, or the command's exit code once it exited (127 or 126 when
    /// it could not start).
    pub(super) exit_code: u8,
    /// Whether newly loaded runtimes are looked for (not with `--cuda-lib`).
    pub(super) rescan: bool,
    /// Whether the NVTX fallback is attached (NVTX capture is on), so rescans look for NVTX
    /// libraries too.
    pub(super) nvtx_fallback: bool,
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
            command: command_config,
            nvtx_allowed_uid,
            otlp,
        } = config;
        // First, so a bad size is refused before anything is looked for or attached.
        let ringbuf_size = validate_ringbuf_size(ringbuf_size)?;
        // A command is traced through the pid filter (it adds itself before it execs, its forks
        // follow), so with one the filter is on even without --pid. Its CUDA libraries are not
        // loaded yet: look for them everywhere, now and on each rescan, as without a filter.
        let filter = match (&pids, &command_config) {
            (None, Some(_)) => Some(Vec::new()),
            _ => pids.clone(),
        };
        let search_pids = if command_config.is_some() {
            None
        } else {
            pids.clone()
        };
        let track_mappers = filter.is_none();
        let mut attached = Attached::default();
        let mut libraries = discover_libraries(&search_pids, &cuda_libs, &mut attached)?;
        if let (Some(command), true) = (&command_config, cuda_libs.is_empty()) {
            libraries.extend(command_libraries(&command.program, &command.args));
        }
        let (mut probes, rings) = Probes::load(&LoadOptions {
            ringbuf_size,
            pids: filter,
        })?;
        let mut tracepoints = probes.attach_tracepoints()?;
        match probes.attach_driver_log() {
            Ok(()) => tracepoints += 1,
            // GPU faults then go unrecorded, but every call and scheduling event still is.
            Err(e) => {
                eprintln!("ingero: NVIDIA driver messages (Xid GPU faults) are not captured: {e:#}")
            }
        }
        let library_count = attach_new(&mut probes, &mut attached, libraries, track_mappers)?;
        // Tracing runs from here: rescans must not wait on a large program's symbol table.
        if cuda_libs.is_empty() {
            attached.read_linked_runtimes_in_background();
        }
        if library_count == 0 {
            eprintln!(
                "ingero: no libcudart, libcuda or libnccl found (searched running processes and install places); \
                 tracing scheduler and process events only. Name one with --cuda-lib PATH."
            );
        }
        // Ingest is listening before `attached` is printed: scripts start writers on that line.
        // A command is run with NVTX capture on, so `trace -- CMD` opens the sockets itself.
        let ingest = match (ingest, &command_config) {
            (None, Some(_)) => Some(IngestConfig::default()),
            (ingest, _) => ingest,
        }
        .map(|mut c| {
            c.nvtx_allowed_uid = c.nvtx_allowed_uid.or(nvtx_allowed_uid);
            c
        });
        let ingest_config = ingest.clone();
        let (ingest, annotations) = start_ingest(ingest).await?;
        let (nvtx, nvtx_ranges, published) = match (&ingest, &ingest_config) {
            (Some(server), Some(cfg)) => match start_nvtx(server, cfg).await {
                Some((s, rx, lib)) => (Some(s), Some(rx), lib),
                None => (None, None, None),
            },
            _ => (None, None, None),
        };
        // The NVTX fallback goes with NVTX capture (see `attach.rs` for why).
        if nvtx.is_some() {
            attach_nvtx(&mut probes, &mut attached, &search_pids, true);
        }
        // The command connects to the socket this session opened, and loads the copy of the
        // library it published (where the command line chose them).
        let command_config = command_config.map(|mut c| {
            if let Some(server) = &nvtx {
                command::point_at(&mut c, server.socket_path(), published.as_deref());
            }
            c
        });
        let scope = match (&pids, &command_config) {
            (None, Some(c)) => format!("`{}` and its descendants", command::shown(c)),
            (Some(pids), Some(c)) => format!(
                "pids {pids:?} and `{}` with their descendants",
                command::shown(c)
            ),
            (Some(pids), None) => format!("pids {pids:?}"),
            (None, None) => "every process that uses CUDA".to_string(),
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
        if let (Some(settings), Some(recording)) = (otlp, pipeline.recording.as_mut()) {
            pipeline.otlp = Some(OtlpRun::start(settings, recording)?);
        }
        pipeline.set_names_ring(rings.names);
        pipeline.stats.top_kernels = top_kernels;
        pipeline.nvtx = nvtx.as_ref().map(NvtxServer::shared_counters);
        pipeline.nvtx_connected = nvtx.as_ref().map(NvtxServer::connected_pids);
        let cuda = register(rings.cuda)?;
        let sched = register(rings.sched)?;
        // Last, so the command's first calls find everything listening and recording.
        let (command, exit_code) = match &command_config {
            None => (None, 0),
            Some(c) => match command::start(c, probes.tracked_map_fd()?) {
                Ok(running) => (Some(running), 0),
                Err(code) => (None, code),
            },
        };
        Ok(Daemon {
            nvtx_fallback: nvtx.is_some(),
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
            search_pids,
            track_mappers,
            command,
            exit_code,
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
    // `--machine-name`, when given, over the host name.
    if !recorder.session.machine_name.is_empty() {
        session.machine_name = std::mem::take(&mut recorder.session.machine_name);
    }
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
