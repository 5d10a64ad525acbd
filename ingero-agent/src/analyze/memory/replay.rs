//! [`Replay`]: every allocation and free of a recording, from its start up to the end of the
//! window, replayed per process into the bytes each kind of memory held over time.
//!
//! Held and peak need the allocations made before the window (a model loaded at start is
//! held all through a window at the end), so the replay starts at the recording's first
//! record; the window only decides what counts as "allocated / freed in the window" and where
//! the peak is looked for (from the level held when the window opens).
//!
//! Memory from CUDA's virtual memory management API (`cuMemCreate`, mapped by `cuMemMap`) is
//! held until its handle is released and every mapping unmapped, whichever comes last
//! ([`PhysicalMemory`]).
//!
//! What the replay cannot know is said, never dropped: allocations made before tracing began
//! show up only as frees of unknown pointers; allocations that succeeded without a recorded
//! pointer (legacy 32-bit exports, recordings made before host pointers were recorded), or
//! past [`MAX_LIVE`], are counted as untracked and left out of held and peak.

use std::sync::Arc;

use ingero_ebpf::CudaOp;
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::{
    ArgsShape, CudaArgs, CudaCallRecord, LifecycleRecord, MemKind, PhysicalChange, PhysicalMemory,
    ProcessOp, ReadRecord, counts_for_memory,
};
use serde::Serialize;

/// Live allocations followed at once, over all processes: past it an allocation is counted
/// as untracked (32 bytes each plus the map's overhead: about 64 MiB at the bound).
pub const MAX_LIVE: usize = 1 << 20;
/// Set in the [`ProcMemory`] key of a `cuMemCreate` block (its handle), which no user-space
/// device or host pointer has.
const PHYSICAL_KEY: u64 = 1 << 63;
/// Processes followed; the memory calls of others are counted in
/// [`ReplayResult::untracked_process_calls`].
pub const MAX_PROCESSES: usize = 65_536;
/// The largest live allocations kept per process for display.
pub const TOP_LIVE: usize = 5;

/// Bytes held over time, and what moved in the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Level {
    /// Held at the end of the window (allocated and not freed, as far as ingero saw).
    pub held_bytes: u64,
    /// The most held at once in the window (counting what was held when it opened).
    pub peak_bytes: u64,
    /// When the peak was first reached (the window's start if held from before it); `None`
    /// when nothing was held in the window.
    pub peak_ns: Option<u64>,
    /// Allocated in the window.
    pub allocated_bytes: u64,
    /// Freed in the window (of allocations the replay knew).
    pub freed_bytes: u64,
    /// Allocation calls in the window (successful and followed).
    pub allocations: u64,
    /// Free calls in the window that released an allocation the replay knew.
    pub frees: u64,
    /// Allocations live at the end of the window.
    pub live_allocations: u64,
}

impl Level {
    fn alloc(&mut self, size: u64, ts: u64, in_window: bool) {
        self.held_bytes = self.held_bytes.saturating_add(size);
        self.live_allocations += 1;
        if in_window {
            self.allocated_bytes = self.allocated_bytes.saturating_add(size);
            self.allocations += 1;
            if self.held_bytes > self.peak_bytes {
                self.peak_bytes = self.held_bytes;
                self.peak_ns = Some(ts);
            }
        }
    }

    fn free(&mut self, size: u64, in_window: bool) {
        self.held_bytes = self.held_bytes.saturating_sub(size);
        self.live_allocations = self.live_allocations.saturating_sub(1);
        if in_window {
            self.freed_bytes = self.freed_bytes.saturating_add(size);
            self.frees += 1;
        }
    }

    /// The window opens: what is held then is the peak so far.
    fn open(&mut self, start_ns: u64) {
        self.peak_bytes = self.held_bytes;
        self.peak_ns = (self.held_bytes > 0).then_some(start_ns);
    }

    /// The process ended: the driver released everything.
    fn release(&mut self) {
        self.held_bytes = 0;
        self.live_allocations = 0;
    }
}

/// One live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Live {
    pub ptr: u64,
    pub size: u64,
    /// The allocating call's start.
    pub ts_ns: u64,
    pub op: CudaOp,
    pub kind: MemKind,
}

/// What the replay of one process could not size or follow in the window; the row of
/// `query --memory` shows it as is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Unfollowed {
    /// Frees in the window of device pointers the replay never saw allocated.
    pub unknown_frees: u64,
    /// What the probes knew of those frees' sizes (their own allocation map).
    pub unknown_freed_bytes: u64,
    /// Pinned host frees in the window of pointers the replay never saw allocated.
    pub unknown_host_frees: u64,
    /// Successful allocations in the window the replay could not follow (no pointer
    /// recorded, or past [`MAX_LIVE`]): not in held or peak.
    pub untracked_allocations: u64,
    pub untracked_bytes: u64,
    /// Allocation calls in the window that returned an error.
    pub failed_allocations: u64,
}

