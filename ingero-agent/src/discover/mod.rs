//! Finding what to trace: CUDA runtime libraries on disk and in running processes, and the
//! symbols each one exports.

pub mod libraries;
pub mod symbols;

pub use libraries::{LibraryFile, find_cuda_runtimes};
pub use symbols::exported_functions;
