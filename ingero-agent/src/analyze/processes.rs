//! Per-process accounting: name, GPU API time, device memory allocated and freed (with the
//! live allocations by pointer, so frees without a recorded size still count), failed
//! allocations, the first calls of each operation (for cold start), pinned host memory and
//! the async copies not from it ([`Pinned`]). Bounded: [`LIVE_FOLLOWED`] live allocations by
//! pointer per process (past it an allocation is counted, [`ProcStats::live_unfollowed`],
//! and its free is sized by its own arguments only).

use std::sync::Arc;

use ingero_ebpf::CudaOp;
use ingero_ebpf::cuda_ops::MAX_OP;

use super::pinned::{Pinned, concerns_pinned};
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::CudaArgs;
use ingero_trace::model::CudaCallRecord;
use ingero_trace::model::{MemKind, PhysicalChange, PhysicalMemory};

/// First calls kept per process and operation, for the cold-start rule.
pub const FIRST_CALLS: usize = 5;
/// `cuMemCreate` handles and mappings followed per process; past it a creation is counted
/// as an allocation but its memory is not followed to its end.
const PHYSICAL_FOLLOWED: usize = 1 << 20;
/// Live allocations followed by pointer per process (about 32 bytes each: 8 MiB at the
/// bound); past it an allocation is counted in [`ProcStats::live_unfollowed`].
pub const LIVE_FOLLOWED: usize = 1 << 18;
/// Failed allocations kept per process as evidence.
const FAILED_KEPT: usize = 8;

/// A failed allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailedAlloc {
    pub ts_ns: u64,
    pub op: CudaOp,
    pub size: u64,
    pub ret: i32,
}

/// One process.
#[derive(Default)]
pub struct ProcStats {
    pub name: String,
    pub calls: u64,
    pub api_ns: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub allocs: u64,
    pub alloc_bytes: u64,
    pub frees: u64,
    pub freed_bytes: u64,
    pub failed_allocs: u64,
    pub failed: Vec<FailedAlloc>,
    /// First and last successful allocation.
    pub first_alloc_ns: u64,
    pub last_alloc_ns: u64,
    live: FastMap<u64, u64>,
    /// Allocations not followed by pointer because [`LIVE_FOLLOWED`] were live.
    pub live_unfollowed: u64,
    /// `cuMemCreate` handles and their mappings.
    physical: PhysicalMemory,
    /// The first calls of each op (up to [`FIRST_CALLS`]): start and duration.
    pub first_calls: FastMap<CudaOp, Vec<(u64, u64)>>,
    /// The ops whose first calls are all in, so later calls skip the map.
    first_calls_full: OpBits,
    /// Pinned host ranges and the async copies not from them.
    pub pinned: Pinned,
    /// The thread name checked last: once checked, `name` holds it (or it was empty), and
    /// held here it cannot be freed and its address reused for another name.
    name_seen: Option<Arc<str>>,
}

/// A set of ops: one bit per op value (the op table has at most `MAX_OP` values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpBits([u64; MAX_OP / 64]);

impl OpBits {
    #[inline(always)]
    pub fn has(&self, op: CudaOp) -> bool {
        let v = op as usize;
        self.0
            .get(v / 64)
            .is_some_and(|w| w & (1u64 << (v % 64)) != 0)
    }

    pub fn set(&mut self, op: CudaOp) {
        let v = op as usize;
        if let Some(w) = self.0.get_mut(v / 64) {
            *w |= 1u64 << (v % 64);
        }
    }
}

impl ProcStats {
    /// Accounts one call; returns the net device bytes it allocated (negative: freed).
    #[inline]
    pub fn add(&mut self, c: &CudaCallRecord) -> i64 {
        // The main thread's name is the process's; other threads only until it shows up.
        if (self.name.is_empty() || c.thread.pid == c.thread.tid)
            && !self
                .name_seen
                .as_ref()
                .is_some_and(|n| Arc::ptr_eq(n, &c.thread.name))
        {
            self.take_name(c);
        }
        let end = c.ts_ns + c.duration_ns;
        if self.calls == 0 || c.ts_ns < self.first_ns {
            self.first_ns = c.ts_ns;
        }
        self.last_ns = self.last_ns.max(end);
        self.calls += 1;
        self.api_ns += c.duration_ns;
        if !self.first_calls_full.has(c.op) {
            self.add_first_call(c);
        }
        match c.args {
            CudaArgs::Alloc { .. } | CudaArgs::Free { .. } => self.add_memory(c),
            ref args if args.is_by_handle() => self.add_physical(c),
            ref args if concerns_pinned(args) => {
                self.pinned.add(c);
                0
            }
            _ => 0,
        }
    }

