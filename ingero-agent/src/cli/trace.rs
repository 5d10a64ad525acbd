//! `ingero trace`: discover CUDA runtimes, attach, drain the ring buffers, and show a live
//! table (or `--json` lines) until the duration ends or a signal arrives.
//!
//! Shutdown order matters: stop the probes first so nothing new arrives, then drain both rings
//! to empty, then print the final summary and exit; a forked child releases the uprobes, which
//! the kernel unregisters slowly. A second signal exits at once.

use std::{
    collections::BTreeSet,
    io::{IsTerminal, Write},
    os::fd::AsRawFd,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use aya::maps::{MapData, RingBuf};
use clap::Args;
use tokio::io::{Interest, unix::AsyncFd};

use ingero_trace::model::{FinalStats, SessionInfo};
use ingero_trace::write::RecorderConfig;

use crate::{
    annotate::{IngestConfig, IngestServer, ReceivedAnnotation},
    discover::{self, LibraryFile, libraries::Search},
    live::table::{self, Footer},
    pipeline::Pipeline,
    probes::{DRAIN_INTERVAL, LoadOptions, Probes, validate_ringbuf_size},
    recording::Recording,
    timeline::merger::MergerConfig,
};

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// Trace only these processes (comma separated; their forked children too).
    #[arg(long, value_delimiter = ',', value_name = "PID")]
    pub pid: Option<Vec<u32>>,
    /// Attach to this libcudart instead of discovering them (repeatable).
    #[arg(long = "cuda-lib", value_name = "PATH")]
    pub cuda_lib: Vec<PathBuf>,
    /// Stop after this long (for example `30s`, `5m`); default: until Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Print one JSON object per event on stdout instead of the live table.
    #[arg(long)]
    pub json: bool,
    /// Bytes per ring buffer: a power of two, at least a page.
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub ringbuf_size: u64,
    #[command(flatten)]
    pub annotate: AnnotateFlags,
    #[command(flatten)]
    pub record: RecordFlags,
}

/// Recording flags of `ingero trace`.
#[derive(Args, Debug)]
pub struct RecordFlags {
    /// Record a Perfetto trace (`--record=false` turns it off even with -o). Default directory:
    /// ~/.ingero/traces/ of the invoking user (under sudo, SUDO_USER's), one file per session.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub record: Option<bool>,
    /// Write the recording to this file instead (implies --record).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Start a new file (self-contained) when the current one reaches this size.
    #[arg(long, value_name = "BYTES", default_value_t = ingero_trace::write::DEFAULT_MAX_FILE_SIZE)]
    pub max_file_size: u64,
    /// Delete the oldest recordings of the trace directory beyond this total.
    #[arg(long, value_name = "BYTES", default_value_t = ingero_trace::write::DEFAULT_MAX_TOTAL_SIZE)]
    pub max_total_size: u64,
    /// Compression of the chunks the recording is written in: 1 (default) ingero's encoder,
    /// which builds the zlib stream from the packets' structure (fastest, and smaller than
    /// libdeflate's level 1 on CUDA calls); 2 … 12 libdeflate's levels (12 smallest); 0
    /// writes packets uncompressed.
    #[arg(long, value_name = "LEVEL", default_value_t = ingero_trace::write::DEFAULT_COMPRESSION_LEVEL,
          value_parser = clap::value_parser!(u32).range(0..=12))]
    pub compression_level: u32,
    /// How long records are held to put them in timestamp order before writing.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "250ms")]
    pub reorder_window: Duration,
}

impl RecordFlags {
    fn enabled(&self) -> bool {
        self.record.unwrap_or(self.output.is_some())
    }

