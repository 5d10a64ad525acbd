//! Probe families: CUDA runtime and driver uprobes, NVTX fallback uprobes, sched_switch off-CPU
//! tracking, process lifecycle.

mod context;
mod cuda;
mod cuda_args;
mod maps;
mod names;
mod nvtx;
mod process;
mod sched;
