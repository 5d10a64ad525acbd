//! Runs the drain-capacity benchmark (ingero-agent/benches/drain.rs) and returns its table.

use std::process::Command;

use anyhow::Result;

use crate::util::{output, workspace_root};

pub fn run() -> Result<String> {
    output(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args(["bench", "-q", "-p", "ingero-agent", "--bench", "drain"]),
    )
}
