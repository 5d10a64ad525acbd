//! Probe families: CUDA runtime and driver uprobes, NVTX fallback uprobes, sched_switch off-CPU
//! tracking, process lifecycle, the NVIDIA drivers' kernel log messages.

mod context;
mod cuda;
mod cuda_args;
mod driver_log;
mod maps;
mod names;
mod nvtx;
mod process;
mod sched;
