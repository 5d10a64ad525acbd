//! Rendering [`Stats`] as the table the live view refreshes and the final summary prints.

use std::fmt::Write;

use super::Stats;

/// A human duration: `850ns`, `12.3µs`, `4.56ms`, `1.23s`.
pub fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// `text` in at most `width` characters, its end replaced by `…` when cut (kernel names run
/// to kilobytes).
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Processes listed by GPU memory held.
pub const MEMORY_ROWS: usize = 5;

/// Extra lines shown under the table (losses, annotation counters).
pub struct Footer<'a> {
    pub drops: &'a [(&'static str, u64)],
    pub extra: &'a [String],
}

/// The whole table as text.
pub fn render(stats: &Stats, footer: &Footer<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>11}",
        "OPERATION", "COUNT", "ERRORS", "P50", "P95", "P99", "MAX", "TOTAL"
    );
    if stats.ops.is_empty() {
        let _ = writeln!(out, "(no CUDA calls yet)");
    }
    for (op, s) in &stats.ops {
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>11}",
            op.name(),
            s.count,
            s.errors,
            duration(s.quantile(0.50)),
            duration(s.quantile(0.95)),
            duration(s.quantile(0.99)),
            duration(s.max_ns),
            duration(s.total_ns),
        );
    }
    let top = stats.kernels.top(stats.top_kernels);
    if !top.is_empty() {
        let _ = writeln!(out, "{:<60} {:>9} {:>11}", "KERNEL", "LAUNCHES", "API TIME");
        for (name, launches, ns) in top {
            let _ = writeln!(
                out,
                "{:<60} {launches:>9} {:>11}",
                cut(name, 60),
                duration(ns)
            );
        }
    }
    let top = stats.memory.top(MEMORY_ROWS);
    if !top.is_empty() {
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:>10} {:>10}",
            "PID", "COMMAND", "GPU HELD", "PEAK"
        );
        for (pid, h) in top {
            let _ = writeln!(
                out,
                "{pid:>8} {:<16} {:>10} {:>10}",
                cut(&h.comm, 16),
                crate::analyze::fmt::bytes(h.held),
                crate::analyze::fmt::bytes(h.peak)
            );
        }
        if stats.memory.unknown_frees > 0 {
            let _ = writeln!(
                out,
                "  {} free(s) of memory allocated before tracing (unknown size)",
                stats.memory.unknown_frees
            );
        }
    }
    let _ = writeln!(
        out,
        "off-CPU: preempted {} times, {} total (max {}); blocked {} times, {} total (max {})",
        stats.preempted.count,
        duration(stats.preempted.total_ns),
        duration(stats.preempted.max_ns),
        stats.blocked.count,
        duration(stats.blocked.total_ns),
        duration(stats.blocked.max_ns),
    );
    let top = stats.top_preemptors(3);
    if !top.is_empty() {
        let names: Vec<String> = top
            .iter()
            .map(|(n, t)| format!("{n} {}", duration(*t)))
            .collect();
        let _ = writeln!(out, "  preempted by: {}", names.join(", "));
    }
    if !stats.lifecycle.is_empty() {
        let parts: Vec<String> = stats
            .lifecycle
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "processes: {}", parts.join(", "));
    }
    let lost: Vec<String> = footer
        .drops
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "drops: {}",
        if lost.is_empty() {
            "none".to_string()
        } else {
            lost.join(", ")
        }
    );
    for line in footer.extra {
        let _ = writeln!(out, "{line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_readable_units() {
        assert_eq!(duration(850), "850ns");
        assert_eq!(duration(12_340), "12.3µs");
        assert_eq!(duration(4_560_000), "4.56ms");
        assert_eq!(duration(1_230_000_000), "1.23s");
    }

    #[test]
    fn empty_table_says_so_and_shows_drops() {
        let text = render(
            &Stats::default(),
            &Footer {
                drops: &[("ring_full_cuda", 3), ("nesting_overflow", 0)],
                extra: &[],
            },
        );
        assert!(text.contains("(no CUDA calls yet)"));
        assert!(text.contains("drops: ring_full_cuda 3"));
        assert!(!text.contains("nesting_overflow"));
    }

    #[test]
    fn the_top_kernels_are_listed_by_api_time_with_long_names_cut() {
        use ingero_ebpf::CudaOp;
        use ingero_trace::model::{CallDetail, CudaCall, Event, KernelName, NameSource};
        let mut stats = Stats {
            top_kernels: 2,
            ..Stats::default()
        };
        let long = format!("void big<{}>()", "x".repeat(100));
        for (name, ns) in [("a()", 5), (long.as_str(), 50), ("c()", 20), ("a()", 5)] {
            stats.record(&Event::Cuda(CudaCall {
                ts_ns: 1,
                duration_ns: ns,
                task: ingero_trace::synth::task(1, 1, "t"),
                op: CudaOp::LaunchKernel,
                ret: 0,
                args: ingero_trace::synth::launch_args(1, 0),
                detail: CallDetail {
                    kernel: Some(std::sync::Arc::new(KernelName {
                        mangled: name.into(),
                        demangled: name.into(),
                        source: NameSource::Registration,
                        truncated: false,
                    })),
                    ..Default::default()
                },
            }));
        }
        let text = render(
            &stats,
            &Footer {
                drops: &[],
                extra: &[],
            },
        );
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("KERNEL"))
            .expect("a kernel table");
        assert!(lines[at + 1].starts_with("void big<xxx"), "{text}");
        assert!(lines[at + 1].contains('…'), "a long name is cut: {text}");
        assert!(lines[at + 2].starts_with("c()"), "{text}");
        assert!(!text.contains("a()"), "only the top two: {text}");
    }
}
