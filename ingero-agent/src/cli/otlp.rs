//! The OTLP flags `ingero trace` and `ingero export otlp` share, and the export's settings
//! they make with the standard `OTEL_*` variables (`export::otlp::config`).

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::export::otlp::config::{OtlpConfig, OtlpFlags};

#[derive(Args, Debug, Clone, Default)]
pub struct OtlpArgs {
    /// Send step and request spans (and, while tracing, metrics) to this OpenTelemetry
    /// Collector: its OTLP/HTTP base URL, such as http://localhost:4318 (/v1/traces and
    /// /v1/metrics are appended). Default: $OTEL_EXPORTER_OTLP_ENDPOINT, or the per-signal
    /// $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// A header for every request, such as `Authorization=Bearer TOKEN` (repeatable; added to
    /// $OTEL_EXPORTER_OTLP_HEADERS).
    #[arg(long = "otlp-header", value_name = "KEY=VALUE")]
    pub otlp_header: Vec<String>,
    /// The label keys a span groups by: one span per combination of their values (and per
    /// process, where they are its own) [default: step]. Requests (`request_id`) get spans
    /// of their own as well.
    #[arg(long, value_delimiter = ',', value_name = "KEY[,KEY]")]
    pub otlp_group_by: Vec<String>,
    /// Body compression: gzip or none [default: $OTEL_EXPORTER_OTLP_COMPRESSION, else gzip].
    #[arg(long, value_name = "gzip|none")]
    pub otlp_compression: Option<String>,
    /// Time-out of one request [default: $OTEL_EXPORTER_OTLP_TIMEOUT (ms), else 10s].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub otlp_timeout: Option<Duration>,
}

impl OtlpArgs {
    fn flags(&self) -> OtlpFlags {
        OtlpFlags {
            endpoint: self.otlp_endpoint.clone(),
            headers: self.otlp_header.clone(),
            compression: self.otlp_compression.clone(),
            timeout: self.otlp_timeout,
            group_by: self
                .otlp_group_by
                .iter()
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty())
                .collect(),
        }
    }

    /// The export's settings (flags over the process's environment); `None`: no endpoint.
    pub fn config(&self) -> Result<Option<OtlpConfig>> {
        OtlpConfig::resolve(&self.flags(), &|k| std::env::var(k).ok())
    }

    /// The grouping keys (the default when none are given).
    pub fn group_by(&self) -> Vec<String> {
        let keys = self.flags().group_by;
        if keys.is_empty() {
            vec![crate::export::otlp::span::STEP_KEY.to_owned()]
        } else {
            keys
        }
    }
}
