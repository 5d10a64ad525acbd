//! The live export within a trace session: started with the recording, a metrics snapshot
//! every few seconds from the drain loop, and the end (the recording's last batch, a grace
//! period for the sender, the final counts for the statistics and the summary line).

use std::time::{Duration, Instant};

use anyhow::Result;

use super::super::config::OtlpConfig;
use super::super::counters::Snapshot;
use super::super::metrics::MetricsSnapshot;
use super::super::resource::{HostFacts, HostResource};
use super::LiveExporter;
use super::engine::EngineConfig;
use crate::live::Stats;
use crate::recording::Recording;
use ingero_trace::clock::realtime_now_ns;

/// What `trace --otlp-endpoint` asked for.
#[derive(Clone, Debug)]
pub struct LiveSettings {
    pub config: OtlpConfig,
    pub engine: EngineConfig,
    /// How long the end of the session waits for the Collector.
    pub shutdown_grace: Duration,
    /// How often metrics are sent.
    pub metrics_every: Duration,
}

/// The live export of one session.
pub struct OtlpRun {
    exporter: Option<LiveExporter>,
    endpoint: String,
    final_counts: Option<Snapshot>,
    started_unix_ns: u64,
    metrics_every: Duration,
    last_metrics: Instant,
    grace: Duration,
}

impl OtlpRun {
    /// Starts the export and hands it `recording`'s writes.
    pub fn start(s: LiveSettings, recording: &mut Recording) -> Result<OtlpRun> {
        let facts = recording.facts();
        let host = HostResource::new(&HostFacts::this_host(
            s.config.service_name.clone(),
            facts.machine_name.clone(),
            facts.machine_id,
            s.config.resource.clone(),
        ));
        let exporter = LiveExporter::start(&s.config, s.engine, host, facts)?;
        recording.export_to(exporter.feed());
        eprintln!(
            "ingero: exporting spans and metrics to {} (OTLP/HTTP)",
            exporter.endpoint()
        );
        Ok(OtlpRun {
            endpoint: exporter.endpoint().to_owned(),
            exporter: Some(exporter),
            final_counts: None,
            started_unix_ns: realtime_now_ns(),
            metrics_every: s.metrics_every,
            last_metrics: Instant::now(),
            grace: s.shutdown_grace,
        })
    }

    /// The counts so far (final once finished).
    pub fn snapshot(&self) -> Snapshot {
        match (&self.final_counts, &self.exporter) {
            (Some(f), _) => f.clone(),
            (None, Some(e)) => e.counters(),
            (None, None) => Snapshot::default(),
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn metrics(&self, stats: &Stats, drops: Vec<(&'static str, u64)>) -> MetricsSnapshot {
        MetricsSnapshot::of(stats, drops, self.started_unix_ns, realtime_now_ns())
    }

    /// Called every second: queues a metrics snapshot when one is due.
    pub fn each_second(&mut self, stats: &Stats, drops: Vec<(&'static str, u64)>) {
        if self.last_metrics.elapsed() < self.metrics_every {
            return;
        }
        self.last_metrics = Instant::now();
        if let Some(e) = &self.exporter {
            e.metrics(self.metrics(stats, drops));
        }
    }

    /// Ends the export: the recording hands its last batch over, the engine sends its last
    /// spans, the sender gets the grace period; the counts are final from then on.
    pub fn finish(
        &mut self,
        recording: &mut Recording,
        stats: &Stats,
        drops: Vec<(&'static str, u64)>,
    ) {
        let Some(e) = self.exporter.take() else {
            return;
        };
        recording.end_for_export();
        let last = self.metrics(stats, drops);
        self.final_counts = Some(e.finish(Some(last), self.grace));
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        let s = self.snapshot();
        let mut line = format!(
            "otlp: {} of {} spans sent to {}",
            s.spans_sent, s.spans_queued, self.endpoint
        );
        let dropped: Vec<String> = s
            .dropped
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        if !dropped.is_empty() {
            line.push_str(&format!("; dropped {}", dropped.join(", ")));
        }
        if s.spans_incomplete > 0 {
            line.push_str(&format!("; {} incomplete", s.spans_incomplete));
        }
        if s.retries > 0 {
            line.push_str(&format!("; {} retries", s.retries));
        }
        let any_dropped = s.dropped_total() > 0;
        if let Some(e) = s.last_error.filter(|_| any_dropped) {
            line.push_str(&format!(" (last error: {e})"));
        }
        line
    }
}