impl Unfollowed {
    /// Whether there is anything to say.
    fn any(&self) -> bool {
        self.unknown_frees + self.unknown_host_frees > 0
            || self.untracked_allocations + self.failed_allocations > 0
    }
}

/// What a process held when it exited.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exited {
    pub ts_ns: u64,
    /// GPU bytes (device, pool, managed, vmm) still allocated then, released by the exit.
    pub gpu_held_bytes: u64,
    /// Pinned host bytes still allocated then.
    pub pinned_held_bytes: u64,
}

/// One process's memory.
#[derive(Clone, Debug)]
pub struct ProcMemory {
    pub pid: u32,
    /// The main thread's name (another thread's until the main thread shows up).
    pub command: Arc<str>,
    /// Device, pool, managed and vmm together: the GPU memory the process held.
    pub gpu: Level,
    /// Per [`MemKind`], by [`MemKind::index`].
    pub kinds: [Level; MemKind::ALL.len()],
    /// Followed blocks by key: the pointer, or for a `cuMemCreate` block its handle with
    /// [`PHYSICAL_KEY`] set (a user-space pointer never has it), so the two never collide.
    live: FastMap<u64, Live>,
    /// The state of `cuMemCreate` handles and their mappings.
    physical: PhysicalMemory,
    /// What the replay could not size or follow in the window.
    pub unfollowed: Unfollowed,
    /// Set when the process exited (before the end of the window).
    pub exited: Option<Exited>,
    /// The largest allocations live at the end of the window, or at exit; largest first.
    pub largest: Vec<Live>,
    /// The first and last memory call replayed.
    pub first_ns: u64,
    pub last_ns: u64,
}

impl ProcMemory {
    fn new(pid: u32, command: Arc<str>, ts: u64) -> ProcMemory {
        ProcMemory {
            pid,
            command,
            gpu: Level::default(),
            kinds: [Level::default(); MemKind::ALL.len()],
            live: FastMap::default(),
            physical: PhysicalMemory::default(),
            unfollowed: Unfollowed::default(),
            exited: None,
            largest: Vec::new(),
            first_ns: ts,
            last_ns: ts,
        }
    }

    fn levels(&mut self, kind: MemKind) -> (&mut Level, Option<&mut Level>) {
        let gpu = kind.is_gpu().then_some(&mut self.gpu);
        (&mut self.kinds[kind.index()], gpu)
    }

    /// `size` bytes of `kind` allocated at `ts`: held by its kind's level (and the GPU total).
    fn hold(&mut self, kind: MemKind, size: u64, ts: u64, in_window: bool) {
        let (k, g) = self.levels(kind);
        k.alloc(size, ts, in_window);
        if let Some(g) = g {
            g.alloc(size, ts, in_window);
        }
    }

    /// `size` bytes of `kind` no longer held.
    fn unhold(&mut self, kind: MemKind, size: u64, in_window: bool) {
        let (k, g) = self.levels(kind);
        k.free(size, in_window);
        if let Some(g) = g {
            g.free(size, in_window);
        }
    }

    /// Frees the live block at `ptr` from its kind's level (and the GPU total); whether there
    /// was one.
    fn release(&mut self, ptr: u64, in_window: bool) -> bool {
        let Some(old) = self.live.remove(&ptr) else {
            return false;
        };
        self.unhold(old.kind, old.size, in_window);
        true
    }

    /// What the process counts against [`MAX_LIVE`]: its live blocks, and the handles and
    /// mappings of `cuMemCreate` memory (a block of it counts as both).
    fn footprint(&self) -> usize {
        self.live.len() + self.physical.followed()
    }

    /// Applies what a `cuMemCreate`-family call did; whether it was memory not followed for
    /// the live bound.
    fn physical_change(&mut self, ch: PhysicalChange, in_window: bool) -> bool {
        match ch {
            PhysicalChange::Created(b) => {
                self.live.insert(
                    b.handle | PHYSICAL_KEY,
                    Live {
                        ptr: b.handle,
                        size: b.size,
                        ts_ns: b.ts_ns,
                        op: CudaOp::CuMemCreate,
                        kind: b.kind,
                    },
                );
                self.hold(b.kind, b.size, b.ts_ns, in_window);
                false
            }
            PhysicalChange::Freed(b) => {
                self.release(b.handle | PHYSICAL_KEY, in_window);
                false
            }
            PhysicalChange::Unfollowed { size } => {
                if in_window && size > 0 {
                    self.unfollowed.untracked_allocations += 1;
                    self.unfollowed.untracked_bytes =
                        self.unfollowed.untracked_bytes.saturating_add(size);
                }
                true
            }
            PhysicalChange::UnknownRelease => {
                self.unfollowed.unknown_frees += u64::from(in_window);
                false
            }
        }
    }

