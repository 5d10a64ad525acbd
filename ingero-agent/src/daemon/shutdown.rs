//! The end of a session, in the order that loses nothing: stop the probes, drain both rings
//! and the annotation queue to empty, write the final stats, close the socket and the
//! recording, print the summary, and exit while a child releases the uprobes; with the exit
//! code of `trace -- CMD`'s command when there is one.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::annotations::handle_annotation;
use super::drain::{drain, drain_cuda};
use super::report::{drops, final_stats, render, stats_json};
use super::setup::Daemon;
use super::signals::Signals;

/// Shuts the session down; does not return once the probes are handed to the releasing child.
pub(super) async fn finish(daemon: Daemon, signals: Signals) -> Result<ExitCode> {
    // A second signal during shutdown ends the process at once.
    signals.exit_on_next();
    let Daemon {
        mut probes,
        mut pipeline,
        mut cuda,
        mut sched,
        ingest,
        mut annotations,
        nvtx,
        mut nvtx_ranges,
        live_table,
        command,
        mut exit_code,
        ..
    } = daemon;

    if let Err(e) = probes.stop() {
        eprintln!("ingero: stopping the probes failed: {e:#}");
    }
    drain_cuda(cuda.get_mut(), &mut pipeline);
    drain(sched.get_mut(), &mut pipeline);
    // The probes are stopped and both rings empty: no exit waits for anything now.
    pipeline.settle_exits();
    // The fallback's ranges still open (their processes outlive tracing) end here.
    pipeline.finish_nvtx_fallback();
    if let Some(rx) = annotations.as_mut() {
        while let Ok(annotation) = rx.try_recv() {
            handle_annotation(&mut pipeline, annotation);
        }
    }
    // The NVTX connections close first: the ranges still open end here, as unclosed.
    if let Some(server) = nvtx {
        server.shutdown().await;
    }
    if let Some(rx) = nvtx_ranges.as_mut() {
        while let Ok(range) = rx.try_recv() {
            pipeline.write_nvtx(range);
        }
    }
    // The live export ends before anything reports: its last spans need the recording's
    // last label states, and its final counts belong in the statistics.
    if pipeline.otlp.is_some() {
        let drops = drops(&pipeline, &probes, ingest.as_ref());
        if let (Some(o), Some(r)) = (pipeline.otlp.as_mut(), pipeline.recording.as_mut()) {
            o.finish(r, &pipeline.stats, drops);
        }
        if let Some(o) = &pipeline.otlp {
            eprintln!("ingero: {}", o.summary());
        }
    }
    let summary = render(&pipeline, &probes, ingest.as_ref());
    if pipeline.json_enabled() {
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
    if pipeline.json_enabled() {
        eprint!("{summary}");
    } else {
        if live_table {
            print!("\x1b[H\x1b[2J");
        }
        print!("{summary}");
    }
    let _ = std::io::stdout().flush();
    // The session ended before the command (--duration, an output error): ingero still stands
    // for the command, so it waits and exits with its code.
    if let Some(mut command) = command {
        eprintln!(
            "ingero: tracing stopped; waiting for the command (pid {}) to exit",
            command.pid()
        );
        exit_code = command.wait().await;
    }
    probes.release_in_background(i32::from(exit_code))
}
