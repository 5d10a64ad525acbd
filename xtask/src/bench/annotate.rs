//! `cargo xtask bench annotate`: the annotation path's two costs.
//!
//! 1. Agent ingest on one core (ingero-agent/benches/ingest.rs): parse, validate, clock
//!    conversion and queueing, against `serde_json::Value` parsing of the same lines, plus the
//!    real server end to end over a Unix socket.
//! 2. The Python client's `write()` (ingero-annotate/python/bench/bench_write.py) against a
//!    socket being drained, side by side with the published `ingero-annotate==0.1.1`, which is
//!    installed into a directory of its own under target/ for the benchmark only (it has the
//!    same import name as this repository's package).
//!
//! Ratios against the baselines measured in the same run are reported, never a pass/fail on
//! time.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::util::{output, run, workspace_root};

/// The published client the Python numbers are compared with.
const BASELINE_PACKAGE: &str = "ingero-annotate==0.1.1";

pub fn run_all() -> Result<String> {
    let ingest = output(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args(["bench", "-q", "-p", "ingero-agent", "--bench", "ingest"]),
    )?;
    let python = match python_write() {
        Ok(table) => table,
        // The Rust half stands on its own; say why the Python half is missing.
        Err(e) => format!("### Python `write()`\n\nnot measured: {e:#}\n"),
    };
    Ok(format!("{ingest}\n\n{python}"))
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The directory holding the published client, installed on first use.
fn baseline_dir() -> Result<PathBuf> {
    let dir = workspace_root().join("target/bench-annotate/ingero-annotate-0.1.1");
    if !dir.join("ingero_annotate.py").is_file() {
        run(Command::new(python())
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--target",
            ])
            .arg(&dir)
            .arg(BASELINE_PACKAGE))
        .with_context(|| format!("installing {BASELINE_PACKAGE} into {}", dir.display()))?;
    }
    Ok(dir)
}

/// One run of bench_write.py with the peer reading in `drain` mode.
fn python_run(dir: &Path, drain: &str) -> Result<serde_json::Value> {
    let out = output(
        Command::new(python())
            .current_dir(workspace_root())
            .arg(SCRIPT)
            .arg("--baseline-dir")
            .arg(dir)
            .args(["--drain", drain, "--json"]),
    )?;
    let line = out
        .lines()
        .last()
        .context("bench_write.py printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("bench_write.py: {line}"))
}

const SCRIPT: &str = "ingero-annotate/python/bench/bench_write.py";

fn python_write() -> Result<String> {
    let dir = baseline_dir()?;
    let poll = python_run(&dir, "poll")?;
    let wake = python_run(&dir, "wake")?;
    let med = |v: &serde_json::Value, k: &str| {
        v["median_us"][k]
            .as_f64()
            .with_context(|| format!("median {k}"))
    };
    let mut rows = String::new();
    for (name, key) in [
        ("`ingero-annotate==0.1.1` (baseline)", "0.1.1"),
        ("this repository", "ours"),
        (
            "bare `sock.send` of a ready line (syscall floor)",
            "send floor",
        ),
        (
            "empty call with the same arguments (call floor)",
            "call floor",
        ),
    ] {
        let (p, w) = (med(&poll, key)?, med(&wake, key)?);
        let (bp, bw) = (med(&poll, "0.1.1")?, med(&wake, "0.1.1")?);
        let ratio = |ours: f64, base: f64| {
            if key == "ours" {
                format!("{:.2}× faster", base / ours)
            } else if key == "0.1.1" {
                "1.00".to_owned()
            } else {
                "—".to_owned()
            }
        };
        rows.push_str(&format!(
            "| {name} | {p:.2} | {} | {w:.2} | {} |\n",
            ratio(p, bp),
            ratio(w, bw)
        ));
    }
    Ok(format!(
        "### Python `write()` (`python3 {SCRIPT} --baseline-dir {dir} --drain poll|wake`, \
         Python {py}, {batches} alternating batches of {batch} calls)\n\n\
         `w.write({{\"step\": str(i), \"epoch\": ...}}, pid=os.getpid())` against a Unix \
         socket drained by another process, which either reads every 0.5 ms (`poll`: the \
         client's own cost) or blocks in `recv` (`wake`: every send also wakes the reader). \
         Medians of per-batch means, in µs per call. Targets: ≤ 3 µs and ≥ 2× faster than \
         0.1.1.\n\n\
         | client | poll: µs/call | poll: ratio to 0.1.1 | wake: µs/call | wake: ratio to 0.1.1 |\n\
         |---|---|---|---|---|\n{rows}",
        dir = dir.display(),
        py = poll["python"].as_str().unwrap_or("?"),
        batches = poll["batches"],
        batch = poll["batch"],
    ))
}