    fn start(&self, targets: Vec<String>, probes: Vec<String>) -> Result<Option<Recording>> {
        if !self.enabled() {
            return Ok(None);
        }
        let mut session = SessionInfo::this_host();
        session.targets = targets;
        session.probes = probes;
        let config = RecorderConfig {
            path: self.output.clone(),
            max_file_size: self.max_file_size,
            max_total_size: self.max_total_size,
            compression_level: self.compression_level,
            session,
            ..RecorderConfig::default()
        };
        let merger = MergerConfig {
            window: self.reorder_window,
            ..MergerConfig::default()
        };
        let recording = Recording::start(config, merger).context("starting the recording")?;
        if let Some(path) = recording.current_path() {
            eprintln!("ingero: recording to {}", path.display());
        }
        Ok(Some(recording))
    }
}

/// Annotation ingest flags of `ingero trace`.
#[derive(Args, Debug)]
pub struct AnnotateFlags {
    /// Accept annotations from applications on the annotation socket.
    #[arg(long)]
    pub annotate: bool,
    /// Socket path (default: /run/ingero/annotate.sock when /run is writable, else
    /// ~/.ingero/annotate/annotate.sock; $INGERO_ANNOTATE_SOCKET overrides).
    #[arg(long, value_name = "PATH", requires = "annotate")]
    pub annotate_socket: Option<PathBuf>,
    /// Let members of this group write annotations (directory 0710, socket 0770), for a job
    /// that runs unprivileged while the agent runs under sudo.
    #[arg(long, value_name = "GROUP", requires = "annotate")]
    pub annotate_group: Option<String>,
    /// Most annotation connections open at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub annotate_max_conns: usize,
    /// Lines per second per connection (token bucket; the burst is the same size).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub annotate_rate: u32,
}

impl AnnotateFlags {
    fn config(&self) -> IngestConfig {
        IngestConfig {
            socket_path: self.annotate_socket.clone(),
            group: self.annotate_group.clone(),
            max_conns: self.annotate_max_conns,
            rate_per_conn: self.annotate_rate,
            burst: self.annotate_rate,
            ..IngestConfig::default()
        }
    }
}

/// With `--json`, a `"type":"stats"` line is written every this many seconds (and at the end).
const JSON_STATS_EVERY_TICKS: u64 = 10;

/// How often the process list is rescanned for newly loaded CUDA runtimes.
const RESCAN_EVERY: Duration = Duration::from_secs(2);

pub fn run(args: TraceArgs) -> Result<ExitCode> {
    let ringbuf_size = validate_ringbuf_size(args.ringbuf_size)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(trace(args, ringbuf_size))
}

/// Libraries attached so far, by (device, inode), and processes already tracked.
#[derive(Default)]
struct Attached {
    inodes: BTreeSet<(u64, u64)>,
    pids: BTreeSet<u32>,
    /// `path: symbols` per attached library, for the recording's session metadata.
    libraries: Vec<String>,
}

impl Attached {
    fn probe_names(&self) -> Vec<String> {
        let mut names = self.libraries.clone();
        names.push("tracepoints: sched_switch, sched_process_exec, sched_process_exit, sched_process_fork, task_newtask".into());
        names
    }
}

fn attach_new(
    probes: &mut Probes,
    attached: &mut Attached,
    libraries: Vec<LibraryFile>,
    track_mappers: bool,
) -> Result<usize> {
    let mut new = 0;
    for library in libraries {
        if track_mappers {
            let fresh: Vec<u32> = library
                .mapped_by
                .iter()
                .copied()
                .filter(|p| attached.pids.insert(*p))
                .collect();
            if let Err(e) = probes.track(&fresh) {
                tracing::warn!("could not track processes {fresh:?}: {e:#}");
            }
        }
        if !attached.inodes.insert((library.dev, library.ino)) {
            continue;
        }
        let report = probes.attach_library(&library)?;
        new += 1;
        attached.libraries.push(format!(
            "{}: {}",
            library.path.display(),
            report.attached.join(", ")
        ));
        let mut line = format!(
            "ingero: {}: probing {} symbols",
            library.path.display(),
            report.attached.len()
        );
        if !report.missing.is_empty() {
            line.push_str(&format!(
                "; not exported here: {}",
                report.missing.join(", ")
            ));
        }
        eprintln!("{line}");
    }
    Ok(new)
}

