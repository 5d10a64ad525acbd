//! `pageable_memcpy`: asynchronous copies from or to pageable host memory (see
//! [`crate::analyze::pinned`]): not asynchronous in effect, the host blocks for each. Per
//! process with at least [`PAGEABLE_MIN_COPIES`] such copies of at least
//! `pinned::PAGEABLE_MIN_BYTES`; the impact is the time in them. Host memory pinned before
//! the recording started is unknown to the trace: the finding says how many pinned
//! allocations it saw, and names the guard.

use super::{Cause, CauseKind, Finding, Window, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use crate::analyze::fmt;
use crate::analyze::pinned::PAGEABLE_MIN_BYTES;

/// Fewer pageable copies than this are not a pattern.
pub const PAGEABLE_MIN_COPIES: u64 = 5;

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    let mut out = Vec::new();
    for (pid, p) in &agg.procs {
        let pin = &p.pinned;
        if pin.pageable < PAGEABLE_MIN_COPIES {
            continue;
        }
        let who = proc_name(agg, *pid);
        let evidence = pin
            .worst
            .iter()
            .map(|w| {
                let at: Vec<String> = an
                    .index
                    .labels
                    .context_of(*pid, w.ts_ns, &[])
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                an.evidence(
                    w.ts_ns,
                    w.duration_ns,
                    format!(
                        "{} of {} from pageable memory, blocked {}{}",
                        w.op.name(),
                        fmt::bytes(w.bytes),
                        fmt::dur(w.duration_ns),
                        if at.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", at.join(", "))
                        }
                    ),
                )
            })
            .collect();
        let first = pin.worst.iter().map(|w| w.ts_ns).min().unwrap_or(0);
        let last = pin
            .worst
            .iter()
            .map(|w| w.ts_ns + w.duration_ns)
            .max()
            .unwrap_or(0);
        out.push(Finding {
            severity: an.impact_severity(pin.pageable_ns),
            kind: "pageable_memcpy".into(),
            summary: format!(
                "{who}: {} of {} async copies (≥ {}) used pageable host memory: {} moved, {} blocked in them",
                pin.pageable,
                pin.judged,
                fmt::bytes(PAGEABLE_MIN_BYTES),
                fmt::bytes(pin.pageable_bytes),
                fmt::dur(pin.pageable_ns)
            ),
            pid: Some(*pid),
            window: Window {
                start_ns: first,
                end_ns: last,
            },
            impact_ns: pin.pageable_ns,
            causes: vec![Cause {
                cause: CauseKind::Memcpy,
                ns: pin.pageable_ns,
                share: 1.0,
                detail: format!(
                    "{} async copies from or to memory not pinned by cudaMallocHost, cudaHostAlloc or cudaHostRegister",
                    pin.pageable
                ),
                by: Vec::new(),
            }],
            evidence,
            root_cause: format!(
                "cudaMemcpyAsync from pageable memory is staged through a driver buffer and returns only when the data is copied: the host blocks and the copy cannot overlap compute (the trace saw {} pinned allocations or registrations in this process; memory pinned before the recording started is not known to it)",
                pin.pinned_calls
            ),
            fixes: vec![
                "Allocate the host buffers pinned (cudaMallocHost, cudaHostAlloc, or cudaHostRegister an existing one); in PyTorch, DataLoader(pin_memory=True) or tensor.pin_memory() before .to(device, non_blocking=True).".into(),
            ],
            ..Finding::default()
        });
    }
    out
}