    /// Whether the process has anything to report for the window.
    pub fn reportable(&self) -> bool {
        let moved = |l: &Level| l.held_bytes > 0 || l.allocations > 0 || l.frees > 0;
        self.kinds.iter().any(moved) || self.unfollowed.any() || self.exited.is_some()
    }

    /// The `n` largest live allocations, largest first (earliest first among equals).
    fn top_live(&self, n: usize) -> Vec<Live> {
        let mut all: Vec<Live> = self.live.values().copied().collect();
        all.sort_by(|a, b| b.size.cmp(&a.size).then(a.ts_ns.cmp(&b.ts_ns)));
        all.truncate(n);
        all
    }

    fn open(&mut self, start_ns: u64) {
        self.gpu.open(start_ns);
        for l in &mut self.kinds {
            l.open(start_ns);
        }
    }
}

/// The replay's window: held is at `end_ns`; allocations and frees count from `start_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// The replay's bounds (tests use small ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub live: usize,
    pub processes: usize,
    pub top: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            live: MAX_LIVE,
            processes: MAX_PROCESSES,
            top: TOP_LIVE,
        }
    }
}

/// The replay in progress.
pub struct Replay {
    window: Window,
    pids: Vec<u32>,
    limits: Limits,
    procs: FastMap<u32, ProcMemory>,
    /// Live allocations over all processes.
    live_total: usize,
    opened: bool,
    over_limit: u64,
    untracked_process_calls: u64,
}

/// What the replay found.
#[derive(Clone, Debug, Default)]
pub struct ReplayResult {
    pub window: Option<Window>,
    /// The processes with something to report, by pid.
    pub procs: Vec<ProcMemory>,
    /// Allocations (anywhere up to the window's end) not followed because [`MAX_LIVE`] were
    /// live: held bytes may be short by them.
    pub over_limit: u64,
    /// Memory calls of processes past [`MAX_PROCESSES`].
    pub untracked_process_calls: u64,
}

impl Replay {
    /// A replay of the processes `pids` (empty: all).
    pub fn new(window: Window, pids: Vec<u32>, limits: Limits) -> Replay {
        Replay {
            window,
            pids,
            limits,
            procs: FastMap::default(),
            live_total: 0,
            opened: false,
            over_limit: 0,
            untracked_process_calls: 0,
        }
    }

    /// Feeds one record (in the recording's time order).
    pub fn record(&mut self, rec: &ReadRecord) {
        match rec {
            ReadRecord::Cuda(c) => self.cuda(c),
            ReadRecord::Lifecycle(l) => self.lifecycle(l),
            _ => {}
        }
    }

    fn admits(&self, pid: u32, ts: u64) -> bool {
        ts <= self.window.end_ns && (self.pids.is_empty() || self.pids.contains(&pid))
    }

    /// Opens the window before the first event in it.
    fn step_to(&mut self, ts: u64) -> bool {
        let in_window = ts >= self.window.start_ns;
        if in_window && !self.opened {
            self.opened = true;
            for p in self.procs.values_mut() {
                p.open(self.window.start_ns);
            }
        }
        in_window
    }

    fn proc(&mut self, c: &CudaCallRecord) -> Option<&mut ProcMemory> {
        let pid = c.thread.pid;
        if !self.procs.contains_key(&pid) && self.procs.len() >= self.limits.processes {
            self.untracked_process_calls += 1;
            return None;
        }
        let p = self
            .procs
            .entry(pid)
            .or_insert_with(|| ProcMemory::new(pid, Arc::clone(&c.thread.name), c.ts_ns));
        if (p.command.is_empty() || c.thread.tid == pid)
            && !c.thread.name.is_empty()
            && *p.command != *c.thread.name
        {
            p.command = Arc::clone(&c.thread.name);
        }
        // A pid seen again after its exit is a new process with the same number.
        p.exited = None;
        p.last_ns = c.ts_ns;
        Some(p)
    }