fn discover_libraries(args: &TraceArgs) -> Result<Vec<LibraryFile>> {
    if args.cuda_lib.is_empty() {
        discover::find_cuda_runtimes(&Search::new(args.pid.clone()))
    } else {
        args.cuda_lib
            .iter()
            .map(|p| discover::libraries::library_at(p))
            .collect()
    }
}

fn drain(ring: &mut RingBuf<MapData>, pipeline: &mut Pipeline) -> usize {
    let mut n = 0;
    while let Some(item) = ring.next() {
        pipeline.handle_record(&item);
        n += 1;
    }
    n
}

fn register(ring: RingBuf<MapData>) -> Result<AsyncFd<RingBuf<MapData>>> {
    let fd = ring.as_raw_fd();
    // SAFETY: the ring buffer owns its map fd for its whole lifetime and the AsyncFd owns the
    // ring buffer, so the registered descriptor stays open and unchanged until it is dropped.
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(|e| anyhow::anyhow!("registering ring buffer fd {fd} with the reactor: {e}"))
}

async fn trace(args: TraceArgs, ringbuf_size: u32) -> Result<ExitCode> {
    // Installed first: a signal that arrives while attaching must still shut down cleanly.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let libraries = discover_libraries(&args)?;
    let (mut probes, rings) = Probes::load(&LoadOptions {
        ringbuf_size,
        pids: args.pid.clone(),
    })?;
    let tracepoints = probes.attach_tracepoints()?;
    let mut attached = Attached::default();
    let track_mappers = args.pid.is_none();
    let library_count = attach_new(&mut probes, &mut attached, libraries, track_mappers)?;
    if library_count == 0 {
        eprintln!(
            "ingero: no libcudart found (searched running processes and install places); \
             tracing scheduler and process events only. Name one with --cuda-lib PATH."
        );
    }
    // Ingest is listening before `attached` is printed: scripts start writers on that line.
    let (ingest, mut annotations) = start_ingest(&args.annotate).await?;
    let scope = match &args.pid {
        Some(pids) => format!("pids {pids:?}"),
        None => "every process that uses CUDA".to_string(),
    };
    let targets = vec![scope.clone()];
    eprintln!(
        "ingero: attached {} probes ({library_count} libraries, {tracepoints} tracepoints); tracing {scope}",
        probes.probe_count()
    );

    let live_table = !args.json && std::io::stdout().is_terminal();
    let json_out: Option<Box<dyn Write + Send>> = args.json.then(|| {
        Box::new(std::io::BufWriter::with_capacity(
            1 << 16,
            std::io::stdout(),
        )) as _
    });
    let mut pipeline = Pipeline::new(json_out);
    pipeline.recording = args.record.start(targets.clone(), attached.probe_names())?;
    let mut cuda = register(rings.cuda)?;
    let mut sched = register(rings.sched)?;

    let deadline = args.duration.map(|d| tokio::time::Instant::now() + d);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut drain_tick = tokio::time::interval(DRAIN_INTERVAL);
    let mut last_rescan = Instant::now();
    let mut stats_ticks: u64 = 0;

    loop {
        tokio::select! {
            guard = cuda.readable_mut() => {
                let mut guard = guard.context("waiting on the CUDA ring buffer")?;
                drain(guard.get_inner_mut(), &mut pipeline);
                guard.clear_ready();
            }
            guard = sched.readable_mut() => {
                let mut guard = guard.context("waiting on the scheduler ring buffer")?;
                drain(guard.get_inner_mut(), &mut pipeline);
                guard.clear_ready();
            }
            Some(annotation) = recv(&mut annotations) => {
                handle_annotation(&mut pipeline, &annotation);
            }
            _ = drain_tick.tick() => {
                drain(cuda.get_mut(), &mut pipeline);
                drain(sched.get_mut(), &mut pipeline);
                if let Some(recording) = pipeline.recording.as_mut() {
                    recording.release();
                }
            }
            _ = tick.tick() => {
                stats_ticks += 1;
                if args.json && stats_ticks.is_multiple_of(JSON_STATS_EVERY_TICKS) {
                    let line = stats_json(&pipeline, &probes, ingest.as_ref(), false);
                    pipeline.write_json_line(&line);
                }
                pipeline.flush();
                let lost: u64 = drops(&pipeline, &probes, ingest.as_ref()).iter().map(|(_, n)| n).sum();
                if let Some(recording) = pipeline.recording.as_mut() {
                    recording.tick(lost);
                }
                if live_table {
                    let text = render(&pipeline, &probes, ingest.as_ref());
                    print!("\x1b[H\x1b[2J{text}");
                    let _ = std::io::stdout().flush();
                }
                if args.cuda_lib.is_empty() && last_rescan.elapsed() >= RESCAN_EVERY {
                    last_rescan = Instant::now();
                    if let Ok(found) = discover::find_cuda_runtimes(&Search { install_places: false, ..Search::new(args.pid.clone()) }) {
                        if let Err(e) = attach_new(&mut probes, &mut attached, found, track_mappers) {
                            tracing::warn!("attaching a newly loaded CUDA runtime failed: {e:#}");
                        }
                    }
                }
                if pipeline.output_error.is_some() {
                    break;
                }
            }
            _ = sleep_until(deadline) => break,
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
        }
    }

    // A second signal during shutdown ends the process at once.
    tokio::spawn(async move {
        tokio::select! {
            _ = sigint.recv() => {},
            _ = sigterm.recv() => {},
        }
        crate::probes::exit_releasing_in_background(130);
    });

    if let Err(e) = probes.stop() {
        eprintln!("ingero: stopping the probes failed: {e:#}");
    }
    drain(cuda.get_mut(), &mut pipeline);
    drain(sched.get_mut(), &mut pipeline);
    if let Some(rx) = annotations.as_mut() {
        while let Ok(annotation) = rx.try_recv() {
            handle_annotation(&mut pipeline, &annotation);
        }
    }
    let summary = render(&pipeline, &probes, ingest.as_ref());
    if args.json {
        let line = stats_json(&pipeline, &probes, ingest.as_ref(), true);
        pipeline.write_json_line(&line);
    }
    let final_stats = final_stats(&pipeline, &probes, ingest.as_ref());
    if let Some(server) = ingest {
        server.shutdown().await;
    }
    pipeline.flush();
    if let Some(recording) = pipeline.recording.take() {
        match recording.finish(final_stats) {
            Ok(files) => {
                for file in files {
                    eprintln!("ingero: recorded {}", file.display());
                }
            }
            Err(e) => eprintln!("ingero: finishing the recording failed: {e:#}"),
        }
    }
    if let Some(err) = &pipeline.output_error {
        if err.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("ingero: writing output failed: {err}");
        }
    }
    if args.json {
        eprint!("{summary}");
    } else {
        if live_table {
            print!("\x1b[H\x1b[2J");
        }
        print!("{summary}");
    }
    let _ = std::io::stdout().flush();
    probes.release_in_background()
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn start_ingest(
    flags: &AnnotateFlags,
) -> Result<(
    Option<IngestServer>,
    Option<tokio::sync::mpsc::Receiver<ReceivedAnnotation>>,
)> {
    if !flags.annotate {
        return Ok((None, None));
    }
    let (server, rx) = IngestServer::start(flags.config())
        .await
        .context("starting annotation ingest (--annotate)")?;
    eprintln!(
        "ingero: accepting annotations on {}",
        server.socket_path().display()
    );
    if flags.annotate_group.is_none() {
        if let Ok(user) = std::env::var("SUDO_USER") {
            eprintln!(
                "ingero: only root can write annotations; to let {user} write them, run with \
                 --annotate-group GROUP for a group {user} belongs to"
            );
        }
    }
    Ok((Some(server), Some(rx)))
}

