//! Finding what to trace: the CUDA runtime (`libcudart`) and driver (`libcuda`) libraries on
//! disk and in running processes, which of the two each file is, and the symbols it exports;
//! the NVTX libraries the fallback probes; what `/proc` says of the processes (`proc_maps`);
//! programs that have the runtime linked in rather than loaded (`embedded`), and which
//! mapped files were looked at for one (`looked`).

pub mod embedded;
pub mod kind;
pub mod libraries;
pub mod looked;
pub mod nvtx;
pub mod places;
pub mod proc_maps;
pub mod symbols;

pub use libraries::{LibraryFile, find_cuda_libraries};
pub use symbols::exported_functions;
