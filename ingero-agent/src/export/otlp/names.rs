//! Every name the OTLP export sends: span names, span and resource attributes, metric names
//! and their dimensions. OpenTelemetry has no conventions for CUDA calls or training steps,
//! so the `ingero.*` names are this project's contract, written out in docs/fleet.md (a test
//! there checks that every name below is documented).

// ---- span names ----------------------------------------------------------------------
/// A step: the groups of `--otlp-group-by` when its keys include `step`.
pub const SPAN_STEP: &str = "ingero.step";
/// A request: the groups of the `request_id` label.
pub const SPAN_REQUEST: &str = "ingero.request";
/// A group of other `--otlp-group-by` keys.
pub const SPAN_GROUP: &str = "ingero.group";

// ---- span attributes: the group ------------------------------------------------------
/// Each label of the group and its context (`ingero.label.step`, `ingero.label.phase`).
pub const LABEL_PREFIX: &str = "ingero.label.";
/// The step value the trace id is derived from.
pub const STEP: &str = "ingero.step";
/// The request id.
pub const REQUEST_ID: &str = "ingero.request_id";
/// Time the group's label values held (less than end − start when they held in pieces).
pub const HELD_NS: &str = "ingero.held_ns";

// ---- span attributes: `query --group-by`'s counters ----------------------------------
pub const CUDA_CALLS: &str = "ingero.cuda_calls";
pub const API_TIME_NS: &str = "ingero.api_time_ns";
pub const SYNC_TIME_NS: &str = "ingero.sync_time_ns";
pub const MEMCPY_TIME_NS: &str = "ingero.memcpy_time_ns";
pub const MEMCPY_H2D_BYTES: &str = "ingero.memcpy.h2d_bytes";
pub const MEMCPY_D2H_BYTES: &str = "ingero.memcpy.d2h_bytes";
pub const MEMCPY_D2D_BYTES: &str = "ingero.memcpy.d2d_bytes";
pub const MEMCPY_OTHER_BYTES: &str = "ingero.memcpy.other_bytes";
pub const LAUNCHES: &str = "ingero.launches";
pub const LAUNCH_TIME_NS: &str = "ingero.launch_time_ns";
pub const ERRORS: &str = "ingero.errors";
pub const OFF_CPU_NS: &str = "ingero.off_cpu_ns";
pub const PREEMPTED_NS: &str = "ingero.off_cpu.preempted_ns";
pub const BLOCKED_NS: &str = "ingero.off_cpu.blocked_ns";
/// Time in NCCL's calls; with the two below, only on spans of groups that made NCCL calls.
pub const NCCL_TIME_NS: &str = "ingero.nccl_time_ns";
pub const NCCL_COLLECTIVES: &str = "ingero.nccl.collectives";
pub const NCCL_BYTES: &str = "ingero.nccl.bytes";
pub const SLOWEST_OP: &str = "ingero.slowest.op";
pub const SLOWEST_DURATION_NS: &str = "ingero.slowest.duration_ns";

// ---- span attributes: where it came from ---------------------------------------------
/// The recording holding the group's timeline (its first file).
pub const RECORDING_PATH: &str = "ingero.recording.path";
/// The group's start and end on the recording's clock (CLOCK_MONOTONIC ns), for `--from`
/// and `--to` or the Perfetto UI.
pub const RECORDING_START_NS: &str = "ingero.recording.start_ns";
pub const RECORDING_END_NS: &str = "ingero.recording.end_ns";
/// Live only, when true: some of the group's events were not seen (see docs/fleet.md).
pub const INCOMPLETE: &str = "ingero.incomplete";
/// Live only: the group's values held again after its span was sent; this span covers the
/// later part (2, 3, …).
pub const PART: &str = "ingero.part";

// ---- span attributes: the most severe `explain` finding about the group (replay) -----
pub const FINDING_KIND: &str = "ingero.finding.kind";
pub const FINDING_SEVERITY: &str = "ingero.finding.severity";
pub const FINDING_IMPACT_NS: &str = "ingero.finding.impact_ns";
pub const FINDING_ID: &str = "ingero.finding.id";

// ---- resource attributes -------------------------------------------------------------
pub const SERVICE_NAME: &str = "service.name";
pub const HOST_NAME: &str = "host.name";
pub const HOST_ID: &str = "host.id";
pub const PROCESS_PID: &str = "process.pid";
pub const PROCESS_COMMAND: &str = "process.command";
pub const TELEMETRY_SDK_NAME: &str = "telemetry.sdk.name";
pub const TELEMETRY_SDK_LANGUAGE: &str = "telemetry.sdk.language";
pub const TELEMETRY_SDK_VERSION: &str = "telemetry.sdk.version";
pub const MACHINE_ID: &str = "ingero.machine_id";
pub const CLOCK_MAXERROR_US: &str = "ingero.clock.maxerror_us";
pub const CLOCK_ESTERROR_US: &str = "ingero.clock.esterror_us";
pub const CLOCK_UNSYNC: &str = "ingero.clock.unsync";
pub const RUN_ID: &str = "ingero.run_id";
pub const RANK: &str = "ingero.rank";
pub const LOCAL_RANK: &str = "ingero.local_rank";
pub const WORLD_SIZE: &str = "ingero.world_size";

