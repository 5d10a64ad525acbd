//! OTLP export: one span per step (per value combination of `--otlp-group-by`) and per
//! request, carrying the numbers `ingero query --group-by` prints for that group, plus a few
//! low-cardinality metrics, sent as OTLP/HTTP protobuf (gzip) to an OpenTelemetry Collector.
//! Tempo, Jaeger, ClickHouse and the rest sit behind the Collector as its configuration.
//!
//! - [`live`]: during `ingero trace --record --otlp-endpoint URL`, spans as groups end (the
//!   design, and what cannot be exact live, is in its module docs);
//! - [`replay`]: `ingero export otlp --trace FILE|DIR`, the same spans from a recording (and
//!   `--dry-run --json` to print them);
//! - shared by both: [`span`] (a `query` row → a span), [`ids`], [`resource`], [`encode`],
//!   [`wire`] (the hot encoding), [`metrics`], [`queue`] (bounded, drop-oldest), [`sender`] and [`transport`] (POST,
//!   retries), [`counters`], [`config`] (flags and `OTEL_*` variables), [`names`] (the
//!   attribute contract, docs/fleet.md).

pub mod config;
pub mod counters;
pub mod encode;
pub mod ids;
pub mod live;
pub mod metrics;
pub mod names;
pub mod queue;
pub mod replay;
pub mod resource;
pub mod sender;
pub mod span;
pub mod transport;
pub mod wire;
