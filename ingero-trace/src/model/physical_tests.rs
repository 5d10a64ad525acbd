//! The handle life cycles of real users, replayed through [`PhysicalMemory`]: when the memory
//! is held and when it goes back, in each order the API allows.

use super::*;
use crate::model::MemLocation;

const MIB: u64 = 1 << 20;

/// A process's calls, made one at a time.
struct Run {
    mem: PhysicalMemory,
    room: bool,
    ts: u64,
}

impl Run {
    fn new() -> Run {
        Run {
            mem: PhysicalMemory::default(),
            room: true,
            ts: 0,
        }
    }

    fn call(&mut self, op: CudaOp, args: CudaArgs) -> Vec<PhysicalChange> {
        self.ts += 10;
        self.mem.apply(op, &args, self.ts, self.room)
    }

    fn create(&mut self, handle: u64, size: u64, location: MemLocation) -> Vec<PhysicalChange> {
        self.call(
            CudaOp::CuMemCreate,
            CudaArgs::PhysicalCreate {
                size,
                handle: Some(handle),
                location,
            },
        )
    }

    fn handle_call(&mut self, op: CudaOp, handle: u64) -> Vec<PhysicalChange> {
        self.call(
            op,
            CudaArgs::PhysicalHandle {
                handle: Some(handle),
                ptr: None,
            },
        )
    }

    fn release(&mut self, handle: u64) -> Vec<PhysicalChange> {
        self.handle_call(CudaOp::CuMemRelease, handle)
    }

    fn map(&mut self, ptr: u64, size: u64, handle: u64) -> Vec<PhysicalChange> {
        self.call(
            CudaOp::CuMemMap,
            CudaArgs::AddressRange {
                ptr: Some(ptr),
                size,
                handle: Some(handle),
            },
        )
    }

    fn unmap(&mut self, ptr: u64, size: u64) -> Vec<PhysicalChange> {
        self.call(
            CudaOp::CuMemUnmap,
            CudaArgs::AddressRange {
                ptr: Some(ptr),
                size,
                handle: None,
            },
        )
    }

    fn held(&self) -> u64 {
        self.mem.held().map(|b| b.size).sum()
    }
}

fn freed(changes: &[PhysicalChange]) -> Vec<u64> {
    changes
        .iter()
        .filter_map(|c| match c {
            PhysicalChange::Freed(b) => Some(b.handle),
            _ => None,
        })
        .collect()
}

#[test]
fn pytorch_expandable_segments_hold_each_segment_until_it_is_unmapped_and_released() {
    // c10's ExpandableSegment: create and map a segment at a time, unmap then release.
    let mut r = Run::new();
    let va = 0x7f00_0000_0000;
    for (i, h) in [0xa1, 0xa2].into_iter().enumerate() {
        let created = r.create(h, 20 * MIB, MemLocation::Device(0));
        assert!(matches!(
            created[..],
            [PhysicalChange::Created(PhysicalBlock { kind: MemKind::Vmm, size, .. })] if size == 20 * MIB
        ));
        assert!(r.map(va + i as u64 * 20 * MIB, 20 * MIB, h).is_empty());
    }
    assert_eq!(r.held(), 40 * MIB);
    assert!(
        r.unmap(va + 20 * MIB, 20 * MIB).is_empty(),
        "still referenced"
    );
    assert_eq!(freed(&r.release(0xa2)), [0xa2]);
    assert_eq!(r.held(), 20 * MIB);
    assert_eq!(r.mem.followed(), 2, "one block and its mapping");
}

#[test]
fn a_handle_released_right_after_mapping_holds_its_memory_until_the_unmap() {
    // CUDA's samples: create, map, release at once; the unmap frees.
    let mut r = Run::new();
    r.create(0xb1, 2 * MIB, MemLocation::Device(1));
    r.map(0x1000_0000, 2 * MIB, 0xb1);
    assert!(r.release(0xb1).is_empty(), "mapped: still held");
    assert_eq!(r.held(), 2 * MIB);
    assert_eq!(freed(&r.unmap(0x1000_0000, 2 * MIB)), [0xb1]);
    assert_eq!(r.held(), 0);
    assert_eq!(r.mem.followed(), 0);
}

