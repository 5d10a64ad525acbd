//! Tests of the argument model: the recorded text forms and which calls count for memory.

use super::*;

#[test]
fn memcpy_kinds_round_trip_through_their_recorded_text() {
    for raw in [0, 1, 2, 3, 4, 5, 17, u64::MAX] {
        let k = MemcpyKind::from_raw(raw);
        assert_eq!(MemcpyKind::from_text(&k.text()), k, "{raw}");
    }
    assert_eq!(MemcpyKind::from_text(""), MemcpyKind::Unknown(0));
    assert_eq!(MemcpyKind::from_text("sideways"), MemcpyKind::Unknown(0));
}

#[test]
fn memory_locations_round_trip_through_their_recorded_text() {
    for (kind, id) in [
        (1, 0),
        (1, 7),
        (2, 0),
        (3, 1),
        (4, 0),
        (5, -1),
        (0, 0),
        (99, 3),
    ] {
        let l = MemLocation::from_raw(kind, id);
        assert_eq!(MemLocation::from_text(&l.text()), l, "{kind} {id}");
    }
    assert_eq!(MemLocation::from_raw(1, 2).text(), "device:2");
    assert_eq!(MemLocation::from_text("device:x"), MemLocation::Unknown(0));
    assert_eq!(MemLocation::from_text(""), MemLocation::Unknown(0));
    assert_eq!(
        MemKind::of_location(MemLocation::HostNuma(0)),
        MemKind::Pinned
    );
    assert_eq!(MemKind::of_location(MemLocation::Device(0)), MemKind::Vmm);
    for (i, k) in MemKind::ALL.iter().enumerate() {
        assert_eq!(k.index(), i);
        assert_eq!(k.is_gpu(), *k != MemKind::Pinned);
    }
}

#[test]
fn the_virtual_memory_calls_are_memory_calls() {
    use CudaOp::*;
    for op in [
        CuMemCreate,
        CuMemRelease,
        CuMemMap,
        CuMemUnmap,
        CuMemRetainAllocationHandle,
        CuMemImportFromShareableHandle,
        CuMemAddressReserve,
        CuMemAddressFree,
        CuMemSetAccess,
    ] {
        assert!(ArgsShape::of(op).is_memory(), "{op:?}");
        assert!(!counts_for_memory(Some(op)), "a call inside {op:?}");
    }
}

#[test]
fn registered_host_memory_is_no_allocation_but_owns_its_nested_driver_call() {
    use CudaOp::*;
    for op in [
        HostRegister,
        HostUnregister,
        CuMemHostRegister,
        CuMemHostUnregister,
    ] {
        let shape = ArgsShape::of(op);
        assert!(shape.is_host_registration(), "{op:?}");
        assert!(!shape.is_memory(), "{op:?} allocates and frees nothing");
        assert_eq!(MemKind::of_alloc(op), None, "{op:?}");
        assert!(!counts_for_memory(Some(op)), "inside {op:?}");
    }
    assert_eq!(
        ArgsShape::of(HostRegister),
        ArgsShape::of(CuMemHostRegister)
    );
    assert_eq!(
        ArgsShape::of(HostUnregister),
        ArgsShape::of(CuMemHostUnregister)
    );
    assert!(counts_for_memory(None));
    assert!(counts_for_memory(Some(LaunchKernel)));
    assert!(!counts_for_memory(Some(Malloc)));
}

#[test]
fn the_collective_shape_is_the_op_tables_collectives() {
    for op in CudaOp::ALL {
        assert_eq!(
            ArgsShape::of(*op) == ArgsShape::Collective,
            op.is_collective(),
            "{op:?}"
        );
    }
}
