//! The live export's metrics: a [`MetricsSnapshot`] of the session's running statistics
//! (taken on the drain loop every few seconds: a few dozen numbers) and its OTLP form. Only
//! bounded dimensions: the op, the off-CPU reason, the process holding device memory, the
//! loss reason. Never a step, a request id or a kernel name, whose values grow without bound
//! (docs/fleet.md). Everything is cumulative since the session started.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};

use super::counters::Snapshot;
use super::encode::{key_value, resource, scope};
use super::names as n;
use super::resource::HostResource;
use super::span::AttrValue;
use crate::live::Stats;

/// Upper bounds of the latency histogram's buckets, ns: 1-2-5 steps from 1 µs to 10 s.
pub const BOUNDS_NS: [u64; 22] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// One op's calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpPoint {
    pub op: &'static str,
    pub count: u64,
    pub errors: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
    /// One per bound of [`BOUNDS_NS`], then the overflow.
    pub buckets: Vec<u64>,
}

/// The session's statistics at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub start_unix_ns: u64,
    pub time_unix_ns: u64,
    pub ops: Vec<OpPoint>,
    pub preempted_ns: u64,
    pub blocked_ns: u64,
    /// (pid, bytes held).
    pub memory: Vec<(u32, u64)>,
    /// The session's loss counters (the final statistics' drops).
    pub drops: Vec<(&'static str, u64)>,
}

impl MetricsSnapshot {
    /// Takes the numbers of `stats` (and the session's drops) at `time_unix_ns`.
    pub fn of(
        stats: &Stats,
        drops: Vec<(&'static str, u64)>,
        start_unix_ns: u64,
        time_unix_ns: u64,
    ) -> MetricsSnapshot {
        let ops = stats
            .ops
            .iter()
            .map(|(op, s)| OpPoint {
                op: op.name(),
                count: s.count,
                errors: s.errors,
                sum_ns: s.total_ns,
                max_ns: s.max_ns,
                buckets: s.bucket_counts(&BOUNDS_NS),
            })
            .collect();
        let mut memory: Vec<(u32, u64)> = stats
            .memory
            .by_pid
            .iter()
            .map(|(pid, h)| (*pid, h.held))
            .collect();
        memory.sort_unstable();
        MetricsSnapshot {
            start_unix_ns,
            time_unix_ns,
            ops,
            preempted_ns: stats.preempted.total_ns,
            blocked_ns: stats.blocked.total_ns,
            memory,
            drops,
        }
    }
}

fn int(v: u64) -> Option<number_data_point::Value> {
    Some(number_data_point::Value::AsInt(
        i64::try_from(v).unwrap_or(i64::MAX),
    ))
}

struct Points<'a> {
    m: &'a MetricsSnapshot,
}

impl Points<'_> {
    fn point(&self, attrs: &[(&str, &str)], v: u64) -> NumberDataPoint {
        NumberDataPoint {
            attributes: attrs
                .iter()
                .map(|(k, v)| key_value(k, &AttrValue::Str((*v).to_owned())))
                .collect(),
            start_time_unix_nano: self.m.start_unix_ns,
            time_unix_nano: self.m.time_unix_ns,
            value: int(v),
            ..Default::default()
        }
    }
}

fn sum(name: &str, unit: &str, description: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        unit: unit.into(),
        description: description.into(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Default::default()
    }
}

