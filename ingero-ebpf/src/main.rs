//! The eBPF object of the ingero agent: CUDA runtime uprobes, scheduler and process tracepoints.
//!
//! Built only for `bpfel-unknown-none` by `cargo xtask build-ebpf` (feature `programs`); the
//! agent embeds the committed object. One module per probe family, maps in one place.
#![no_std]
#![no_main]

mod programs;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: eBPF programs cannot panic at run time (the verifier rejects unbounded code); this
    // handler only satisfies the linker and is never reached.
    unsafe { core::hint::unreachable_unchecked() }
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
