//! Every map of the object. Sizes here are defaults; the agent overrides ring buffer sizes
//! (`--ringbuf-size`) at load time.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use ingero_ebpf::{COMM_LEN, Config, MAX_ARGS, counters};

/// Completed CUDA calls ([`ingero_ebpf::CudaRecord`]).
#[map]
pub static CUDA_EVENTS: RingBuf = RingBuf::with_byte_size(4 * 1024 * 1024, 0);

/// Kernel names and handle aliases ([`ingero_ebpf::NameRecord`]): a ring of their own, so a
/// registration burst (24 k names while `libtorch_cuda.so` loads) never costs a call record.
#[map]
pub static NAME_EVENTS: RingBuf = RingBuf::with_byte_size(4 * 1024 * 1024, 0);

/// Off-CPU intervals and process lifecycle records.
#[map]
pub static SCHED_EVENTS: RingBuf = RingBuf::with_byte_size(1024 * 1024, 0);

/// Per-CPU counters indexed by [`ingero_ebpf::counters`] slots: ring buffer reserve failures per
/// record kind, and the kernel side's other losses.
#[map]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counters::SLOTS, 0);

/// The agent's [`Config`] (one entry).
#[map]
pub static CONFIG: Array<Config> = Array::with_max_entries(1, 0);

/// Traced thread groups. Pre-filled by the agent; grown by uprobe entries (filter mode `All`)
/// and by forks of traced processes. A plain hash: an entry must never be evicted silently,
/// and a failed insert is counted.
#[map]
pub static TRACKED: HashMap<u32, u32> = HashMap::with_max_entries(65536, 0);

/// Deepest nesting of traced CUDA calls per thread that is paired exactly.
pub const MAX_DEPTH: u32 = 4;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Frame {
    pub ts_ns: u64,
    pub cookie: u64,
    /// The cookie of the call this one is nested in (0: outermost), restored as the thread's
    /// current call at return.
    pub parent_cookie: u64,
    pub args: [u64; MAX_ARGS],
}

/// Calls in flight on one thread, innermost last.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ThreadFrames {
    pub depth: u32,
    pub _pad: u32,
    /// The cookie of the innermost call in flight (0: none). Kept apart from `frames` so the
    /// parent is read without indexing `depth - 1`, which the verifier cannot bound.
    pub current: u64,
    pub frames: [Frame; MAX_DEPTH as usize],
}

/// Entry state per thread, keyed by the full `pid_tgid`. LRU so threads that die mid-call
/// cannot fill it.
#[map]
pub static THREAD_FRAMES: LruHashMap<u64, ThreadFrames> = LruHashMap::with_max_entries(16384, 0);

/// A zeroed template for new [`THREAD_FRAMES`] entries: too large for the 512-byte stack.
#[map]
pub static FRAMES_TEMPLATE: PerCpuArray<ThreadFrames> = PerCpuArray::with_max_entries(1, 0);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct AllocKey {
    pub tgid: u32,
    pub _pad: u32,
    pub ptr: u64,
}

/// Live device allocations, so a free can report the bytes it released.
#[map]
pub static ALLOCS: LruHashMap<AllocKey, u64> = LruHashMap::with_max_entries(131072, 0);

/// A traced thread that is off the CPU, keyed by tid.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OffCpuStart {
    pub ts_ns: u64,
    pub cgroup_id: u64,
    pub prev_state: i64,
    pub tgid: u32,
    pub reason: u32,
    pub next_tid: u32,
    pub cpu: u32,
    pub comm: [u8; COMM_LEN],
    pub next_comm: [u8; COMM_LEN],
}

#[map]
pub static OFF_CPU: LruHashMap<u32, OffCpuStart> = LruHashMap::with_max_entries(65536, 0);

/// Clone flags of new tasks of traced processes, from task_newtask until sched_process_fork.
#[map]
pub static CLONE_FLAGS: LruHashMap<u32, u64> = LruHashMap::with_max_entries(4096, 0);
