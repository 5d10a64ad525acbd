//! GPU memory held per process, for the live table: successful allocations (device, pool,
//! managed) add their size, frees subtract the size the probes remembered for the pointer
//! (their own live-allocation map, so the agent keeps no map of its own). A free the probes
//! could not size (memory allocated before tracing began) is counted, not guessed. Memory
//! created by handle (`cuMemCreate`) is held until the handle is released and unmapped, which
//! needs the handles' state: kept per process ([`PhysicalMemory`]), bounded over all of them.
//!
//! Bounded: at most [`MAX_MEMORY_PROCESSES`] processes; the calls of others are counted in
//! [`MemoryTally::untallied`]. A process that exits is dropped (the driver released its memory).

use std::collections::HashMap;

use ingero_ebpf::CudaOp;
use ingero_trace::model::{CudaArgs, CudaCall, Event};

use ingero_trace::model::{MemKind, PhysicalChange, PhysicalMemory, counts_for_memory};

/// Most processes tallied at once.
pub const MAX_MEMORY_PROCESSES: usize = 4096;
/// `cuMemCreate` handles and mappings followed at once, over all processes (about 64 bytes
/// each with the maps' overhead: some 16 MiB at the bound).
pub const MAX_PHYSICAL_FOLLOWED: usize = 1 << 18;

/// One process's GPU memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub comm: String,
    pub held: u64,
    pub peak: u64,
    /// Its `cuMemCreate` handles and their mappings.
    pub physical: PhysicalMemory,
}

impl Held {
    /// `delta` bytes more (or fewer) held; the peak follows.
    fn change(&mut self, delta: i128) {
        self.held = if delta >= 0 {
            self.held.saturating_add(delta as u64)
        } else {
            self.held.saturating_sub(delta.unsigned_abs() as u64)
        };
        self.peak = self.peak.max(self.held);
    }
}

/// GPU memory per process.
#[derive(Default)]
pub struct MemoryTally {
    pub by_pid: HashMap<u32, Held>,
    /// Frees of pointers the probes had not seen allocated.
    pub unknown_frees: u64,
    /// Memory calls of processes past [`MAX_MEMORY_PROCESSES`].
    pub untallied: u64,
    /// `cuMemCreate` handles and mappings followed, over all processes.
    physical_followed: usize,
    /// Handles or mappings not followed past [`MAX_PHYSICAL_FOLLOWED`].
    pub physical_unfollowed: u64,
}

impl MemoryTally {
    pub fn record(&mut self, event: &Event) {
        match event {
            Event::Cuda(c) if counts_for_memory(c.detail.parent) => self.cuda(c),
            _ => {}
        }
    }

    /// An exited process holds nothing. Called once the process's last CUDA records were
    /// taken (the pipeline's settled exits), so none of them brings it back.
    pub fn forget(&mut self, pid: u32) {
        if let Some(h) = self.by_pid.remove(&pid) {
            self.physical_followed = self.physical_followed.saturating_sub(h.physical.followed());
        }
    }

    fn cuda(&mut self, c: &CudaCall) {
        if c.ret != 0 {
            return;
        }
        if c.args.is_by_handle() {
            self.by_handle(c);
            return;
        }
        // A pitched allocation is not in the probes' map, so its free could not be sized:
        // left out rather than held forever. Pinned host memory is not the GPU's.
        let delta = match c.args {
            CudaArgs::Alloc {
                size, ptr: Some(_), ..
            } if c.op != CudaOp::CuMemAllocPitch
                && MemKind::of_alloc(c.op).is_some_and(MemKind::is_gpu) =>
            {
                size as i128
            }
            CudaArgs::Free {
                ptr, size: None, ..
            } if ptr != 0 => {
                self.unknown_frees += 1;
                return;
            }
            CudaArgs::Free {
                size: Some(size), ..
            } => -(size as i128),
            _ => return,
        };
        if let Some(h) = self.entry(c) {
            h.change(delta);
        }
    }

    /// Memory by handle: held from cuMemCreate until released and unmapped, which the
    /// process's handles say.
    fn by_handle(&mut self, c: &CudaCall) {
        let room = self.physical_followed < MAX_PHYSICAL_FOLLOWED;
        let Some(h) = self.entry(c) else { return };
        let before = h.physical.followed();
        let (mut delta, mut unknown, mut unfollowed) = (0i128, 0u64, 0u64);
        for ch in h.physical.apply(c.op, &c.args, c.ts_ns, room) {
            match ch {
                PhysicalChange::Created(b) if b.kind.is_gpu() => delta += b.size as i128,
                PhysicalChange::Freed(b) if b.kind.is_gpu() => delta -= b.size as i128,
                PhysicalChange::UnknownRelease => unknown += 1,
                PhysicalChange::Unfollowed { .. } => unfollowed += 1,
                _ => {}
            }
        }
        let after = h.physical.followed();
        h.change(delta);
        self.physical_followed = (self.physical_followed + after).saturating_sub(before);
        self.unknown_frees += unknown;
        self.physical_unfollowed += unfollowed;
    }

    /// The call's process, named by its main thread; `None` past [`MAX_MEMORY_PROCESSES`]
    /// (counted).
    fn entry(&mut self, c: &CudaCall) -> Option<&mut Held> {
        let pid = c.task.pid;
        if !self.by_pid.contains_key(&pid) && self.by_pid.len() >= MAX_MEMORY_PROCESSES {
            self.untallied += 1;
            return None;
        }
        let h = self.by_pid.entry(pid).or_default();
        if c.task.pid == c.task.tid || h.comm.is_empty() {
            let name = c.task.comm.as_str();
            if h.comm != name {
                h.comm = name.into_owned();
            }
        }
        Some(h)
    }