/// The process labels (the agent's from the launcher's environment, or an adapter's) that
/// become resource attributes of the process's spans, and under which name.
pub const PROCESS_LABELS: [(&str, &str); 4] = [
    ("run_id", RUN_ID),
    ("rank", RANK),
    ("local_rank", LOCAL_RANK),
    ("world_size", WORLD_SIZE),
];

// ---- metrics (dimensions in brackets; never a step, request id or kernel name) -------
/// Calls per op (`ingero.op`), cumulative.
pub const METRIC_CUDA_CALLS: &str = "ingero.cuda.calls";
/// Failed calls per op.
pub const METRIC_CUDA_ERRORS: &str = "ingero.cuda.errors";
/// Call latency per op, histogram (ns).
pub const METRIC_CUDA_DURATION: &str = "ingero.cuda.duration";
/// Device memory held per process (`process.pid`), bytes.
pub const METRIC_DEVICE_MEMORY: &str = "ingero.device_memory.held";
/// Time traced threads spent off the CPU (`ingero.reason`: preempted, blocked), ns.
pub const METRIC_OFF_CPU: &str = "ingero.off_cpu.time";
/// The session's losses (`reason`: the final statistics' drop names).
pub const METRIC_DROPS: &str = "ingero.drops";
/// Spans the Collector accepted.
pub const METRIC_SPANS_SENT: &str = "ingero.export.spans_sent";
/// Spans not delivered (`reason`: see [`super::counters::DropReason`]).
pub const METRIC_DROPPED: &str = "ingero.export.dropped";
/// Requests sent again after a retryable answer or a connection failure.
pub const METRIC_RETRIES: &str = "ingero.export.retries";
/// Metric dimension: the CUDA op.
pub const DIM_OP: &str = "ingero.op";
/// Metric dimension: why a thread was off the CPU.
pub const DIM_REASON: &str = "ingero.reason";
/// Metric dimension: why something was lost.
pub const DIM_DROP_REASON: &str = "reason";

/// Every span and resource attribute name and metric name (for the docs test).
pub const ALL: &[&str] = &[
    SPAN_STEP,
    SPAN_REQUEST,
    SPAN_GROUP,
    LABEL_PREFIX,
    STEP,
    REQUEST_ID,
    HELD_NS,
    CUDA_CALLS,
    API_TIME_NS,
    SYNC_TIME_NS,
    MEMCPY_TIME_NS,
    MEMCPY_H2D_BYTES,
    MEMCPY_D2H_BYTES,
    MEMCPY_D2D_BYTES,
    MEMCPY_OTHER_BYTES,
    LAUNCHES,
    LAUNCH_TIME_NS,
    ERRORS,
    OFF_CPU_NS,
    PREEMPTED_NS,
    BLOCKED_NS,
    NCCL_TIME_NS,
    NCCL_COLLECTIVES,
    NCCL_BYTES,
    SLOWEST_OP,
    SLOWEST_DURATION_NS,
    RECORDING_PATH,
    RECORDING_START_NS,
    RECORDING_END_NS,
    INCOMPLETE,
    PART,
    FINDING_KIND,
    FINDING_SEVERITY,
    FINDING_IMPACT_NS,
    FINDING_ID,
    SERVICE_NAME,
    HOST_NAME,
    HOST_ID,
    PROCESS_PID,
    PROCESS_COMMAND,
    MACHINE_ID,
    CLOCK_MAXERROR_US,
    CLOCK_ESTERROR_US,
    CLOCK_UNSYNC,
    RUN_ID,
    RANK,
    LOCAL_RANK,
    WORLD_SIZE,
    METRIC_CUDA_CALLS,
    METRIC_CUDA_ERRORS,
    METRIC_CUDA_DURATION,
    METRIC_DEVICE_MEMORY,
    METRIC_OFF_CPU,
    METRIC_DROPS,
    METRIC_SPANS_SENT,
    METRIC_DROPPED,
    METRIC_RETRIES,
    DIM_OP,
    DIM_REASON,
];

#[cfg(test)]
mod tests {
    /// The contract is written down: docs/fleet.md names every span name, attribute and
    /// metric the export sends.
    #[test]
    fn every_name_is_documented() {
        let doc = include_str!("../../../../docs/fleet.md");
        let missing: Vec<&str> = super::ALL
            .iter()
            .copied()
            .filter(|n| !doc.contains(&format!("`{n}")))
            .collect();
        assert!(missing.is_empty(), "not in docs/fleet.md: {missing:?}");
    }
}