    fn cuda(&mut self, c: &CudaCallRecord) {
        if !ArgsShape::of(c.op).is_memory()
            || !counts_for_memory(c.detail.parent)
            || !self.admits(c.thread.pid, c.ts_ns)
        {
            return;
        }
        let in_window = self.step_to(c.ts_ns);
        let (ts, ret, op) = (c.ts_ns, c.ret, c.op);
        let limit = self.limits.live;
        let full = self.live_total >= limit;
        let Some(p) = self.proc(c) else { return };
        let mut live_delta: isize = 0;
        let mut over = false;
        match c.args {
            CudaArgs::Alloc { size, ptr, .. } | CudaArgs::HostAlloc { size, ptr } => {
                let Some(kind) = MemKind::of_alloc(op) else {
                    return;
                };
                if ret != 0 {
                    p.unfollowed.failed_allocations += u64::from(in_window);
                    return;
                }
                let tracked = match ptr {
                    Some(ptr) if ptr != 0 && !full => {
                        let l = Live {
                            ptr,
                            size,
                            ts_ns: ts,
                            op,
                            kind,
                        };
                        // A pointer handed out again without a free seen in between: the
                        // old block is gone (its free was missed), replaced by this one.
                        if let Some(old) = p.live.insert(ptr, l) {
                            p.unhold(old.kind, old.size, false);
                        } else {
                            live_delta = 1;
                        }
                        true
                    }
                    Some(ptr) if ptr != 0 => {
                        over = true;
                        false
                    }
                    _ => false,
                };
                if tracked {
                    p.hold(kind, size, ts, in_window);
                } else if in_window {
                    p.unfollowed.untracked_allocations += 1;
                    p.unfollowed.untracked_bytes =
                        p.unfollowed.untracked_bytes.saturating_add(size);
                }
            }
            CudaArgs::Free { ptr, size, .. } => {
                // `cudaFree(NULL)` frees nothing (frameworks call it to create the context);
                // a failed free released nothing.
                if ptr == 0 || ret != 0 {
                    return;
                }
                if p.release(ptr, in_window) {
                    live_delta = -1;
                } else if in_window {
                    let u = &mut p.unfollowed;
                    u.unknown_frees += 1;
                    u.unknown_freed_bytes = u.unknown_freed_bytes.saturating_add(size.unwrap_or(0));
                }
            }
            CudaArgs::HostFree { ptr } => {
                if ptr == 0 || ret != 0 {
                    return;
                }
                if p.release(ptr, in_window) {
                    live_delta = -1;
                } else if in_window {
                    p.unfollowed.unknown_host_frees += 1;
                }
            }
            ref args if args.is_by_handle() => {
                if ret != 0 {
                    let create = matches!(c.args, CudaArgs::PhysicalCreate { .. });
                    p.unfollowed.failed_allocations += u64::from(in_window && create);
                    return;
                }
                let before = p.footprint();
                for ch in p.physical.apply(op, &c.args, ts, !full) {
                    over |= p.physical_change(ch, in_window);
                }
                // The handles and mappings followed count against the live bound too.
                live_delta = p.footprint() as isize - before as isize;
            }
            _ => {}
        }
        self.live_total = self.live_total.saturating_add_signed(live_delta);
        // Counted wherever it falls: a block not followed before the window is missing from
        // the held bytes too.
        self.over_limit += u64::from(over);
    }

    fn lifecycle(&mut self, l: &LifecycleRecord) {
        if l.op != ProcessOp::Exit || !self.admits(l.thread.pid, l.ts_ns) {
            return;
        }
        let in_window = self.step_to(l.ts_ns);
        let top = self.limits.top;
        let Some(p) = self.procs.get_mut(&l.thread.pid) else {
            return;
        };
        // The exit is reported only when it falls in the window; before it, the process
        // simply holds nothing by then.
        p.largest = p.top_live(top);
        if in_window {
            p.exited = Some(Exited {
                ts_ns: l.ts_ns,
                gpu_held_bytes: p.gpu.held_bytes,
                pinned_held_bytes: p.kinds[MemKind::Pinned.index()].held_bytes,
            });
        } else {
            p.largest.clear();
        }
        self.live_total = self.live_total.saturating_sub(p.footprint());
        p.live = FastMap::default();
        p.physical = PhysicalMemory::default();
        p.gpu.release();
        for k in &mut p.kinds {
            k.release();
        }
    }

    /// Ends the replay: the window's last levels and largest allocations.
    pub fn finish(mut self) -> ReplayResult {
        self.step_to(self.window.end_ns);
        let top = self.limits.top;
        let mut procs: Vec<ProcMemory> = self
            .procs
            .into_values()
            .filter(ProcMemory::reportable)
            .map(|mut p| {
                if p.exited.is_none() {
                    p.largest = p.top_live(top);
                }
                p.live = FastMap::default();
                p.physical = PhysicalMemory::default();
                p
            })
            .collect();
        procs.sort_by_key(|p| p.pid);
        ReplayResult {
            window: Some(self.window),
            procs,
            over_limit: self.over_limit,
            untracked_process_calls: self.untracked_process_calls,
        }
    }
}
