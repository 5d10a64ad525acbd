//! What a session reports about itself: every loss counter, the `"type":"stats"` line of
//! `--json`, the live table (also the final summary), and the statistics written at the end
//! of a recording.

use ingero_trace::model::FinalStats;

use crate::annotate::IngestServer;
use crate::live::table::{self, Footer};
use crate::pipeline::Pipeline;
use crate::probes::Probes;

/// The statistics written at the end of a recording.
pub(super) fn final_stats(
    pipeline: &Pipeline,
    probes: &Probes,
    ingest: Option<&IngestServer>,
) -> FinalStats {
    let stats = &pipeline.stats;
    let cuda: u64 = stats.ops.values().map(|s| s.count).sum();
    let off_cpu = stats.preempted.count + stats.blocked.count;
    let process: u64 = stats.lifecycle.values().sum();
    let own = |pairs: Vec<(&'static str, u64)>| {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    FinalStats {
        events: own(vec![
            ("cuda", cuda),
            ("off_cpu", off_cpu),
            ("process", process),
            ("annotation", stats.annotations),
            ("nvtx", stats.nvtx),
            ("driver", stats.driver_messages),
            ("rank_annotation", pipeline.ranks.stats.labelled),
        ]),
        drops: own(drops(pipeline, probes, ingest)),
        rejected: ingest
            .map(|s| {
                s.counters()
                    .rejected
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            })
            .unwrap_or_default(),
        recorder: Vec::new(),
    }
}

/// Every loss counter: the kernel's, the decoder's, and annotation ingest's.
pub(super) fn drops(
    pipeline: &Pipeline,
    probes: &Probes,
    ingest: Option<&IngestServer>,
) -> Vec<(&'static str, u64)> {
    let mut drops = probes.counters().read();
    drops.extend(pipeline.decode_errors.iter().map(|(k, v)| (*k, *v)));
    let names = pipeline.kernels.stats();
    drops.push((
        "kernel_names_evicted",
        names.evicted_per_process + names.evicted_total,
    ));
    drops.push(("kernel_names_truncated", names.long_names_truncated));
    drops.push(("kernel_aliases_dropped", names.aliases_dropped));
    drops.push(("kernel_names_unreadable", names.unreadable));
    drops.push(("kernel_names_unread_dropped", names.unread_dropped));
    drops.push(("kernels_untallied", pipeline.stats.kernels.untallied));
    drops.push((
        "memory_processes_untallied",
        pipeline.stats.memory.untallied,
    ));
    drops.push((
        "memory_handles_unfollowed",
        pipeline.stats.memory.physical_unfollowed,
    ));
    drops.push(("graphs_forgotten", pipeline.graphs.evicted));
    drops.push((
        "nccl_communicators_forgotten",
        pipeline.communicators.forgotten,
    ));
    drops.push(("process_exits_settled_early", pipeline.exits.settled_early));
    let ranks = pipeline.ranks.stats;
    drops.push(("rank_environ_unreadable", ranks.unreadable));
    drops.push(("rank_environ_truncated", ranks.truncated));
    drops.push(("rank_processes_unseen", ranks.cache_full));
    if let Some(server) = ingest {
        drops.push(("annotations_dropped", server.counters().dropped));
    }
    if let Some(o) = &pipeline.otlp {
        drops.extend(o.snapshot().drops());
    }
    if let Some(c) = pipeline.nvtx.as_ref().map(|c| c.snapshot()) {
        drops.push(("nvtx_library_dropped", c.library_dropped));
        drops.push(("nvtx_queue_full", c.queue_full));
        drops.push(("nvtx_unmatched", c.unmatched));
        drops.push(("nvtx_over_limit", c.over_limit));
        drops.push(("nvtx_bad_streams", c.bad_streams));
        drops.push(("nvtx_connections_refused", c.refused));
        drops.push(("nvtx_foreign_tids", c.foreign_tids));
        // The fallback runs only with the socket open.
        let f = pipeline.nvtx_fallback.counters;
        drops.push(("nvtx_fallback_unmatched", f.unmatched));
        drops.push(("nvtx_fallback_over_limit", f.over_limit));
        if let Some(c) = &pipeline.nvtx_connected {
            drops.push((
                "nvtx_peers_not_remembered",
                c.not_remembered.load(std::sync::atomic::Ordering::Relaxed),
            ));
        }
    }
    drops
}