async fn recv(
    rx: &mut Option<tokio::sync::mpsc::Receiver<ReceivedAnnotation>>,
) -> Option<ReceivedAnnotation> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

fn handle_annotation(pipeline: &mut Pipeline, annotation: &ReceivedAnnotation) {
    pipeline.stats.annotations += 1;
    if pipeline.json_enabled() {
        pipeline.write_json_line(&annotation.to_json());
    }
    if let Some(recording) = pipeline.recording.as_mut() {
        recording.push_annotation(annotation);
    }
}

/// The statistics written at the end of a recording.
fn final_stats(pipeline: &Pipeline, probes: &Probes, ingest: Option<&IngestServer>) -> FinalStats {
    let stats = &pipeline.stats;
    let cuda: u64 = stats.ops.values().map(|s| s.count).sum();
    let off_cpu = stats.preempted.count + stats.blocked.count;
    let process: u64 = stats.lifecycle.values().sum();
    let own = |pairs: Vec<(&'static str, u64)>| {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    FinalStats {
        events: own(vec![
            ("cuda", cuda),
            ("off_cpu", off_cpu),
            ("process", process),
            ("annotation", stats.annotations),
        ]),
        drops: own(drops(pipeline, probes, ingest)),
        rejected: ingest
            .map(|s| {
                s.counters()
                    .rejected
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            })
            .unwrap_or_default(),
        recorder: Vec::new(),
    }
}

