//! Device memory: allocation/free imbalance per process (a likely leak, with its growth rate),
//! periodic allocation spikes (allocator cache misses), and allocations that failed for lack
//! of memory (`cudaErrorMemoryAllocation`; other allocation errors are the error rule's).
//!
//! A leak needs at least [`LEAK_MIN_ALLOCS`] allocations, [`LEAK_MIN_BYTES`] outstanding, at
//! most [`LEAK_MAX_FREED_SHARE`] of the allocated bytes freed, and at least
//! [`LEAK_LATE_GROWTH_SHARE`] of the outstanding bytes allocated in the second half of the
//! process's allocation activity (so weights allocated once at start are not a leak).
//! Spikes: at least [`SPIKE_MIN_BURSTS`] bursts of at least [`SPIKE_MIN_CALLS_PER_BURST`]
//! allocation calls after the first, whose spacing varies by at most [`SPIKE_MAX_GAP_CV`]
//! (coefficient of variation).

use super::{Finding, Severity, Window, proc_name};
use crate::analyze::Analysis;
use crate::analyze::activity::BINS;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;
use crate::analyze::processes::LIVE_FOLLOWED;

pub const LEAK_MIN_ALLOCS: u64 = 10;
pub const LEAK_MIN_BYTES: u64 = 64 << 20;
pub const LEAK_MAX_FREED_SHARE: f64 = 0.5;
pub const LEAK_LATE_GROWTH_SHARE: f64 = 0.25;
/// Outstanding bytes at or above which a leak is HIGH.
const LEAK_HIGH_BYTES: u64 = 1 << 30;
pub const SPIKE_MIN_BURSTS: usize = 3;
pub const SPIKE_MIN_CALLS_PER_BURST: u32 = 4;
pub const SPIKE_MAX_GAP_CV: f64 = 0.25;
/// `cudaErrorMemoryAllocation`.
const CUDA_ERROR_MEMORY_ALLOCATION: i32 = 2;

/// `loop_steps`: the loop's key and its number of iterations, when there is a loop (a leak's
/// growth is then also given per iteration).
pub fn check(an: &Analysis, agg: &Aggregate, loop_steps: Option<(&str, usize)>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (pid, p) in &agg.procs {
        let who = proc_name(agg, *pid);
        if let Some(f) = leak(an, agg, *pid, &who, loop_steps) {
            out.push(f);
        }
        if let Some(f) = spikes(an, agg, *pid, &who) {
            out.push(f);
        }
        let oom: Vec<_> = p
            .failed
            .iter()
            .filter(|f| f.ret == CUDA_ERROR_MEMORY_ALLOCATION)
            .collect();
        if !oom.is_empty() {
            out.push(Finding {
                severity: Severity::High,
                kind: "failed_allocation".into(),
                window: Window {
                    start_ns: oom.iter().map(|f| f.ts_ns).min().unwrap_or(0),
                    end_ns: oom.iter().map(|f| f.ts_ns).max().unwrap_or(0),
                },
                summary: format!(
                    "{who}: {} device allocation(s) failed with cudaErrorMemoryAllocation",
                    oom.len()
                ),
                evidence: oom
                    .iter()
                    .map(|f| {
                        an.evidence(
                            f.ts_ns,
                            0,
                            format!("{} of {} failed (out of memory)", f.op.name(), fmt::bytes(f.size)),
                        )
                    })
                    .collect(),
                root_cause: format!(
                    "the device had no room for the request; {who} held {} allocated and not freed at the time of the trace's end",
                    fmt::bytes(p.outstanding())
                ),
                fixes: vec![
                    "Reduce the batch size or model footprint, or free cached blocks (torch.cuda.empty_cache()) before large allocations.".into(),
                    "Check for other processes holding memory on the same GPU (nvidia-smi).".into(),
                ],
                pid: Some(*pid),
                ..Finding::default()
            });
        }
    }
    out
}