    /// The `n` processes holding the most: (pid, held), most first.
    pub fn top(&self, n: usize) -> Vec<(u32, &Held)> {
        let mut all: Vec<(u32, &Held)> = self
            .by_pid
            .iter()
            .filter(|(_, h)| h.peak > 0)
            .map(|(p, h)| (*p, h))
            .collect();
        all.sort_by(|a, b| {
            (b.1.held, b.1.peak)
                .cmp(&(a.1.held, a.1.peak))
                .then(a.0.cmp(&b.0))
        });
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_trace::model::{CallDetail, Comm, Task};

    fn task(pid: u32) -> Task {
        Task {
            pid,
            tid: pid,
            comm: Comm::from_str_lossy(&format!("p{pid}")),
            cgroup_id: 0,
            cpu: 0,
        }
    }

    fn call(pid: u32, op: CudaOp, args: CudaArgs, parent: Option<CudaOp>) -> Event {
        Event::Cuda(CudaCall {
            ts_ns: 1,
            duration_ns: 1,
            task: task(pid),
            op,
            ret: 0,
            args,
            detail: CallDetail {
                parent,
                ..Default::default()
            },
        })
    }

    fn alloc(size: u64) -> CudaArgs {
        CudaArgs::Alloc {
            size,
            ptr: Some(0x1000),
            stream: None,
        }
    }

    fn free(size: Option<u64>) -> CudaArgs {
        CudaArgs::Free {
            ptr: 0x1000,
            size,
            stream: None,
        }
    }

    #[test]
    fn held_and_peak_follow_allocations_and_sized_frees_once_per_call() {
        let mut m = MemoryTally::default();
        m.record(&call(1, CudaOp::Malloc, alloc(100), None));
        // The driver call inside cudaMalloc is the same memory.
        m.record(&call(
            1,
            CudaOp::CuMemAlloc,
            alloc(100),
            Some(CudaOp::Malloc),
        ));
        m.record(&call(1, CudaOp::MallocAsync, alloc(50), None));
        m.record(&call(1, CudaOp::Free, free(Some(100)), None));
        m.record(&call(
            1,
            CudaOp::CuMemFree,
            free(Some(100)),
            Some(CudaOp::Free),
        ));
        m.record(&call(1, CudaOp::Free, free(None), None));
        m.record(&call(
            1,
            CudaOp::MallocHost,
            CudaArgs::HostAlloc {
                size: 1 << 30,
                ptr: Some(1),
            },
            None,
        ));
        // Registered host memory is the caller's own: not the GPU's, never held.
        m.record(&call(
            1,
            CudaOp::HostRegister,
            CudaArgs::HostRegister {
                ptr: 0x2000,
                size: 1 << 30,
                flags: 0,
            },
            None,
        ));
        m.record(&call(2, CudaOp::Malloc, alloc(500), None));
        assert_eq!(m.by_pid[&1].held, 50);
        assert_eq!(m.by_pid[&1].peak, 150);
        assert_eq!(m.by_pid[&1].comm, "p1");
        assert_eq!(m.unknown_frees, 1);
        let top = m.top(5);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![2, 1]);
        m.forget(2);
        assert!(
            !m.by_pid.contains_key(&2),
            "an exited process holds nothing"
        );
    }

    #[test]
    fn memory_by_handle_is_held_until_released_and_unmapped() {
        use ingero_trace::model::MemLocation;
        let mut m = MemoryTally::default();
        let create = |handle, size, location| CudaArgs::PhysicalCreate {
            size,
            handle: Some(handle),
            location,
        };
        let range = |ptr, size, handle| CudaArgs::AddressRange {
            ptr: Some(ptr),
            size,
            handle,
        };
        let release = |handle| CudaArgs::PhysicalHandle {
            handle: Some(handle),
            ptr: None,
        };
        m.record(&call(
            1,
            CudaOp::CuMemCreate,
            create(0x51, 300, MemLocation::Device(0)),
            None,
        ));
        m.record(&call(
            1,
            CudaOp::CuMemMap,
            range(0x9000, 300, Some(0x51)),
            None,
        ));
        // Host memory by handle is not the GPU's.
        m.record(&call(
            1,
            CudaOp::CuMemCreate,
            create(0x52, 1 << 30, MemLocation::Host),
            None,
        ));
        m.record(&call(1, CudaOp::CuMemRelease, release(0x51), None));
        assert_eq!(m.by_pid[&1].held, 300, "released but mapped");
        m.record(&call(1, CudaOp::CuMemUnmap, range(0x9000, 300, None), None));
        assert_eq!((m.by_pid[&1].held, m.by_pid[&1].peak), (0, 300));
        m.record(&call(1, CudaOp::CuMemRelease, release(0x77), None));
        assert_eq!(m.unknown_frees, 1, "a handle never seen created");
        assert_eq!(m.physical_followed, 1, "the host block");
        m.forget(1);
        assert_eq!(m.physical_followed, 0, "an exit gives the bound back");
    }

    #[test]
    fn processes_are_bounded_and_the_rest_counted() {
        let mut m = MemoryTally::default();
        for pid in 0..(MAX_MEMORY_PROCESSES as u32 + 3) {
            m.record(&call(pid + 1, CudaOp::Malloc, alloc(1), None));
        }
        assert_eq!(m.by_pid.len(), MAX_MEMORY_PROCESSES);
        assert_eq!(m.untallied, 3);
    }
}
