//! Records and constants shared by the eBPF programs and the `ingero` agent.
//!
//! Everything here is `#![no_std]` and plain `#[repr(C)]` data so that the kernel side writes
//! exactly the bytes the user side reads. Sizes are pinned by compile-time assertions: a change to
//! a record that would silently desynchronise the two sides fails to compile instead.
#![no_std]

pub mod config;
pub mod counters;
pub mod cuda_ops;
pub mod nvtx_calls;
pub mod records;

pub use config::{Config, FilterMode, TracepointLayout};
pub use cuda_ops::{CudaLibrary, CudaOp, OpFlags};
pub use nvtx_calls::{NvtxAction, NvtxCall};
pub use records::*;