    /// Adds calls summed by a [`super::proc_run::ProcRun`] (none of them allocating, freeing,
    /// failing, among the first calls of their op or starting before the first call).
    pub(super) fn add_run(&mut self, calls: u64, api_ns: u64, last_ns: u64) {
        self.last_ns = self.last_ns.max(last_ns);
        self.calls += calls;
        self.api_ns += api_ns;
    }

    /// What decides whether a call needs [`Self::add`]: whether the name is empty, the name
    /// checked last, the ops with all their first calls.
    pub(super) fn run_view(&self) -> (bool, Option<&Arc<str>>, OpBits) {
        (
            self.name.is_empty(),
            self.name_seen.as_ref(),
            self.first_calls_full,
        )
    }

    /// Takes the thread's name (if it has one) and remembers the name checked, so the calls
    /// that follow with the same (shared) name skip comparing it.
    #[inline(never)]
    fn take_name(&mut self, c: &CudaCallRecord) {
        if !c.thread.name.is_empty() && *self.name != *c.thread.name {
            self.name.clear();
            self.name.push_str(&c.thread.name);
        }
        self.name_seen = Some(Arc::clone(&c.thread.name));
    }

    /// Keeps the call while its op has fewer than [`FIRST_CALLS`].
    #[inline(never)]
    fn add_first_call(&mut self, c: &CudaCallRecord) {
        let first = self.first_calls.entry(c.op).or_default();
        if first.len() < FIRST_CALLS {
            first.push((c.ts_ns, c.duration_ns));
        }
        if first.len() >= FIRST_CALLS {
            self.first_calls_full.set(c.op);
        }
    }

    /// Accounts a call of CUDA's virtual memory management API: GPU memory is allocated at
    /// `cuMemCreate` and freed when its handle is released and unmapped, whichever is last.
    #[inline(never)]
    fn add_physical(&mut self, c: &CudaCallRecord) -> i64 {
        if c.ret != 0 {
            if let CudaArgs::PhysicalCreate { size, .. } = c.args {
                self.failed_alloc(c, size);
            }
            return 0;
        }
        // Host memory by handle is pinned where it is mapped, for the pageable-copy rule.
        match c.args {
            CudaArgs::AddressRange {
                ptr: Some(p),
                size,
                handle: Some(h),
            } if c.op == CudaOp::CuMemMap && self.physical.kind_of(h) == Some(MemKind::Pinned) => {
                self.pinned.pin(p, size);
            }
            CudaArgs::AddressRange {
                ptr: Some(p), size, ..
            } if c.op == CudaOp::CuMemUnmap => self.pinned.unpin_range(p, size),
            _ => {}
        }
        let room = self.physical.followed() < PHYSICAL_FOLLOWED;
        let mut net: i64 = 0;
        for ch in self.physical.apply(c.op, &c.args, c.ts_ns, room) {
            match ch {
                PhysicalChange::Created(b) if b.kind == MemKind::Vmm => {
                    self.allocated(c.ts_ns, b.size);
                    net = net.saturating_add(i64::try_from(b.size).unwrap_or(i64::MAX));
                }
                PhysicalChange::Freed(b) if b.kind == MemKind::Vmm => {
                    self.frees += 1;
                    self.freed_bytes += b.size;
                    net = net.saturating_sub(i64::try_from(b.size).unwrap_or(i64::MAX));
                }
                PhysicalChange::Unfollowed { size } if size > 0 => {
                    self.allocs += 1;
                    self.alloc_bytes += size;
                }
                _ => {}
            }
        }
        net
    }

