//! Runs the OTLP export benchmark (ingero-agent/benches/otlp.rs) and returns its tables.

use std::process::Command;

use anyhow::Result;

use crate::util::{output, workspace_root};

pub fn run() -> Result<String> {
    output(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args(["bench", "-q", "-p", "ingero-agent", "--bench", "otlp"]),
    )
}
