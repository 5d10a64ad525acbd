//! The loop of a session: drain a ring buffer when it becomes readable (and both on a short
//! tick, for records that did not wake the reactor), pass annotations on, and once a second
//! flush, report and rescan (CUDA and, with NVTX capture on, NVTX libraries); until the duration ends, a signal arrives or output fails, or the
//! command of `trace -- CMD` exits (a signal is then passed to the command instead).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use aya::maps::{MapData, RingBuf};

use super::annotations::{handle_annotation, recv, recv_nvtx};
use super::attach::{attach_nvtx, collect_nvtx, rescan};
use super::command::Running;
use super::report::{drops, render, stats_json};
use super::setup::Daemon;
use super::signals::Signals;
use crate::pipeline::Pipeline;
use crate::probes::DRAIN_INTERVAL;

/// With `--json`, a `"type":"stats"` line is written every this many seconds (and at the end).
const JSON_STATS_EVERY_TICKS: u64 = 10;

/// How often the process list is rescanned for newly loaded CUDA runtimes.
const RESCAN_EVERY: Duration = Duration::from_secs(2);

/// Runs until the duration ends, a signal arrives or writing the output fails. An error
/// waiting on a ring buffer ends it (and the session) at once.
pub(super) async fn run(d: &mut Daemon, signals: &mut Signals) -> Result<()> {
    let deadline = d.duration.map(|t| tokio::time::Instant::now() + t);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut drain_tick = tokio::time::interval(DRAIN_INTERVAL);
    let mut last_rescan = Instant::now();
    let mut stats_ticks: u64 = 0;

    loop {
        tokio::select! {
            guard = d.cuda.readable_mut() => {
                let mut guard = guard.context("waiting on the CUDA ring buffer")?;
                drain_cuda(guard.get_inner_mut(), &mut d.pipeline);
                guard.clear_ready();
            }
            guard = d.sched.readable_mut() => {
                let mut guard = guard.context("waiting on the scheduler ring buffer")?;
                drain(guard.get_inner_mut(), &mut d.pipeline);
                guard.clear_ready();
            }
            Some(annotation) = recv(&mut d.annotations) => {
                handle_annotation(&mut d.pipeline, annotation);
            }
            Some(range) = recv_nvtx(&mut d.nvtx_ranges) => {
                d.pipeline.write_nvtx(range);
            }
            _ = drain_tick.tick() => {
                drain_cuda(d.cuda.get_mut(), &mut d.pipeline);
                drain(d.sched.get_mut(), &mut d.pipeline);
                if let Some(recording) = d.pipeline.recording.as_mut() {
                    recording.release();
                }
            }
            _ = tick.tick() => {
                stats_ticks += 1;
                if !each_second(d, stats_ticks, &mut last_rescan) {
                    break;
                }
            }
            code = wait_command(&mut d.command) => {
                d.exit_code = code;
                d.command = None;
                break;
            }
            _ = sleep_until(deadline) => break,
            signal = signals.recv() => match &d.command {
                // The command decides: tracing ends when it exits.
                Some(command) => command.forward(signal),
                None => break,
            },
        }
    }
    Ok(())
}

/// Takes the names ring, then every record the CUDA ring holds (a launch's name was submitted
/// before the launch); the exits read before it began then take effect, as their processes'
/// last CUDA records were in it. Returns how many CUDA records it took.
pub(super) fn drain_cuda(ring: &mut RingBuf<MapData>, pipeline: &mut Pipeline) -> usize {
    let mark = pipeline.cuda_drain_begins();
    pipeline.drain_names();
    let n = drain(ring, pipeline);
    pipeline.cuda_drain_ended(mark);
    n
}

/// Takes every record the ring holds through the pipeline; returns how many.
pub(super) fn drain(ring: &mut RingBuf<MapData>, pipeline: &mut Pipeline) -> usize {
    let mut n = 0;
    while let Some(item) = ring.next() {
        pipeline.handle_record(&item);
        n += 1;
    }
    n
}

/// The work of each second: stats line, flush, recording tick, live table, rescan. Returns
/// false when writing the output failed, which ends tracing.
fn each_second(d: &mut Daemon, stats_ticks: u64, last_rescan: &mut Instant) -> bool {
    if d.pipeline.json_enabled() && stats_ticks.is_multiple_of(JSON_STATS_EVERY_TICKS) {
        let line = stats_json(&d.pipeline, &d.probes, d.ingest.as_ref(), false);
        d.pipeline.write_json_line(&line);
    }
    d.pipeline.flush();
    let lost: u64 = drops(&d.pipeline, &d.probes, d.ingest.as_ref())
        .iter()
        .map(|(_, n)| n)
        .sum();
    if let Some(recording) = d.pipeline.recording.as_mut() {
        recording.tick(lost);
    }
    if d.pipeline.otlp.is_some() {
        let drops = drops(&d.pipeline, &d.probes, d.ingest.as_ref());
        if let Some(o) = d.pipeline.otlp.as_mut() {
            o.each_second(&d.pipeline.stats, drops);
        }
    }
    if d.live_table {
        let text = render(&d.pipeline, &d.probes, d.ingest.as_ref());
        print!("\x1b[H\x1b[2J{text}");
        let _ = std::io::stdout().flush();
    }
    if (d.rescan || d.nvtx_fallback) && last_rescan.elapsed() >= RESCAN_EVERY {
        *last_rescan = Instant::now();
        if d.rescan {
            rescan(
                &mut d.probes,
                &mut d.attached,
                &d.search_pids,
                d.track_mappers,
            );
        }
        if d.nvtx_fallback {
            attach_nvtx(&mut d.probes, &mut d.attached, &d.search_pids, false);
        }
    }
    if d.nvtx_fallback {
        collect_nvtx(&mut d.probes, &mut d.attached);
    }
    d.pipeline.output_error.is_none()
}

/// The command's exit code once it exits; never, without one.
async fn wait_command(command: &mut Option<Running>) -> u8 {
    match command {
        Some(command) => command.wait().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
