//! `ingero export otlp`: replays a recording's step and request spans to an OpenTelemetry
//! Collector (the spans the live export of `trace --otlp-endpoint` sends), or prints them
//! (`--dry-run`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::analyze::{Analysis, SelectionSpec};
use crate::cli::otlp::OtlpArgs;
use crate::export::otlp::config::service_and_resource;
use crate::export::otlp::counters::ExportCounters;
use crate::export::otlp::encode::span_json;
use crate::export::otlp::replay::{self, ReplayOptions};
use crate::export::otlp::sender::{SenderConfig, send_all};

#[derive(Args, Debug)]
pub struct OtlpExportArgs {
    /// Recording file, or a directory of rotated files [default: $INGERO_TRACE, else the
    /// newest recording in ~/.ingero/traces/]
    #[arg(long, value_name = "FILE|DIR")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub otlp: OtlpArgs,
    /// Send nothing: print the spans that would be sent (one line each; with --json one JSON
    /// object per span, as documented in docs/fleet.md).
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: JSON lines.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
    /// Leave out `explain`'s findings (`ingero.finding.*`; they cost a second scan).
    #[arg(long)]
    pub no_findings: bool,
    /// No spans for `request_id` groups.
    #[arg(long)]
    pub no_requests: bool,
}

pub(super) fn run(a: OtlpExportArgs) -> Result<ExitCode> {
    let config = a.otlp.config()?;
    if config.is_none() && !a.dry_run {
        bail!(
            "no OTLP endpoint: give --otlp-endpoint URL (or set OTEL_EXPORTER_OTLP_ENDPOINT), or --dry-run"
        );
    }
    let an = Analysis::open(a.trace.as_deref(), &SelectionSpec::default())?;
    let opts = ReplayOptions {
        group_by: a.otlp.group_by(),
        requests: !a.no_requests,
        findings: !a.no_findings,
    };
    let spans = replay::spans(&an, &opts)?;
    let (service, extra) = match &config {
        Some(c) => (c.service_name.clone(), c.resource.clone()),
        None => service_and_resource(&|k| std::env::var(k).ok())?,
    };
    let host = replay::host_resource(&an, service, extra);
    if a.dry_run {
        let mut out = std::io::stdout().lock();
        for s in &spans {
            let line = if a.json {
                span_json(&host, s).to_string()
            } else {
                replay::describe(s)
            };
            writeln!(out, "{line}").context("writing to stdout")?;
        }
        eprintln!(
            "ingero: {} spans from {} (dry run: nothing sent)",
            spans.len(),
            an.source.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let Some(cfg) = config else {
        return Ok(ExitCode::SUCCESS);
    };
    let counters = Arc::new(ExportCounters::default());
    let total = spans.len() as u64;
    send_all(
        SenderConfig {
            traces: cfg.traces.clone(),
            metrics: None,
            timeout: cfg.timeout,
            retry: cfg.retry,
            report: true,
        },
        host,
        spans,
        counters.clone(),
    );
    let s = counters.snapshot();
    let dropped: Vec<String> = s
        .dropped
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    eprintln!(
        "ingero: exported {} of {total} spans from {} to {}{}",
        s.spans_sent,
        an.source.display(),
        cfg.traces.url,
        if dropped.is_empty() {
            String::new()
        } else {
            format!(
                " ({} not delivered: {})",
                total - s.spans_sent,
                dropped.join(", ")
            )
        }
    );
    if let Some(e) = s.last_error.filter(|_| s.spans_sent < total) {
        eprintln!("ingero: last error: {e}");
    }
    Ok(if s.spans_sent == total {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
