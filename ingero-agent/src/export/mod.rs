//! Exporters: what leaves a host, built from the same records and analysis a recording
//! gives. [`otlp`] streams step and request spans and a few low-cardinality metrics to an
//! OpenTelemetry Collector, live during `ingero trace` or replayed from a recording by
//! `ingero export otlp`.

pub mod otlp;
