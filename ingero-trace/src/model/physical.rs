//! [`PhysicalMemory`]: one process's memory from CUDA's virtual memory management API, the
//! calls PyTorch's expandable segments, NCCL (2.19 on) and vLLM's sleep mode allocate with
//! instead of `cuMemAlloc`.
//!
//! `cuMemCreate` makes physical memory and names it by a handle; `cuMemMap` maps it into an
//! address range reserved apart (`cuMemAddressReserve`). The driver frees the memory only
//! when every reference to the handle is released (`cuMemRelease`, one per `cuMemCreate`,
//! `cuMemRetainAllocationHandle` or import) *and* every mapping of it is unmapped
//! (`cuMemUnmap`), in either order: CUDA's samples release the handle right after mapping,
//! PyTorch unmaps first, NCCL retains the handle from the address and releases it twice. So
//! the memory is held from the create to whichever of the two comes last, and this state
//! machine says when that is. Reservations hold no memory: they are calls, not allocations.
//!
//! Used by `query --memory`'s replay and by the live table, each with its own bound on what it
//! follows ([`PhysicalMemory::followed`]).

use std::collections::BTreeMap;

use super::cuda_args::{CudaArgs, MemKind};
use crate::fast_map::FastMap;
use ingero_ebpf::CudaOp;

/// Physical memory behind one handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysicalBlock {
    /// The handle `cuMemCreate` returned.
    pub handle: u64,
    /// Bytes created (0 for memory imported from another process: not this one's).
    pub size: u64,
    /// Where it lives ([`MemKind::Vmm`] on a GPU, [`MemKind::Pinned`] on the host).
    pub kind: MemKind,
    /// The creating call's start.
    pub ts_ns: u64,
    /// References to the handle not yet released.
    refs: u32,
    /// Mappings of it not yet unmapped.
    maps: u32,
    /// Imported from another process (`cuMemImportFromShareableHandle`): that process's
    /// memory, followed only so its mappings and releases are known.
    imported: bool,
}

/// One mapped range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mapping {
    size: u64,
    handle: u64,
}

/// What a call did to the memory held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhysicalChange {
    /// Memory created and followed from now on.
    Created(PhysicalBlock),
    /// The memory of a block went back to the driver (last release and last unmap).
    Freed(PhysicalBlock),
    /// Memory created, or a mapping made, past the caller's bound: not followed (a block not
    /// followed is never held; a mapping not followed lets its block go at its release).
    Unfollowed {
        /// Bytes created (0 for a mapping).
        size: u64,
    },
    /// A release of a handle never seen created (before tracing began, or not followed).
    UnknownRelease,
}

/// One process's handles and mappings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhysicalMemory {
    blocks: FastMap<u64, PhysicalBlock>,
    mappings: BTreeMap<u64, Mapping>,
}

impl PhysicalMemory {
    /// Handles and mappings followed: what the caller's bound counts.
    pub fn followed(&self) -> usize {
        self.blocks.len() + self.mappings.len()
    }

    /// The blocks whose memory is held (not imported), in no order.
    pub fn held(&self) -> impl Iterator<Item = &PhysicalBlock> {
        self.blocks.values().filter(|b| !b.imported)
    }

    /// The kind of memory behind `handle`, while it is followed and not imported.
    pub fn kind_of(&self, handle: u64) -> Option<MemKind> {
        self.blocks
            .get(&handle)
            .filter(|b| !b.imported)
            .map(|b| b.kind)
    }

    /// Applies a successful call of `op` (a failed one changes nothing: the caller skips it)
    /// made at `ts_ns`; `room` says whether the caller's bound lets one more handle or mapping
    /// be followed. Returns what changed, in order (usually nothing or one change; an unmap
    /// may free several blocks).
    pub fn apply(
        &mut self,
        op: CudaOp,
        args: &CudaArgs,
        ts_ns: u64,
        room: bool,
    ) -> Vec<PhysicalChange> {
        let mut out = Vec::new();
        self.step(op, args, ts_ns, room, &mut |c| out.push(c));
        out
    }

