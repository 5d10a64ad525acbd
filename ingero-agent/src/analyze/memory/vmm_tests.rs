//! The memory replay of CUDA's virtual memory management calls: `cuMemCreate` memory is held
//! from its creation until its handle is released and its mappings unmapped, beside the
//! `cudaMalloc` memory of the same process, within the live bound, and released by an exit.

use ingero_ebpf::CudaOp;
use ingero_trace::model::{CudaArgs, MemKind, MemLocation, ReadRecord};

use super::replay::Limits;
use super::tests::{MIB, alloc, call, exit, proc, replay};

fn create(pid: u32, ts: u64, handle: u64, size: u64, location: MemLocation) -> ReadRecord {
    let args = CudaArgs::PhysicalCreate {
        size,
        handle: Some(handle),
        location,
    };
    call(pid, ts, CudaOp::CuMemCreate, 0, args)
}

fn map(pid: u32, ts: u64, ptr: u64, size: u64, handle: u64) -> ReadRecord {
    let args = CudaArgs::AddressRange {
        ptr: Some(ptr),
        size,
        handle: Some(handle),
    };
    call(pid, ts, CudaOp::CuMemMap, 0, args)
}

fn unmap(pid: u32, ts: u64, ptr: u64, size: u64) -> ReadRecord {
    let args = CudaArgs::AddressRange {
        ptr: Some(ptr),
        size,
        handle: None,
    };
    call(pid, ts, CudaOp::CuMemUnmap, 0, args)
}

fn release(pid: u32, ts: u64, handle: u64) -> ReadRecord {
    let args = CudaArgs::PhysicalHandle {
        handle: Some(handle),
        ptr: None,
    };
    call(pid, ts, CudaOp::CuMemRelease, 0, args)
}

const VA: u64 = 0x7f40_0000_0000;

#[test]
fn expandable_segments_are_held_from_create_to_the_last_of_release_and_unmap() {
    let recs = [
        alloc(1, 100, CudaOp::Malloc, 8 * MIB, 0xa0),
        // A reservation holds nothing.
        call(
            1,
            110,
            CudaOp::CuMemAddressReserve,
            0,
            CudaArgs::AddressRange {
                ptr: Some(VA),
                size: 1 << 30,
                handle: None,
            },
        ),
        create(1, 200, 0x51, 20 * MIB, MemLocation::Device(0)),
        map(1, 210, VA, 20 * MIB, 0x51),
        create(1, 300, 0x52, 20 * MIB, MemLocation::Device(0)),
        map(1, 310, VA + 20 * MIB, 20 * MIB, 0x52),
        // Released at once (CUDA's samples): held until the unmap at 500.
        release(1, 320, 0x52),
        // Pinned host memory by handle, and a creation that failed.
        create(1, 330, 0x53, 2 * MIB, MemLocation::Host),
        call(
            1,
            340,
            CudaOp::CuMemCreate,
            2,
            CudaArgs::PhysicalCreate {
                size: 1 << 40,
                handle: None,
                location: MemLocation::Device(0),
            },
        ),
        unmap(1, 500, VA + 20 * MIB, 20 * MIB),
        // Unmapped, still referenced until 610.
        unmap(1, 600, VA, 20 * MIB),
        release(1, 610, 0x51),
        create(1, 700, 0x54, 60 * MIB, MemLocation::Device(0)),
        map(1, 710, VA, 60 * MIB, 0x54),
        release(1, 720, 0x99),
    ];
    let r = replay((0, 650), Limits::default(), &recs);
    let p = proc(&r, 1);
    let vmm = p.kinds[MemKind::Vmm.index()];
    assert_eq!(vmm.peak_bytes, 40 * MIB);
    assert_eq!(vmm.peak_ns, Some(300));
    assert_eq!(vmm.held_bytes, 0, "both segments went back by 610");
    assert_eq!((vmm.allocations, vmm.frees), (2, 2));
    assert_eq!(p.gpu.peak_bytes, 48 * MIB, "with the cudaMalloc");
    assert_eq!(p.gpu.held_bytes, 8 * MIB);
    assert_eq!(p.kinds[MemKind::Pinned.index()].held_bytes, 2 * MIB);
    assert_eq!(p.unfollowed.failed_allocations, 1);
    assert_eq!(p.unfollowed.unknown_frees, 0);

    // Later: the third segment is the largest live block, named by its handle; the release
    // of a handle never created is an unknown free.
    let r = replay((0, 1_000), Limits::default(), &recs);
    let p = proc(&r, 1);
    assert_eq!(p.kinds[MemKind::Vmm.index()].held_bytes, 60 * MIB);
    assert_eq!(p.gpu.held_bytes, 68 * MIB);
    assert_eq!(p.largest[0].ptr, 0x54);
    assert_eq!(p.largest[0].op, CudaOp::CuMemCreate);
    assert_eq!(p.largest[0].kind, MemKind::Vmm);
    assert_eq!(p.unfollowed.unknown_frees, 1);
}

#[test]
fn handles_and_mappings_count_against_the_live_bound_and_an_exit_returns_them() {
    let limits = Limits {
        live: 3,
        ..Limits::default()
    };
    let recs = [
        // Two live entries for the block (its handle and its live row), one for the mapping.
        create(1, 100, 0x61, MIB, MemLocation::Device(0)),
        map(1, 110, VA, MIB, 0x61),
        // Full: not followed, said.
        create(1, 120, 0x62, 4 * MIB, MemLocation::Device(0)),
        exit(1, 200),
        // The exit gave the bound back: process 2 is followed.
        create(2, 300, 0x71, 2 * MIB, MemLocation::Device(1)),
    ];
    let r = replay((0, 1_000), limits, &recs);
    let p1 = proc(&r, 1);
    assert_eq!(p1.unfollowed.untracked_allocations, 1);
    assert_eq!(p1.unfollowed.untracked_bytes, 4 * MIB);
    assert_eq!(p1.exited.as_ref().map(|e| e.gpu_held_bytes), Some(MIB));
    assert_eq!(r.over_limit, 1);
    assert_eq!(proc(&r, 2).gpu.held_bytes, 2 * MIB);
}
