//! Probe families: CUDA runtime uprobes, sched_switch off-CPU tracking, process lifecycle.

mod context;
mod maps;
mod process;
mod runtime;
mod sched;
