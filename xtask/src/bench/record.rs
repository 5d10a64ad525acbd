//! Runs the recording benchmark (ingero-trace/examples/record-bench.rs): bytes per CUDA call on
//! a launch-dominated workload, writer and reader throughput on one core.

use std::process::Command;

use anyhow::Result;

use crate::util::{output, workspace_root};

pub const COMMAND: &str =
    "cargo run --release -p ingero-trace --example record-bench -- --events 2000000";

pub fn run() -> Result<String> {
    let text = output(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args([
                "run",
                "-q",
                "--release",
                "-p",
                "ingero-trace",
                "--example",
                "record-bench",
                "--",
            ])
            .args(["--events", "2000000"]),
    )?;
    Ok(format!(
        "### Recording (`{COMMAND}`)\n\n```text\n{text}\n```\n"
    ))
}
