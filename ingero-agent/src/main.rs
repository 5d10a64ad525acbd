//! The `ingero` binary: logging set-up and the command line. Modules live in lib.rs.

use std::process::ExitCode;

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("INGERO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match ingero_agent::cli::run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("ingero: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
