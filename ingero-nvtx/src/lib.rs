//! `libingero_nvtx.so`: the NVTX injection library that streams an application's NVTX
//! annotations (ranges, marks, domains, registered strings, category and thread names) to the
//! ingero agent, and the wire format the agent decodes ([`wire`]).
//!
//! NVTX looks up `NVTX_INJECTION64_PATH` at each linkage unit's first NVTX call, `dlopen`s the
//! library it names and calls its [`InitializeInjectionNvtx2`], which fills the unit's CORE and
//! CORE2 function tables with this library's handlers. From then on every NVTX call of that
//! unit lands here, on the application's thread:
//!
//! - with no agent connected, push and pop only keep the thread's depths and every event is
//!   discarded at once (a relaxed atomic load decides);
//! - with an agent, the event is encoded into the thread's own single-producer ring
//!   (`ring`), without a lock, an allocation or a system call, and a background sender
//!   thread (`sender`) ships the rings' records in frames over a Unix stream socket;
//! - definitions (domains, registered strings, category and thread names) are also kept in a
//!   process-wide registry (`registry`) and replayed to every agent that connects.
//!
//! See docs/nvtx.md for the design, the limits and the bounds, and docs/benchmarks-nvtx.md for
//! the costs. The crate is both the `cdylib` that applications load and an `rlib` whose only
//! public module is [`wire`]; it depends on `libc` alone.

// The wire module is the contract the agent decodes with: every public item says what it means.
// Set here rather than in [workspace.lints] because Cargo cannot add a lint to one crate on top
// of `workspace = true`; "warn" is an error in CI, which runs clippy with -D warnings.
#![warn(missing_docs)]

mod callbacks;
mod fast;
mod ffi;
mod local;
mod lock;
mod registry;
mod ring;
mod sender;
pub mod socket_path;
mod state;
pub mod wire;

use std::ffi::{c_int, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};

use ffi::{ExportTableCallbacks, FunctionPointer, GetExportTable};

/// The NVTX injection entry point: called once per linkage unit (once per process for the v2
/// `libnvToolsExt`), on that unit's first NVTX call, with the unit's export-table accessor.
/// Fills the CORE and CORE2 tables, writing only the slots the unit's tables have
/// (`out_size`; libnvToolsExt 12.8's CORE2 has 15). Returns 1 when CORE was filled, 0 (NVTX
/// then unloads the tool and the unit stays a no-op) otherwise.
///
/// # Safety
/// `get_export_table` is NULL or NVTX's accessor, returning NULL or valid tables whose slot
/// pointers may be written.
#[unsafe(no_mangle)]
#[allow(non_snake_case, reason = "the symbol name NVTX looks up")]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: Option<GetExportTable>,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        let _errno = state::ErrnoGuard::new();
        let Some(get) = get_export_table else {
            return 0;
        };
        // SAFETY: NVTX's accessor, called with the id of the callbacks table.
        let callbacks = unsafe { get(ffi::ETID_CALLBACKS) }.cast::<ExportTableCallbacks>();
        if callbacks.is_null() {
            return 0;
        }
        // SAFETY: non-null, and NVTX's struct starts with its size.
        let cb = unsafe { &*callbacks };
        if cb.struct_size < size_of::<ExportTableCallbacks>() {
            return 0;
        }
        let Some(get_table) = cb.get_module_function_table else {
            return 0;
        };
        // SAFETY: NVTX's function, given valid tables (the caller's contract).
        let core = unsafe { fill(get_table, ffi::module::CORE, &callbacks::core_table()) };
        if !core {
            return 0;
        }
        // SAFETY: as above. A unit without CORE2 (none known) still gets CORE.
        unsafe { fill(get_table, ffi::module::CORE2, &callbacks::core2_table()) };
        sender::install_process_hooks();
        sender::start_and_wait_for_agent();
        1
    }))
    .unwrap_or(0)
}

type GetModuleFunctionTable =
    unsafe extern "C" fn(c_int, *mut *mut *mut FunctionPointer, *mut c_uint) -> c_int;

/// Writes `handlers` into `module`'s slots that exist; false when NVTX has no such table.
///
/// # Safety
/// `get_table` is NVTX's `GetModuleFunctionTable`.
unsafe fn fill(
    get_table: GetModuleFunctionTable,
    module: c_int,
    handlers: &[(usize, FunctionPointer)],
) -> bool {
    let mut table: *mut *mut FunctionPointer = std::ptr::null_mut();
    let mut size: c_uint = 0;
    // SAFETY: both out-pointers are valid locals.
    if unsafe { get_table(module, &mut table, &mut size) } == 0 || table.is_null() {
        return false;
    }
    for &(id, handler) in handlers {
        if id >= size as usize {
            continue;
        }
        // SAFETY: `table` has `size` entries (NVTX's contract) and id < size.
        let slot = unsafe { *table.add(id) };
        if !slot.is_null() {
            // SAFETY: a non-null entry points to the unit's function slot, which the tool owns
            // during initialization.
            unsafe { *slot = handler };
        }
    }
    true
}
