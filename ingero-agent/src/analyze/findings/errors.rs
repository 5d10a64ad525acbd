//! Error codes: CUDA calls that returned an error, one finding per code and process (a broken
//! context fails every later call with the same code: one problem, however many operations
//! report it), with the count, the operations and their counts, and the first and last
//! occurrence. Out-of-memory and illegal-address errors are HIGH, the rest MEDIUM. NCCL's
//! calls return NCCL's own codes (`ncclResult_t`): their findings are `nccl_error`, HIGH for a
//! failed peer or system call (the job cannot go on), else MEDIUM.

use ingero_ebpf::CudaOp;

use super::{Finding, Severity, Window, proc_name};
use crate::analyze::Analysis;
use crate::analyze::aggregate::Aggregate;
use ingero_trace::model::{cuda_error_name, nccl_error_name};

/// The `cudaError_t` name of a code with the number (`cudaErrorInsufficientDriver (35)`); codes
/// without a known name by number.
pub fn error_name(code: i32) -> String {
    coded(cuda_error_name(code), "cudaError", code)
}

/// A code's name with its number, or `FAMILY CODE` without a known name.
fn coded(name: Option<&str>, family: &str, code: i32) -> String {
    match name {
        Some(name) => format!("{name} ({code})"),
        None => format!("{family} {code}"),
    }
}

/// An `ncclResult_t` with its number (`ncclSystemError (2)`).
fn nccl_error(code: i32) -> String {
    coded(nccl_error_name(code), "ncclResult", code)
}

fn nccl_advice(code: i32) -> &'static str {
    match code {
        1 => {
            "A CUDA call inside NCCL failed: see this process's cuda_error findings, and run with NCCL_DEBUG=WARN to see which."
        }
        2 => {
            "A system call failed (sockets, shared memory, InfiniBand verbs): run with NCCL_DEBUG=INFO; check the network interface NCCL chose (NCCL_SOCKET_IFNAME), the size of /dev/shm in containers, and ulimit -l."
        }
        3 => {
            "NCCL hit an internal error: run with NCCL_DEBUG=INFO and compare NCCL versions across ranks."
        }
        4 => {
            "A call passed an invalid argument: a NULL or destroyed communicator, a device buffer on the wrong GPU, a count or type the peers do not use, a rank out of range."
        }
        5 => {
            "NCCL was used out of order: a collective on a communicator being destroyed or aborted, unbalanced ncclGroupStart/End, a communicator used from two threads at once."
        }
        6 => {
            "A peer failed or the network dropped it: look at the other ranks' findings and logs first; this rank only saw the failure."
        }
        _ => "Check the arguments of the failing calls, and run with NCCL_DEBUG=INFO.",
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

fn op_name(op: u16) -> &'static str {
    CudaOp::from_u16(op).map_or("?", CudaOp::name)
}

pub fn check(an: &Analysis, agg: &Aggregate) -> Vec<Finding> {
    agg.errors
        .iter()
        .map(|(key, e)| {
            let (code, pid) = (&key.code, &key.pid);
            let error = if key.nccl {
                nccl_error(*code)
            } else {
                error_name(*code)
            };
            let proc = proc_name(agg, *pid);
            // Most frequent first; names break ties so the text is stable.
            let mut ops: Vec<(&str, u64)> = e.ops.iter().map(|(o, n)| (op_name(*o), *n)).collect();
            ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let counted = ops
                .iter()
                .map(|(name, n)| format!("{name} ({n})"))
                .collect::<Vec<_>>()
                .join(", ");
            let names = ops
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ");
            let mut evidence = vec![an.evidence(
                e.first_ns,
                e.first_duration_ns,
                format!("first {} returning {error}", op_name(e.first_op)),
            )];
            if e.count > 1 {
                evidence.push(an.evidence(
                    e.last_ns,
                    e.last_duration_ns,
                    format!("last of {} such calls ({})", e.count, op_name(e.last_op)),
                ));
            }
            let (kind, high, who, fix) = if key.nccl {
                (
                    "nccl_error",
                    matches!(code, 2 | 6),
                    "NCCL",
                    nccl_advice(*code),
                )
            } else {
                (
                    "cuda_error",
                    matches!(code, 2 | 700 | 719),
                    "the CUDA runtime",
                    advice(*code),
                )
            };
            Finding {
                severity: if high {
                    Severity::High
                } else {
                    Severity::Medium
                },
                kind: kind.into(),
                summary: format!("{error} {} time(s) in {proc}, from {counted}", e.count),
                evidence,
                root_cause: format!("{who} reported {error} for {names}"),
                fixes: vec![fix.to_owned()],
                pid: Some(*pid),
                window: Window {
                    start_ns: e.first_ns,
                    end_ns: e.last_ns + e.last_duration_ns,
                },
                impact_ns: e.total_ns,
                ..Finding::default()
            }
        })
        .collect()
}
