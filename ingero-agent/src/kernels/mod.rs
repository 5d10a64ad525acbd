//! Kernel names: which kernel a launch's handle names, per process.
//!
//! The probes report facts "handle H of process P names the kernel called N" from
//! `__cudaRegisterFunction` (host function → device name, at library load),
//! `cuModuleGetFunction` and `cuLibraryGetKernel` (the returned handle → the name asked
//! for), and aliases "H2 names the same kernel as H1" from `cuKernelGetFunction` and
//! `__cudaGetKernel`. A launch (`cudaLaunchKernel`, `cuLaunchKernel`) then asks
//! [`KernelNames::resolve`].
//!
//! - Names are cut by the eBPF record (its first bytes, the string's address and a flag);
//!   [`KernelNames::name_from_record`] completes them from the process's memory
//!   (`user_memory.rs` says why there).
//! - Names are interned across processes (the ranks of a job register the same 24k names)
//!   and demangled once, c++filt style (`demangle.rs`).
//! - Handles registered before the agent started are named from the ELF symbols of the file
//!   mapped at the address (`elf_fallback.rs`): the host-side symbol, marked by its source.
//! - Everything is bounded (`store.rs`, `clock.rs`); evictions and failures are counted in
//!   [`KernelNameStats`].
//!
//! The store takes `&mut self` and holds no lock: one owner (the pipeline) feeds and asks it.

mod clock;
mod demangle;
mod elf_fallback;
mod elf_index;
mod intern;
mod maps;
mod name;
mod store;
mod user_memory;

#[cfg(test)]
mod elf_tests;
#[cfg(test)]
mod store_tests;

pub use demangle::demangle;
pub use elf_fallback::{AddressSymbolizer, ElfFallback};
pub use name::{KernelName, NameSource, TRUNCATION_MARK};
pub use store::{KernelNameLimits, KernelNameStats, KernelNames};
pub use user_memory::{MAX_NAME_LEN, complete_name, read_user_string};