    /// [`Self::apply`], each change to `change`.
    fn step(
        &mut self,
        op: CudaOp,
        args: &CudaArgs,
        ts_ns: u64,
        room: bool,
        change: &mut impl FnMut(PhysicalChange),
    ) {
        match (op, args) {
            (
                CudaOp::CuMemCreate,
                CudaArgs::PhysicalCreate {
                    size,
                    handle: Some(handle),
                    location,
                },
            ) => {
                let block = PhysicalBlock {
                    handle: *handle,
                    size: *size,
                    kind: MemKind::of_location(*location),
                    ts_ns,
                    refs: 1,
                    maps: 0,
                    imported: false,
                };
                self.replace(block, room, change);
            }
            (
                CudaOp::CuMemImportFromShareableHandle,
                CudaArgs::PhysicalHandle {
                    handle: Some(handle),
                    ..
                },
            ) => {
                let block = PhysicalBlock {
                    handle: *handle,
                    size: 0,
                    kind: MemKind::Vmm,
                    ts_ns,
                    refs: 1,
                    maps: 0,
                    imported: true,
                };
                self.replace(block, room, change);
            }
            (
                CudaOp::CuMemRetainAllocationHandle,
                CudaArgs::PhysicalHandle {
                    handle: Some(handle),
                    ..
                },
            ) => {
                if let Some(b) = self.blocks.get_mut(handle) {
                    b.refs = b.refs.saturating_add(1);
                }
            }
            (
                CudaOp::CuMemRelease,
                CudaArgs::PhysicalHandle {
                    handle: Some(handle),
                    ..
                },
            ) => match self.blocks.get_mut(handle) {
                Some(b) => {
                    b.refs = b.refs.saturating_sub(1);
                    self.settle(*handle, change);
                }
                None => change(PhysicalChange::UnknownRelease),
            },
            (
                CudaOp::CuMemMap,
                CudaArgs::AddressRange {
                    ptr: Some(ptr),
                    size,
                    handle: Some(handle),
                },
            ) => {
                if !self.blocks.contains_key(handle) {
                    // Memory created before tracing began (or not followed): nothing to hold.
                    return;
                }
                // A mapping at the same address without an unmap seen in between: the old
                // one is gone.
                self.unmap(*ptr, 1, change);
                if !room {
                    change(PhysicalChange::Unfollowed { size: 0 });
                    return;
                }
                self.mappings.insert(
                    *ptr,
                    Mapping {
                        size: *size,
                        handle: *handle,
                    },
                );
                if let Some(b) = self.blocks.get_mut(handle) {
                    b.maps = b.maps.saturating_add(1);
                }
            }
            (
                CudaOp::CuMemUnmap,
                CudaArgs::AddressRange {
                    ptr: Some(ptr),
                    size,
                    ..
                },
            ) => self.unmap(*ptr, *size, change),
            _ => {}
        }
    }

    /// Follows `block`, in the place of a block under the same handle whose end was missed.
    fn replace(
        &mut self,
        block: PhysicalBlock,
        room: bool,
        change: &mut impl FnMut(PhysicalChange),
    ) {
        if let Some(old) = self.blocks.remove(&block.handle) {
            if !old.imported {
                change(PhysicalChange::Freed(old));
            }
        }
        if !room {
            if !block.imported {
                change(PhysicalChange::Unfollowed { size: block.size });
            }
            return;
        }
        self.blocks.insert(block.handle, block);
        if !block.imported {
            change(PhysicalChange::Created(block));
        }
    }

    /// Unmaps every mapping that starts in `[ptr, ptr + size)`.
    fn unmap(&mut self, ptr: u64, size: u64, change: &mut impl FnMut(PhysicalChange)) {
        let end = ptr.saturating_add(size.max(1));
        let starts: Vec<u64> = self.mappings.range(ptr..end).map(|(s, _)| *s).collect();
        for start in starts {
            let Some(m) = self.mappings.remove(&start) else {
                continue;
            };
            if let Some(b) = self.blocks.get_mut(&m.handle) {
                b.maps = b.maps.saturating_sub(1);
                self.settle(m.handle, change);
            }
        }
    }

    /// Lets a block go once nothing references or maps it.
    fn settle(&mut self, handle: u64, change: &mut impl FnMut(PhysicalChange)) {
        let done = self
            .blocks
            .get(&handle)
            .is_some_and(|b| b.refs == 0 && b.maps == 0);
        if !done {
            return;
        }
        if let Some(b) = self.blocks.remove(&handle) {
            // The mappings of a block always go before it (maps == 0), so none is left.
            if !b.imported {
                change(PhysicalChange::Freed(b));
            }
        }
    }
}

#[cfg(test)]
#[path = "physical_tests.rs"]
mod tests;