/// Every loss counter: the kernel's, the decoder's, and annotation ingest's.
fn drops(
    pipeline: &Pipeline,
    probes: &Probes,
    ingest: Option<&IngestServer>,
) -> Vec<(&'static str, u64)> {
    let mut drops = probes.counters().read();
    drops.extend(pipeline.decode_errors.iter().map(|(k, v)| (*k, *v)));
    if let Some(server) = ingest {
        drops.push(("annotations_dropped", server.counters().dropped));
    }
    drops
}

/// The `"type":"stats"` line of `--json` output (documented in docs/json-schema.md).
fn stats_json(
    pipeline: &Pipeline,
    probes: &Probes,
    ingest: Option<&IngestServer>,
    last: bool,
) -> serde_json::Value {
    let stats = &pipeline.stats;
    let ops: serde_json::Map<String, serde_json::Value> = stats
        .ops
        .iter()
        .map(|(op, s)| {
            (
                op.name().to_string(),
                serde_json::json!({
                    "count": s.count, "errors": s.errors,
                    "p50_ns": s.quantile(0.5), "p95_ns": s.quantile(0.95), "p99_ns": s.quantile(0.99),
                    "max_ns": s.max_ns, "total_ns": s.total_ns,
                }),
            )
        })
        .collect();
    let drops: serde_json::Map<String, serde_json::Value> = drops(pipeline, probes, ingest)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    serde_json::json!({
        "type": "stats",
        "final": last,
        "events": stats.events,
        "ops": ops,
        "off_cpu": {
            "preempted": {"count": stats.preempted.count, "total_ns": stats.preempted.total_ns, "max_ns": stats.preempted.max_ns},
            "blocked": {"count": stats.blocked.count, "total_ns": stats.blocked.total_ns, "max_ns": stats.blocked.max_ns},
        },
        "processes": stats.lifecycle,
        "drops": drops,
        "annotations": ingest.map(|s| serde_json::to_value(s.counters()).unwrap_or_default()),
    })
}

fn render(pipeline: &Pipeline, probes: &Probes, ingest: Option<&IngestServer>) -> String {
    let drops = drops(pipeline, probes, ingest);
    let mut extra = Vec::new();
    if let Some(server) = ingest {
        let c = server.counters();
        let mut line = format!(
            "annotations: {} accepted, {} rejected, {} connections open",
            c.ingested, c.rejected_total, c.connections_open
        );
        if !c.rejected.is_empty() {
            let reasons: Vec<String> = c.rejected.iter().map(|(k, v)| format!("{k} {v}")).collect();
            line.push_str(&format!(" (rejected: {})", reasons.join(", ")));
        }
        extra.push(line);
    }
    table::render(
        &pipeline.stats,
        &Footer {
            drops: &drops,
            extra: &extra,
        },
    )
}
