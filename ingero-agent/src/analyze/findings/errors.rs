//! Error codes: CUDA calls that returned an error, one finding per operation and code, with
//! the count, the first and last occurrence and the processes. Out-of-memory and
//! illegal-address errors are HIGH, the rest MEDIUM.

use ingero_ebpf::CudaOp;

use super::{Finding, Severity, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use ingero_trace::model::cuda_error_name;

/// The `cudaError_t` name of a code with the number (`cudaErrorInsufficientDriver (35)`); codes
/// without a known name by number.
pub fn error_name(code: i32) -> String {
    match cuda_error_name(code) {
        Some(name) => format!("{name} ({code})"),
        None => format!("cudaError {code}"),
    }
}

fn advice(code: i32) -> &'static str {
    match code {
        2 => "Reduce memory use (batch size, cached blocks) or check other processes on the GPU.",
        35 => {
            "Install a driver at least as new as the CUDA runtime requires, or use a runtime built for the installed driver."
        }
        100 | 101 => {
            "Check CUDA_VISIBLE_DEVICES and that the GPU is visible in this environment (container device mounts)."
        }
        200 | 209 | 98 => {
            "Build the kernels for this GPU's architecture (TORCH_CUDA_ARCH_LIST, -gencode)."
        }
        700 | 719 => {
            "Run the workload under compute-sanitizer to find the faulting kernel; later calls fail because the context is broken."
        }
        _ => "Check the arguments of the failing calls and the call that returned the error first.",
    }
}

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    agg.errors
        .iter()
        .map(|((op, code), e)| {
            let name = CudaOp::from_u16(*op).map_or("?", CudaOp::name);
            let procs = e
                .pids
                .iter()
                .map(|p| proc_name(agg, *p))
                .collect::<Vec<_>>()
                .join(", ");
            let mut evidence = vec![an.evidence(
                e.first_ns,
                e.first_duration_ns,
                format!("first {name} returning {}", error_name(*code)),
            )];
            if e.count > 1 {
                evidence.push(an.evidence(
                    e.last_ns,
                    e.last_duration_ns,
                    format!("last of {} such calls", e.count),
                ));
            }
            Finding {
                severity: if matches!(code, 2 | 700 | 719) {
                    Severity::High
                } else {
                    Severity::Medium
                },
                kind: "cuda_error".into(),
                summary: format!(
                    "{name} returned {} {} time(s) in {procs}",
                    error_name(*code),
                    e.count
                ),
                evidence,
                root_cause: format!("the CUDA runtime reported {} for {name}", error_name(*code)),
                fixes: vec![advice(*code).to_owned()],
            }
        })
        .collect()
}