#[test]
fn nccl_retains_the_handle_from_the_address_and_releases_it_twice() {
    // ncclCuMemFree: retain from the address, release, unmap, release.
    let mut r = Run::new();
    r.create(0xc1, 4 * MIB, MemLocation::Device(0));
    r.map(0x2000_0000, 4 * MIB, 0xc1);
    r.handle_call(CudaOp::CuMemRetainAllocationHandle, 0xc1);
    assert!(r.release(0xc1).is_empty());
    assert!(
        r.unmap(0x2000_0000, 4 * MIB).is_empty(),
        "one reference left"
    );
    assert_eq!(freed(&r.release(0xc1)), [0xc1]);
    assert_eq!(r.held(), 0);
}

#[test]
fn one_unmap_ends_every_mapping_in_its_range_and_only_those() {
    let mut r = Run::new();
    r.create(0xd1, MIB, MemLocation::Device(0));
    r.create(0xd2, MIB, MemLocation::Device(0));
    r.create(0xd3, MIB, MemLocation::Device(0));
    for (i, h) in [0xd1, 0xd2, 0xd3].into_iter().enumerate() {
        r.map(0x3000_0000 + i as u64 * MIB, MIB, h);
        r.release(h);
    }
    assert_eq!(freed(&r.unmap(0x3000_0000, 2 * MIB)), [0xd1, 0xd2]);
    assert_eq!(r.held(), MIB);
}

#[test]
fn host_memory_is_pinned_and_imported_memory_is_never_this_processes() {
    let mut r = Run::new();
    let c = r.create(0xe1, MIB, MemLocation::HostNuma(1));
    assert!(matches!(
        c[..],
        [PhysicalChange::Created(PhysicalBlock {
            kind: MemKind::Pinned,
            ..
        })]
    ));
    let imported = r.handle_call(CudaOp::CuMemImportFromShareableHandle, 0xe2);
    assert!(
        imported.is_empty(),
        "another process's memory: {imported:?}"
    );
    r.map(0x4000_0000, 8 * MIB, 0xe2);
    assert_eq!(r.held(), MIB, "the import holds nothing here");
    assert!(r.release(0xe2).is_empty());
    assert!(r.unmap(0x4000_0000, 8 * MIB).is_empty());
    assert_eq!(r.mem.followed(), 1, "the import is forgotten");
    assert_eq!(
        r.release(0xe9),
        [PhysicalChange::UnknownRelease],
        "a handle never seen"
    );
}

#[test]
fn past_the_bound_memory_is_counted_as_unfollowed_and_a_reused_handle_ends_the_old_block() {
    let mut r = Run::new();
    r.create(0xf1, MIB, MemLocation::Device(0));
    let again = r.create(0xf1, 3 * MIB, MemLocation::Device(0));
    assert_eq!(freed(&again), [0xf1], "the missed end of the first");
    assert_eq!(r.held(), 3 * MIB);
    r.room = false;
    assert_eq!(
        r.create(0xf2, 5 * MIB, MemLocation::Device(0)),
        [PhysicalChange::Unfollowed { size: 5 * MIB }]
    );
    assert_eq!(
        r.map(0x5000_0000, 3 * MIB, 0xf1),
        [PhysicalChange::Unfollowed { size: 0 }]
    );
    // The mapping was not followed, so the release lets the block go.
    assert_eq!(freed(&r.release(0xf1)), [0xf1]);
    assert_eq!(r.held(), 0);
}

#[test]
fn a_mapping_of_memory_created_before_tracing_began_is_not_followed() {
    let mut r = Run::new();
    assert!(r.map(0x6000_0000, MIB, 0x99).is_empty());
    assert!(r.unmap(0x6000_0000, MIB).is_empty());
    assert_eq!(r.mem.followed(), 0);
}
