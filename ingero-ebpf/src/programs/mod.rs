//! Probe families: CUDA runtime and driver uprobes, sched_switch off-CPU tracking, process lifecycle.

mod context;
mod cuda;
mod cuda_args;
mod maps;
mod names;
mod process;
mod sched;