    /// A failed allocation of `size` bytes: counted, and kept as evidence up to the bound.
    fn failed_alloc(&mut self, c: &CudaCallRecord, size: u64) {
        self.failed_allocs += 1;
        if self.failed.len() < FAILED_KEPT {
            self.failed.push(FailedAlloc {
                ts_ns: c.ts_ns,
                op: c.op,
                size,
                ret: c.ret,
            });
        }
    }

    /// A successful allocation of `size` bytes at `ts_ns`.
    fn allocated(&mut self, ts_ns: u64, size: u64) {
        if self.allocs == 0 {
            self.first_alloc_ns = ts_ns;
        }
        self.last_alloc_ns = ts_ns;
        self.allocs += 1;
        self.alloc_bytes += size;
    }

    /// Allocations and frees: live allocations, failures; returns the net bytes.
    #[inline(never)]
    fn add_memory(&mut self, c: &CudaCallRecord) -> i64 {
        match c.args {
            CudaArgs::Alloc { size, ptr, .. } => {
                if c.ret != 0 {
                    self.failed_alloc(c, size);
                    return 0;
                }
                self.allocated(c.ts_ns, size);
                if let Some(p) = ptr {
                    if self.live.len() < LIVE_FOLLOWED || self.live.contains_key(&p) {
                        self.live.insert(p, size);
                    } else {
                        self.live_unfollowed += 1;
                    }
                }
                i64::try_from(size).unwrap_or(i64::MAX)
            }
            CudaArgs::Free { ptr, size, .. } if c.ret == 0 && ptr != 0 => {
                let known = self.live.remove(&ptr);
                let size = size.or(known).unwrap_or(0);
                self.frees += 1;
                self.freed_bytes += size;
                -i64::try_from(size).unwrap_or(i64::MAX)
            }
            _ => 0,
        }
    }

    /// The sizes of the allocations still live, most bytes first: (size, how many), at most
    /// `n` sizes (allocations of one size are usually one call site in a loop).
    pub fn live_by_size(&self, n: usize) -> Vec<(u64, u64)> {
        let mut by: FastMap<u64, u64> = FastMap::default();
        let by_handle = self
            .physical
            .held()
            .filter(|b| b.kind == MemKind::Vmm)
            .map(|b| &b.size);
        for size in self.live.values().chain(by_handle) {
            *by.entry(*size).or_default() += 1;
        }
        let mut v: Vec<(u64, u64)> = by.into_iter().collect();
        v.sort_by(|a, b| (b.0 * b.1).cmp(&(a.0 * a.1)).then(b.0.cmp(&a.0)));
        v.truncate(n);
        v
    }

    /// Bytes allocated and not freed.
    pub fn outstanding(&self) -> u64 {
        self.alloc_bytes.saturating_sub(self.freed_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::tests::fixtures::call_record;

    fn call(op: CudaOp, args: CudaArgs, ts_ns: u64) -> CudaCallRecord {
        call_record(op, args, ts_ns, 10)
    }

    fn malloc(ptr: u64, size: u64) -> CudaCallRecord {
        let args = CudaArgs::Alloc {
            size,
            ptr: Some(ptr),
            stream: None,
        };
        call(CudaOp::Malloc, args, ptr)
    }

    fn free(ptr: u64) -> CudaCallRecord {
        let args = CudaArgs::Free {
            ptr,
            size: None,
            stream: None,
        };
        call(CudaOp::Free, args, ptr)
    }

    #[test]
    fn live_allocations_are_followed_up_to_the_bound_and_the_rest_counted() {
        let mut p = ProcStats::default();
        let n = LIVE_FOLLOWED as u64 + 3;
        for i in 1..=n {
            p.add(&malloc(i, 4));
        }
        assert_eq!(p.allocs, n, "every allocation counted");
        assert_eq!(p.live_unfollowed, 3);
        assert_eq!(p.live_by_size(5), vec![(4, LIVE_FOLLOWED as u64)]);
        // A followed allocation's free is sized; one past the bound, not.
        assert_eq!(p.add(&free(1)), -4);
        assert_eq!(p.add(&free(n)), 0);
        // Room again: a new allocation is followed, and so is a pointer reused.
        p.add(&malloc(n + 1, 8));
        assert_eq!(p.live_unfollowed, 3);
        assert_eq!(p.add(&free(n + 1)), -8);
    }
}
