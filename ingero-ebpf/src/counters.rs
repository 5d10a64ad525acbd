//! Slots of the kernel side's per-CPU `COUNTERS` array: every loss in the kernel is counted in
//! one of them and the agent reports them all.

/// Number of slots.
pub const SLOTS: u32 = 24;

/// Slots `1..=6` count ring buffer reserve failures, indexed by [`crate::RecordKind`]; kinds
/// added later have slots after the other counters.
pub const fn ring_full(kind: crate::RecordKind) -> u32 {
    match kind {
        crate::RecordKind::NvtxProbe => RING_FULL_NVTX_PROBE,
        crate::RecordKind::DriverLog => RING_FULL_DRIVER_LOG,
        _ => kind as u32,
    }
}

/// A call's out-pointer (module, function, graph handle) could not be read at return.
pub const OUT_READ_FAILED: u32 = 7;
/// A CUDA call nested deeper than the per-thread frame stack: its return is not recorded.
pub const NESTING_OVERFLOW: u32 = 8;
/// The tracked-process map was full: a process could not be added.
pub const TRACKED_FULL: u32 = 9;
/// A successful free of a pointer whose allocation was not seen (freed bytes unknown).
pub const FREE_UNKNOWN: u32 = 10;
/// `*devPtr` could not be read after a successful allocation.
pub const ALLOC_READ_FAILED: u32 = 11;
/// Stack arguments or a launch config could not be read at entry.
pub const ARG_READ_FAILED: u32 = 12;
/// The per-thread entry state could not be created (map update failed).
pub const FRAMES_UNAVAILABLE: u32 = 13;
/// The off-CPU start of a thread could not be stored.
pub const OFF_CPU_INSERT_FAILED: u32 = 14;
/// A kernel name could not be read at registration or lookup.
pub const NAME_READ_FAILED: u32 = 15;
/// An NVTX fallback record found the ring full.
pub const RING_FULL_NVTX_PROBE: u32 = 16;
/// An NVTX fallback probe could not read the message or its attributes.
pub const NVTX_READ_FAILED: u32 = 17;

/// An NVIDIA driver message found the ring full.
pub const RING_FULL_DRIVER_LOG: u32 = 18;

/// A name for every slot that is used, for reports.
pub const NAMED: &[(u32, &str)] = &[
    (1, "ring_full_cuda"),
    (2, "ring_full_off_cpu"),
    (3, "ring_full_exec"),
    (4, "ring_full_exit"),
    (5, "ring_full_fork"),
    (6, "ring_full_kernel_name"),
    (OUT_READ_FAILED, "out_pointer_unreadable"),
    (NESTING_OVERFLOW, "nesting_overflow"),
    (TRACKED_FULL, "tracked_map_full"),
    (FREE_UNKNOWN, "free_of_unknown_pointer"),
    (ALLOC_READ_FAILED, "alloc_pointer_unreadable"),
    (ARG_READ_FAILED, "argument_unreadable"),
    (FRAMES_UNAVAILABLE, "entry_state_unavailable"),
    (OFF_CPU_INSERT_FAILED, "off_cpu_state_unavailable"),
    (NAME_READ_FAILED, "kernel_name_unreadable"),
    (RING_FULL_NVTX_PROBE, "ring_full_nvtx_probe"),
    (NVTX_READ_FAILED, "nvtx_message_unreadable"),
    (RING_FULL_DRIVER_LOG, "ring_full_driver_log"),
];

const _: () = assert!(RING_FULL_DRIVER_LOG < SLOTS);