fn leak(
    an: &Analysis,
    agg: &Aggregate,
    pid: u32,
    who: &str,
    loop_steps: Option<(&str, usize)>,
) -> Option<Finding> {
    let p = agg.procs.get(&pid)?;
    let outstanding = p.outstanding();
    if p.allocs < LEAK_MIN_ALLOCS
        || outstanding < LEAK_MIN_BYTES
        || p.freed_bytes as f64 > LEAK_MAX_FREED_SHARE * p.alloc_bytes as f64
    {
        return None;
    }
    let bins = agg.activity.procs.get(&pid)?;
    let (b0, b1) = (
        agg.activity.bin_of(p.first_alloc_ns),
        agg.activity.bin_of(p.last_alloc_ns),
    );
    let mid = b0 + (b1 - b0) / 2;
    let late: i64 = bins.net_bytes[mid + 1..=b1.min(BINS - 1)].iter().sum();
    if (late.max(0) as f64) < LEAK_LATE_GROWTH_SHARE * outstanding as f64 {
        return None;
    }
    let span_ns = p.last_alloc_ns.saturating_sub(p.first_alloc_ns).max(1);
    let rate = outstanding as f64 / (span_ns as f64 / 1e9);
    // The running total at quarters of the allocation activity: the growth as a timeline.
    let mut evidence = Vec::new();
    let mut running: i64 = bins.net_bytes[..b0].iter().sum();
    let quarter = ((b1 - b0) / 4).max(1);
    let mut next = b0 + quarter;
    for b in b0..=b1 {
        running += bins.net_bytes[b];
        if b == next || b == b1 {
            let t = agg.activity.bin_start(b);
            evidence.push(an.evidence(
                t,
                agg.activity.bin_ns,
                format!(
                    "{who} holds {} of device memory",
                    fmt::bytes(running.max(0) as u64)
                ),
            ));
            next += quarter;
        }
    }
    Some(Finding {
        severity: if outstanding >= LEAK_HIGH_BYTES {
            Severity::High
        } else {
            Severity::Medium
        },
        kind: "memory_leak".into(),
        window: Window {
            start_ns: p.first_alloc_ns,
            end_ns: p.last_alloc_ns,
        },
        summary: format!(
            "{who} allocated {} and freed {}: {} outstanding, growing {}/s",
            fmt::bytes(p.alloc_bytes),
            fmt::bytes(p.freed_bytes),
            fmt::bytes(outstanding),
            fmt::bytes(rate as u64)
        ),
        evidence,
        root_cause: {
            let sites = p
                .live_by_size(3)
                .iter()
                .map(|(size, n)| format!("{n} × {}", fmt::bytes(*size)))
                .collect::<Vec<_>>()
                .join(", ");
            let sites = if p.live_unfollowed > 0 {
                format!(
                    "{sites} (of the first {LIVE_FOLLOWED} held; {} more not followed)",
                    p.live_unfollowed
                )
            } else {
                sites
            };
            let per_step = match loop_steps {
                Some((key, n)) if n > 0 => format!(
                    ", {} per {key} over {n} {key}s",
                    fmt::bytes(outstanding / n as u64)
                ),
                _ => String::new(),
            };
            format!(
                "device allocations ({} calls) are not matched by frees ({} calls) and the total keeps growing through the run{per_step}: a likely leak; still held: {sites}",
                p.allocs, p.frees
            )
        },
        fixes: vec![
            "Find what keeps device tensors alive across iterations (lists of losses or outputs kept with their graph, caches keyed by step); detach and drop them.".into(),
            "Check with torch.cuda.memory_summary() or a memory snapshot at two points of the run.".into(),
        ],
        pid: Some(pid),
        ..Finding::default()
    })
}

fn spikes(an: &Analysis, agg: &Aggregate, pid: u32, who: &str) -> Option<Finding> {
    let bins = agg.activity.procs.get(&pid)?;
    // Bursts: runs of bins with allocation calls.
    let mut bursts: Vec<(usize, u32)> = Vec::new();
    let mut in_burst = false;
    for (b, n) in bins.alloc_calls.iter().enumerate() {
        if *n > 0 {
            if in_burst {
                if let Some(last) = bursts.last_mut() {
                    last.1 += n;
                }
            } else {
                bursts.push((b, *n));
            }
        }
        in_burst = *n > 0;
    }
    // The first burst is warm-up; the rest are the candidates.
    let later: Vec<(usize, u32)> = bursts
        .into_iter()
        .skip(1)
        .filter(|(_, n)| *n >= SPIKE_MIN_CALLS_PER_BURST)
        .collect();
    if later.len() < SPIKE_MIN_BURSTS {
        return None;
    }
    let gaps: Vec<f64> = later.windows(2).map(|w| (w[1].0 - w[0].0) as f64).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    if mean <= 0.0 || var.sqrt() / mean > SPIKE_MAX_GAP_CV {
        return None;
    }
    let period = (mean * agg.activity.bin_ns as f64) as u64;
    Some(Finding {
        severity: Severity::Low,
        kind: "allocation_spikes".into(),
        summary: format!(
            "{who} allocates in {} bursts about every {}",
            later.len(),
            fmt::dur(period)
        ),
        evidence: later
            .iter()
            .take(5)
            .map(|(b, n)| {
                an.evidence(
                    agg.activity.bin_start(*b),
                    agg.activity.bin_ns,
                    format!("{n} allocation calls"),
                )
            })
            .collect(),
        root_cause: "periodic bursts of device allocations after warm-up: the caching allocator misses and goes to cudaMalloc again (shapes that change, or memory released under pressure)".into(),
        fixes: vec![
            "Keep tensor shapes stable between iterations (pad variable lengths to buckets).".into(),
            "With PyTorch, try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and avoid torch.cuda.empty_cache() inside the loop.".into(),
        ],
        pid: Some(pid),
        ..Finding::default()
    })
}