/// The `"type":"stats"` line of `--json` output (documented in docs/json-schema.md).
pub(super) fn stats_json(
    pipeline: &Pipeline,
    probes: &Probes,
    ingest: Option<&IngestServer>,
    last: bool,
) -> serde_json::Value {
    let stats = &pipeline.stats;
    let ops: serde_json::Map<String, serde_json::Value> = stats
        .ops
        .iter()
        .map(|(op, s)| {
            (
                op.name().to_string(),
                serde_json::json!({
                    "count": s.count, "errors": s.errors,
                    "p50_ns": s.quantile(0.5), "p95_ns": s.quantile(0.95), "p99_ns": s.quantile(0.99),
                    "max_ns": s.max_ns, "total_ns": s.total_ns,
                }),
            )
        })
        .collect();
    let names = pipeline.kernels.stats();
    let drops: serde_json::Map<String, serde_json::Value> = drops(pipeline, probes, ingest)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    serde_json::json!({
        "type": "stats",
        "final": last,
        "events": stats.events,
        "ops": ops,
        "off_cpu": {
            "preempted": {"count": stats.preempted.count, "total_ns": stats.preempted.total_ns, "max_ns": stats.preempted.max_ns},
            "blocked": {"count": stats.blocked.count, "total_ns": stats.blocked.total_ns, "max_ns": stats.blocked.max_ns},
        },
        "processes": stats.lifecycle,
        "nested_driver_calls": stats.nested,
        // The NVIDIA driver's kernel log messages, and of them the Xid/SXid fault reports.
        "driver_messages": {"total": stats.driver_messages, "xids": stats.xids},
        "kernel_names": {
            "learned": stats.names_learned,
            "known": names.names,
            "distinct": names.distinct_names,
            "elf_resolved": names.elf_resolved,
            "unresolved": names.unresolved,
            "long_names_completed": names.long_names_completed,
            "deferred": stats.names_deferred,
            "read_late": names.read_late,
        },
        "drops": drops,
        "annotations": ingest.map(|s| serde_json::to_value(s.counters()).unwrap_or_default()),
        // With --otlp-endpoint: what the live export sent and lost (its losses are in drops).
        "otlp": pipeline.otlp.as_ref().map(|o| o.snapshot().json(o.endpoint())),
        // With NVTX capture on: what the uprobe fallback produced (its losses are in drops).
        "nvtx_fallback": pipeline.nvtx.as_ref().map(|_| {
            let f = pipeline.nvtx_fallback.counters;
            serde_json::json!({
                "records": f.records, "unclosed": f.unclosed, "connected_dropped": f.connected,
                "reentries_dropped": f.reentries,
            })
        }),
    })
}

/// The live table with its footer (losses, annotation counts).
pub(super) fn render(
    pipeline: &Pipeline,
    probes: &Probes,
    ingest: Option<&IngestServer>,
) -> String {
    let drops = drops(pipeline, probes, ingest);
    let mut extra = Vec::new();
    if let Some(server) = ingest {
        let c = server.counters();
        let mut line = format!(
            "annotations: {} accepted, {} rejected, {} connections open",
            c.ingested, c.rejected_total, c.connections_open
        );
        if !c.rejected.is_empty() {
            let reasons: Vec<String> = c.rejected.iter().map(|(k, v)| format!("{k} {v}")).collect();
            line.push_str(&format!(" (rejected: {})", reasons.join(", ")));
        }
        extra.push(line);
    }
    if let Some(o) = &pipeline.otlp {
        extra.push(o.summary());
    }
    if let Some(last) = &pipeline.stats.last_xid {
        extra.push(format!(
            "GPU faults: {} Xid report(s) from the NVIDIA driver; last: {last}",
            pipeline.stats.xids
        ));
    }
    table::render(
        &pipeline.stats,
        &Footer {
            drops: &drops,
            extra: &extra,
        },
    )
}