/// The metrics request: the snapshot and the exporter's own counters.
pub fn metrics_request(
    host: &HostResource,
    m: &MetricsSnapshot,
    export: &Snapshot,
) -> ExportMetricsServiceRequest {
    let p = Points { m };
    let mut metrics = Vec::new();
    let by_op = |f: fn(&OpPoint) -> u64| {
        m.ops
            .iter()
            .map(|o| p.point(&[(n::DIM_OP, o.op)], f(o)))
            .collect::<Vec<_>>()
    };
    metrics.push(sum(
        n::METRIC_CUDA_CALLS,
        "{call}",
        "CUDA calls",
        by_op(|o| o.count),
    ));
    metrics.push(sum(
        n::METRIC_CUDA_ERRORS,
        "{call}",
        "CUDA calls that failed",
        by_op(|o| o.errors),
    ));
    let hist_points = m
        .ops
        .iter()
        .map(|o| HistogramDataPoint {
            attributes: vec![key_value(n::DIM_OP, &AttrValue::Str(o.op.into()))],
            start_time_unix_nano: m.start_unix_ns,
            time_unix_nano: m.time_unix_ns,
            count: o.count,
            sum: Some(o.sum_ns as f64),
            bucket_counts: o.buckets.clone(),
            explicit_bounds: BOUNDS_NS.iter().map(|b| *b as f64).collect(),
            max: Some(o.max_ns as f64),
            ..Default::default()
        })
        .collect();
    metrics.push(Metric {
        name: n::METRIC_CUDA_DURATION.into(),
        unit: "ns".into(),
        description: "CUDA call latency".into(),
        data: Some(metric::Data::Histogram(Histogram {
            data_points: hist_points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        })),
        ..Default::default()
    });
    let memory = m
        .memory
        .iter()
        .map(|(pid, held)| {
            let mut pt = p.point(&[], *held);
            pt.attributes = vec![key_value(n::PROCESS_PID, &AttrValue::Int(i64::from(*pid)))];
            pt
        })
        .collect();
    metrics.push(Metric {
        name: n::METRIC_DEVICE_MEMORY.into(),
        unit: "By".into(),
        description: "Device memory held per process".into(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: memory,
        })),
        ..Default::default()
    });
    metrics.push(sum(
        n::METRIC_OFF_CPU,
        "ns",
        "Time traced threads spent off the CPU",
        vec![
            p.point(&[(n::DIM_REASON, "preempted")], m.preempted_ns),
            p.point(&[(n::DIM_REASON, "blocked")], m.blocked_ns),
        ],
    ));
    let drops = m
        .drops
        .iter()
        .map(|(r, v)| p.point(&[(n::DIM_DROP_REASON, r)], *v))
        .collect();
    metrics.push(sum(
        n::METRIC_DROPS,
        "{event}",
        "What the session lost, by reason",
        drops,
    ));
    metrics.push(sum(
        n::METRIC_SPANS_SENT,
        "{span}",
        "Spans the Collector accepted",
        vec![p.point(&[], export.spans_sent)],
    ));
    let dropped = export
        .dropped
        .iter()
        .map(|(r, v)| p.point(&[(n::DIM_DROP_REASON, r)], *v))
        .collect();
    metrics.push(sum(
        n::METRIC_DROPPED,
        "{span}",
        "Spans not delivered",
        dropped,
    ));
    metrics.push(sum(
        n::METRIC_RETRIES,
        "{request}",
        "Requests sent again",
        vec![p.point(&[], export.retries)],
    ));
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource(host, None)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::otlp::counters::ExportCounters;
    use ingero_ebpf::CudaOp;
    use ingero_trace::model::{CudaArgs, Event, TimelineRecord};
    use ingero_trace::synth::{cuda, task};
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;

    #[test]
    fn histograms_count_every_call_and_dimensions_stay_bounded() {
        let mut stats = Stats::default();
        let t = task(7, 7, "python3");
        let sync = CudaArgs::Sync {
            stream: None,
            event: None,
        };
        for (i, d) in [500u64, 1_500, 30_000, 2_000_000, 20_000_000_000]
            .iter()
            .enumerate()
        {
            if let TimelineRecord::Event(e @ Event::Cuda(_)) = cuda(
                t,
                1_000 + i as u64,
                *d,
                CudaOp::StreamSynchronize,
                0,
                sync.clone(),
            ) {
                stats.record(&e);
            }
        }
        let m = MetricsSnapshot::of(&stats, vec![("ring_full_cuda", 3)], 1, 2);
        let req = metrics_request(
            &HostResource::default(),
            &m,
            &ExportCounters::default().snapshot(),
        );
        let metrics: Vec<&Metric> = req.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .collect();
        let hist = metrics
            .iter()
            .find(|m| m.name == n::METRIC_CUDA_DURATION)
            .and_then(|m| match &m.data {
                Some(Data::Histogram(h)) => h.data_points.first().cloned(),
                _ => None,
            })
            .expect("a histogram point");
        assert_eq!(hist.count, 5);
        assert_eq!(hist.bucket_counts.iter().sum::<u64>(), 5);
        assert_eq!(hist.bucket_counts.len(), BOUNDS_NS.len() + 1);
        assert_eq!(hist.bucket_counts[0], 1, "500 ns: under 1 µs");
        assert_eq!(
            *hist.bucket_counts.last().expect("overflow"),
            1,
            "20 s: over 10 s"
        );
        // Only bounded dimensions, whatever the workload.
        let allowed = [n::DIM_OP, n::DIM_REASON, n::DIM_DROP_REASON, n::PROCESS_PID];
        for metric in &metrics {
            let keys: Vec<&str> = match &metric.data {
                Some(Data::Sum(s)) => s
                    .data_points
                    .iter()
                    .flat_map(|p| p.attributes.iter().map(|a| a.key.as_str()))
                    .collect(),
                Some(Data::Gauge(g)) => g
                    .data_points
                    .iter()
                    .flat_map(|p| p.attributes.iter().map(|a| a.key.as_str()))
                    .collect(),
                Some(Data::Histogram(h)) => h
                    .data_points
                    .iter()
                    .flat_map(|p| p.attributes.iter().map(|a| a.key.as_str()))
                    .collect(),
                _ => Vec::new(),
            };
            assert!(
                keys.iter().all(|k| allowed.contains(k)),
                "{}: {keys:?}",
                metric.name
            );
        }
    }
}
