//! `ingero`: traces what CUDA workloads do (CUDA runtime calls, scheduler stalls, process
//! lifecycle) with eBPF, and lets the application label the trace with its own meaning.
//!
//! Data flows one way: kernel → ring buffers → [`decode`] → [`pipeline`] → outputs, with
//! annotations from the [`annotate`] socket merged on the [`timeline`]; the [`daemon`] runs
//! that loop for `ingero trace`.
//!
//! The crate is a library so that benchmarks, examples and tests drive exactly the code the
//! `ingero` binary runs. Every module is declared here (not in main.rs).

pub mod analyze;
pub mod annotate;
pub mod bounded;
pub mod check;
pub mod cli;
pub mod daemon;
pub mod decode;
pub mod discover;
pub mod exits;
pub mod export;
pub mod graphs;
pub mod kernels;
pub mod launch;
pub mod live;
pub mod nccl;
pub mod nvtx;
pub mod pipeline;
pub mod probes;
pub mod ranks;
pub mod recording;
pub mod timeline;
