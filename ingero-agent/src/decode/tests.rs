//! Decoding tests: records built the way the kernel builds them.

use ingero_ebpf::{
    COMM_LEN, CudaOp, CudaRecord, FILENAME_LEN, OffCpuReason, OffCpuRecord, ProcessRecord,
    RecordHeader, RecordKind, process_flags,
};

use super::*;
use ingero_trace::model::{CudaArgs, MemLocation, MemcpyKind};

fn comm(s: &str) -> [u8; COMM_LEN] {
    let mut c = [0; COMM_LEN];
    c[..s.len()].copy_from_slice(s.as_bytes());
    c
}

fn header(kind: RecordKind, op: u16) -> RecordHeader {
    RecordHeader {
        kind: kind as u16,
        op,
        cpu: 1,
        ts_ns: 1000,
        tgid: 42,
        tid: 43,
        cgroup_id: 7,
        comm: comm("python3"),
    }
}

fn cuda(op: CudaOp, ret: i64, args: [u64; 8]) -> CudaRecord {
    CudaRecord {
        header: header(RecordKind::Cuda, op as u16),
        duration_ns: 500,
        ret,
        args,
        out: 0,
        parent_op: 0,
        variant: 0,
        depth: 0,
    }
}

#[test]
fn decodes_a_launch_with_packed_dim3() {
    let grid_xy = 16 | (4 << 32);
    let block_xy = 32 | (8 << 32);
    let rec = cuda(
        CudaOp::LaunchKernel,
        35,
        [0x1234, grid_xy, 1, block_xy, 1, 0, 1024, 0xabcd],
    );
    let Event::Cuda(call) = decode(record_bytes(&rec)).expect("decode") else {
        panic!("not a CUDA call")
    };
    assert_eq!(call.op, CudaOp::LaunchKernel);
    assert_eq!(call.ret, 35);
    assert_eq!(call.task.pid, 42);
    assert_eq!(call.task.tid, 43);
    assert_eq!(call.task.comm.as_str(), "python3");
    assert_eq!(
        call.args,
        CudaArgs::Launch {
            func: 0x1234,
            grid: [16, 4, 1],
            block: [32, 8, 1],
            shared_mem: 1024,
            stream: 0xabcd
        }
    );
}

#[test]
fn allocation_pointer_only_on_success_and_free_size_when_known() {
    let ok = cuda(
        CudaOp::Malloc,
        0,
        [0x7ff0, 4096, 0, 0, 0, 0, 0xd000_0000, 0],
    );
    let Event::Cuda(call) = decode(record_bytes(&ok)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        call.args,
        CudaArgs::Alloc {
            size: 4096,
            ptr: Some(0xd000_0000),
            stream: None
        }
    );
    let failed = cuda(CudaOp::Malloc, 2, [0x7ff0, 4096, 0, 0, 0, 0, 0, 0]);
    let Event::Cuda(call) = decode(record_bytes(&failed)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        call.args,
        CudaArgs::Alloc {
            size: 4096,
            ptr: None,
            stream: None
        }
    );
    let free = cuda(
        CudaOp::FreeAsync,
        0,
        [0xd000_0000, 0x55, 0, 0, 0, 0, 4096, 0],
    );
    let Event::Cuda(call) = decode(record_bytes(&free)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        call.args,
        CudaArgs::Free {
            ptr: 0xd000_0000,
            size: Some(4096),
            stream: Some(0x55)
        }
    );
}

#[test]
fn memcpy_variants_name_their_arguments() {
    let m = cuda(CudaOp::MemcpyAsync, 0, [1, 2, 4096, 2, 0x77, 0, 0, 0]);
    let Event::Cuda(call) = decode(record_bytes(&m)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        call.args,
        CudaArgs::Memcpy {
            count: 4096,
            kind: MemcpyKind::DeviceToHost,
            stream: Some(0x77),
            width_height: None,
            host_ptr: Some(1)
        }
    );
    let m2 = cuda(CudaOp::Memcpy2D, 0, [1, 512, 2, 512, 256, 10, 3, 0]);
    let Event::Cuda(call) = decode(record_bytes(&m2)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        call.args,
        CudaArgs::Memcpy {
            count: 2560,
            kind: MemcpyKind::DeviceToDevice,
            stream: None,
            width_height: Some((256, 10)),
            host_ptr: None
        }
    );
    let peer = cuda(CudaOp::MemcpyPeerAsync, 0, [1, 1, 2, 0, 8192, 0x9, 0, 0]);
    let Event::Cuda(call) = decode(record_bytes(&peer)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        call.args,
        CudaArgs::MemcpyPeer {
            count: 8192,
            dst_device: 1,
            src_device: 0,
            stream: Some(0x9)
        }
    );
}

/// The arguments `op` decodes to from `args`, as the export `variant` (0: its first symbol).
fn args_of(op: CudaOp, variant: u16, args: [u64; 8]) -> CudaArgs {
    let mut rec = cuda(op, 3, args);
    rec.variant = variant;
    decoded_args(&rec)
}

/// The arguments `rec` decodes to.
fn decoded_args(rec: &CudaRecord) -> CudaArgs {
    let Ok(Event::Cuda(call)) = decode(record_bytes(rec)) else {
        panic!("{:?}: not a CUDA call", rec.header)
    };
    call.args
}

/// The host pointer a copy decodes to.
fn host_ptr(op: CudaOp, variant: u16, args: [u64; 8]) -> Option<u64> {
    match args_of(op, variant, args) {
        CudaArgs::Memcpy { host_ptr, .. } => host_ptr,
        other => panic!("{op:?}: not a copy: {other:?}"),
    }
}

#[test]
fn every_copy_form_names_its_host_side_pointer_when_it_has_one() {
    use CudaOp::*;
    let (dst, src, host, dev) = (0xd5_0000u64, 0x5c0_0000u64, 0x7f00_1000u64, 0xd000_0000u64);
    // The runtime's 1D forms: (dst, src, count, kind[, stream]).
    for op in [Memcpy, MemcpyAsync] {
        let with_kind = |kind| host_ptr(op, 0, [dst, src, 64, kind, 0x9, 0, 0, 0]);
        assert_eq!(with_kind(1), Some(src), "{op:?} H2D: the source");
        assert_eq!(with_kind(2), Some(dst), "{op:?} D2H: the destination");
        for kind in [0, 3, 4, 7] {
            assert_eq!(
                with_kind(kind),
                None,
                "{op:?} kind {kind}: no host side known"
            );
        }
    }
    // The runtime's 2D forms: (dst, dpitch, src, spitch, width, height, kind[, stream]).
    for op in [Memcpy2D, Memcpy2DAsync] {
        let with_kind = |kind| host_ptr(op, 0, [dst, 512, src, 256, 256, 4, kind, 0x9]);
        assert_eq!(with_kind(1), Some(src), "{op:?} H2D: the source");
        assert_eq!(with_kind(2), Some(dst), "{op:?} D2H: the destination");
        assert_eq!(with_kind(4), None, "{op:?} Default");
    }
    // The driver's: HtoD (dstDevice, srcHost, …), DtoH (dstHost, srcDevice, …), from every
    // export, the legacy 32-bit one included (a host pointer is 64 bits wide there too).
    for op in [CuMemcpyHtoD, CuMemcpyHtoDAsync] {
        for variant in 0..3 {
            let a = [dev, host, 64, 0x9, 0, 0, 0, 0];
            assert_eq!(host_ptr(op, variant, a), Some(host), "{op:?} {variant}");
        }
    }
    for op in [CuMemcpyDtoH, CuMemcpyDtoHAsync] {
        for variant in 0..3 {
            let a = [host, dev, 64, 0x9, 0, 0, 0, 0];
            assert_eq!(host_ptr(op, variant, a), Some(host), "{op:?} {variant}");
        }
    }
    // Arrays: AtoH (dstHost, srcArray, offset, count[, stream]), HtoA (dstArray, offset,
    // srcHost, count[, stream]).
    for op in [CuMemcpyAtoH, CuMemcpyAtoHAsync] {
        assert_eq!(
            host_ptr(op, 0, [host, 0xa, 0, 64, 0x9, 0, 0, 0]),
            Some(host)
        );
    }
    for op in [CuMemcpyHtoA, CuMemcpyHtoAAsync] {
        assert_eq!(
            host_ptr(op, 0, [0xa, 0, host, 64, 0x9, 0, 0, 0]),
            Some(host)
        );
    }
    // No host side, or no pointer read: unified copies, device-to-device, peers, descriptors.
    for op in [
        CuMemcpy,
        CuMemcpyAsync,
        CuMemcpyDtoD,
        CuMemcpyDtoDAsync,
        CuMemcpyPeer,
        CuMemcpyAtoA,
        CuMemcpyAtoD,
        CuMemcpyDtoA,
    ] {
        assert_eq!(
            host_ptr(op, 0, [host, host, 64, 0, 0, 0, 0, 0]),
            None,
            "{op:?}"
        );
    }
    let host_to_device = 1 | (2 << 32);
    for op in [CuMemcpy2D, CuMemcpy2DAsync, CuMemcpy3D, CuMemcpy3DAsync] {
        let a = [host, 0x9, 0, 1, 64, 2, host_to_device, 0];
        assert_eq!(
            host_ptr(op, 0, a),
            None,
            "{op:?}: the descriptor's pointers are not read"
        );
    }
}

#[test]
fn host_registrations_name_their_range_and_flags() {
    // (ptr, size, flags): the flags' upper half is not the caller's (an `unsigned` in rdx).
    let a = [0x7f00_1000, 3 << 20, 0xdead_0000_0000_0002, 0, 0, 0, 0, 0];
    let want = CudaArgs::HostRegister {
        ptr: 0x7f00_1000,
        size: 3 << 20,
        flags: 2,
    };
    assert_eq!(args_of(CudaOp::HostRegister, 0, a), want);
    // Both driver exports, `_v2` and the unsuffixed one, share the signature: nothing masked.
    for variant in [0, 1] {
        let mut rec = cuda(CudaOp::CuMemHostRegister, 3, a);
        rec.variant = variant;
        let Ok(Event::Cuda(call)) = decode(record_bytes(&rec)) else {
            panic!("a CUDA call")
        };
        assert_eq!(call.args, want);
        // The unsuffixed export is the op's own name: no `symbol`, as for any current one.
        assert_eq!(
            call.detail.symbol,
            [Some("cuMemHostRegister_v2"), None][variant as usize]
        );
    }
    for op in [CudaOp::HostUnregister, CudaOp::CuMemHostUnregister] {
        assert_eq!(
            args_of(op, 0, [0x7f00_1000, 0, 0, 0, 0, 0, 0, 0]),
            CudaArgs::HostUnregister { ptr: 0x7f00_1000 }
        );
    }
}

#[test]
fn decodes_off_cpu_and_lifecycle() {
    let off = OffCpuRecord {
        header: header(RecordKind::OffCpu, 0),
        duration_ns: 9,
        prev_state: 0x100,
        reason: OffCpuReason::Preempted as u32,
        next_tid: 77,
        next_comm: comm("hog"),
    };
    let Event::OffCpu(o) = decode(record_bytes(&off)).expect("decode") else {
        panic!()
    };
    assert_eq!(o.reason, OffCpuReason::Preempted);
    assert_eq!(o.next_comm.as_str(), "hog");

    let mut filename = [0u8; FILENAME_LEN];
    filename[..9].copy_from_slice(b"/bin/true");
    let exec = ProcessRecord {
        header: header(RecordKind::Exec, 0),
        other_pid: 42,
        flags: 0,
        clone_flags: 0,
        filename,
    };
    let Event::Process(p) = decode(record_bytes(&exec)).expect("decode") else {
        panic!()
    };
    assert_eq!((p.op, p.text.as_str()), (ProcessOp::Exec, "/bin/true"));

    let thread = ProcessRecord {
        header: header(RecordKind::Fork, 0),
        flags: process_flags::THREAD,
        ..exec
    };
    let Event::Process(p) = decode(record_bytes(&thread)).expect("decode") else {
        panic!()
    };
    assert_eq!(p.op, ProcessOp::ThreadStart);
    let exit = ProcessRecord {
        header: header(RecordKind::Exit, 0),
        flags: 0,
        ..exec
    };
    let Event::Process(p) = decode(record_bytes(&exit)).expect("decode") else {
        panic!()
    };
    assert_eq!(
        p.op,
        ProcessOp::ThreadExit,
        "an exit without group_dead is a thread's"
    );
}

#[test]
fn bad_records_are_errors_not_panics() {
    assert_eq!(decode(&[0u8; 10]), Err(DecodeError::Short(10)));
    let mut unknown = cuda(CudaOp::Malloc, 0, [0; 8]);
    unknown.header.kind = 99;
    assert_eq!(
        decode(record_bytes(&unknown)),
        Err(DecodeError::UnknownKind(99))
    );
    let rec = cuda(CudaOp::Malloc, 0, [0; 8]);
    let bytes = record_bytes(&rec);
    assert!(matches!(
        decode(&bytes[..60]),
        Err(DecodeError::WrongSize { .. })
    ));
    let mut bad_op = rec;
    bad_op.header.op = 999;
    assert_eq!(
        decode(record_bytes(&bad_op)),
        Err(DecodeError::UnknownOp(999))
    );
}

#[test]
fn a_nested_driver_call_names_its_parent_and_export() {
    let mut rec = cuda(CudaOp::CuMemAlloc, 0, [0x7ff0, 4096, 0, 0, 0, 0, 0xd000, 0]);
    rec.parent_op = CudaOp::Malloc as u16;
    rec.variant = 0;
    rec.depth = 1;
    let Ok(Event::Cuda(c)) = decode(record_bytes(&rec)) else {
        panic!("a CUDA call");
    };
    assert_eq!(c.detail.parent, Some(CudaOp::Malloc));
    assert_eq!(c.detail.symbol, Some("cuMemAlloc_v2"));
    assert_eq!(
        c.args,
        CudaArgs::Alloc {
            size: 4096,
            ptr: Some(0xd000),
            stream: None
        }
    );
    // The legacy export (32-bit ABI) reports no pointer and masks the size.
    rec.variant = 1;
    rec.parent_op = 0;
    rec.args[1] = 0xdead_0000_0000_1000;
    let Ok(Event::Cuda(c)) = decode(record_bytes(&rec)) else {
        panic!("a CUDA call");
    };
    assert_eq!(c.detail.symbol, Some("cuMemAlloc"));
    assert_eq!(c.detail.parent, None);
    assert_eq!(
        c.args,
        CudaArgs::Alloc {
            size: 0x1000,
            ptr: None,
            stream: None
        }
    );
}

#[test]
fn a_name_record_decodes_to_its_text_or_alias() {
    use ingero_ebpf::{NAME_LEN, NameRecord, name_flags};
    let mut name = [0u8; NAME_LEN];
    name[..6].copy_from_slice(b"_Z1fv\0");
    let mut rec = NameRecord {
        header: header(RecordKind::KernelName, CudaOp::RegisterFunction as u16),
        handle: 0x4000,
        other: 0x7000,
        len: 5,
        flags: 0,
        name,
    };
    let fact = decode_name(record_bytes(&rec)).expect("decodes");
    assert_eq!(fact.handle, 0x4000);
    assert_eq!(
        fact.what,
        NameWhat::Text {
            bytes: b"_Z1fv".to_vec(),
            addr: 0x7000,
            truncated: false
        }
    );
    rec.flags = name_flags::ALIAS;
    let fact = decode_name(record_bytes(&rec)).expect("decodes");
    assert_eq!(fact.what, NameWhat::Alias(0x7000));
    assert!(decode_name(&record_bytes(&rec)[..40]).is_err());
}

#[test]
fn an_nvtx_probe_record_decodes_its_ascii_or_wide_message() {
    use ingero_ebpf::{NVTX_MESSAGE_LEN, NvtxCall, NvtxProbeRecord, nvtx_flags};
    let mut message = [0u8; NVTX_MESSAGE_LEN];
    message[..6].copy_from_slice(b"outer\0");
    let mut rec = NvtxProbeRecord {
        header: header(RecordKind::NvtxProbe, NvtxCall::RangePushA as u16),
        sp: 0x7ff0,
        len: 5,
        flags: 0,
        message,
    };
    assert_eq!(kind_of(record_bytes(&rec)), Some(RecordKind::NvtxProbe));
    let c = decode_nvtx_probe(record_bytes(&rec)).expect("decodes");
    assert_eq!(
        (
            c.call,
            c.pid,
            c.tid,
            c.ts_ns,
            c.comm.as_str(),
            c.message.as_str()
        ),
        (NvtxCall::RangePushA, 42, 43, 1000, "python3", "outer")
    );
    assert!(!c.truncated);

    // UTF-32: "é!" then NUL, the rest of the buffer garbage.
    let mut wide = [0xffu8; NVTX_MESSAGE_LEN];
    for (i, ch) in ['é', '!', '\0'].iter().enumerate() {
        wide[i * 4..i * 4 + 4].copy_from_slice(&(*ch as u32).to_le_bytes());
    }
    rec.message = wide;
    rec.len = NVTX_MESSAGE_LEN as u32;
    rec.flags = nvtx_flags::WIDE;
    let c = decode_nvtx_probe(record_bytes(&rec)).expect("decodes");
    assert_eq!(c.message, "é!");
    assert!(!c.truncated);
    // A full buffer with no NUL unit goes on past it.
    rec.message = [0x41; NVTX_MESSAGE_LEN];
    let c = decode_nvtx_probe(record_bytes(&rec)).expect("decodes");
    assert!(c.truncated);
    assert_eq!(c.message.chars().count(), NVTX_MESSAGE_LEN / 4);

    rec.header.op = 999;
    assert_eq!(
        decode_nvtx_probe(record_bytes(&rec)),
        Err(DecodeError::UnknownOp(999))
    );
    assert!(decode_nvtx_probe(&record_bytes(&rec)[..60]).is_err());
    // The event decoder leaves it to the fallback.
    assert!(decode(record_bytes(&rec)).is_err());
}

#[test]
fn a_driver_log_record_decodes_its_text() {
    use ingero_ebpf::{DRIVER_LOG_LEN, DriverLogRecord};
    let line = b"NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n";
    let mut text = [0xffu8; DRIVER_LOG_LEN];
    text[..line.len()].copy_from_slice(line);
    text[line.len()] = 0;
    let mut rec = DriverLogRecord {
        header: header(RecordKind::DriverLog, 0),
        len: line.len() as u32,
        truncated: 0,
        text,
    };
    assert_eq!(kind_of(record_bytes(&rec)), Some(RecordKind::DriverLog));
    let m = decode_driver_log(record_bytes(&rec)).expect("decodes");
    assert_eq!((m.ts_ns, m.truncated), (1000, false));
    assert_eq!(m.text, String::from_utf8_lossy(&line[..line.len() - 1]));
    assert_eq!(m.xid().map(|x| x.code), Some(79));
    // A length past the buffer is cut to it; invalid UTF-8 is replaced, not an error.
    rec.len = u32::MAX;
    rec.truncated = 1;
    rec.text = [0xc3; DRIVER_LOG_LEN];
    let m = decode_driver_log(record_bytes(&rec)).expect("decodes");
    assert!(m.truncated && m.text.starts_with('\u{fffd}'));
    assert!(decode_driver_log(&record_bytes(&rec)[..60]).is_err());
    // The event decoder leaves it to the pipeline's own path.
    assert!(decode(record_bytes(&rec)).is_err());
}

/// The arguments of a successful call of `op` that wrote `out`.
fn args_with_out(op: CudaOp, out: u64, args: [u64; 8]) -> CudaArgs {
    let mut rec = cuda(op, 0, args);
    rec.out = out;
    decoded_args(&rec)
}

#[test]
fn virtual_memory_calls_name_their_handles_ranges_and_location() {
    // cuMemCreate(handle *, size, prop *, flags): the probe put the location (type 1, device
    // 3) where the prop pointer was; the handle is what the call wrote.
    let created = args_with_out(
        CudaOp::CuMemCreate,
        0x5600_0001,
        [0x7ffc_0000, 20 << 20, 1 | (3 << 32), 0, 0, 0, 0, 0],
    );
    assert_eq!(
        created,
        CudaArgs::PhysicalCreate {
            size: 20 << 20,
            handle: Some(0x5600_0001),
            location: MemLocation::Device(3),
        }
    );
    // A failed creation wrote no handle; a negative id survives (`CU_DEVICE_INVALID`).
    assert_eq!(
        args_of(
            CudaOp::CuMemCreate,
            0,
            [0x7ffc_0000, 4096, 5 | (0xffff_ffff << 32), 0, 0, 0, 0, 0]
        ),
        CudaArgs::PhysicalCreate {
            size: 4096,
            handle: None,
            location: MemLocation::Unknown(5),
        }
    );
    assert_eq!(
        args_with_out(
            CudaOp::CuMemMap,
            0,
            [0x7f40_0000_0000, 2 << 20, 0, 0x5600_0001, 0, 0, 0, 0]
        ),
        CudaArgs::AddressRange {
            ptr: Some(0x7f40_0000_0000),
            size: 2 << 20,
            handle: Some(0x5600_0001),
        }
    );
    assert_eq!(
        args_with_out(
            CudaOp::CuMemAddressReserve,
            0x7f40_0000_0000,
            [0x7ffc_0000, 1 << 30, 0, 0, 0, 0, 0, 0]
        ),
        CudaArgs::AddressRange {
            ptr: Some(0x7f40_0000_0000),
            size: 1 << 30,
            handle: None,
        }
    );
    for op in [
        CudaOp::CuMemUnmap,
        CudaOp::CuMemAddressFree,
        CudaOp::CuMemSetAccess,
    ] {
        assert_eq!(
            args_with_out(op, 0, [0x7f40_0000_0000, 2 << 20, 0, 0, 0, 0, 0, 0]),
            CudaArgs::AddressRange {
                ptr: Some(0x7f40_0000_0000),
                size: 2 << 20,
                handle: None,
            }
        );
    }
    assert_eq!(
        args_with_out(CudaOp::CuMemRelease, 0, [0x5600_0001, 0, 0, 0, 0, 0, 0, 0]),
        CudaArgs::PhysicalHandle {
            handle: Some(0x5600_0001),
            ptr: None,
        }
    );
    assert_eq!(
        args_with_out(
            CudaOp::CuMemRetainAllocationHandle,
            0x5600_0001,
            [0x7ffc_0000, 0x7f40_0000_1000, 0, 0, 0, 0, 0, 0]
        ),
        CudaArgs::PhysicalHandle {
            handle: Some(0x5600_0001),
            ptr: Some(0x7f40_0000_1000),
        }
    );
}

/// Garbage in the upper half of a 32-bit argument's register, as a caller may leave it.
const HIGH: u64 = 0xdead_beef_0000_0000;

#[test]
fn nccl_collectives_name_their_words_and_cut_ints_to_32_bits() {
    use ingero_trace::model::{Communicator, NcclRedOp, NcclType};
    let on = |comm: u64| Communicator {
        comm,
        ..Communicator::default()
    };
    let collective =
        |count, datatype, red_op: Option<u32>, root, comm, stream| CudaArgs::Collective {
            count,
            datatype: NcclType(datatype),
            red_op: red_op.map(NcclRedOp),
            root,
            on: on(comm),
            stream,
            seq: None,
        };
    // ncclAllReduce(send, recv, count, type, op, comm, stream on the stack).
    assert_eq!(
        args_of(
            CudaOp::NcclAllReduce,
            0,
            [0x10, 0x20, 1 << 20, HIGH | 7, HIGH | 4, 0xc0, 0x5, 0]
        ),
        collective(1 << 20, 7, Some(4), None, 0xc0, 0x5)
    );
    // ncclReduce(send, recv, count, type, op, root, comm and stream on the stack).
    assert_eq!(
        args_of(
            CudaOp::NcclReduce,
            0,
            [0x10, 0x20, 77, 9, 2, HIGH | 3, 0xc0, 0x6]
        ),
        collective(77, 9, Some(2), Some(3), 0xc0, 0x6)
    );
    // ncclBroadcast(send, recv, count, type, root, comm, stream): a root, no operator; the
    // Config export (variant 1) has the same words and one more.
    for variant in [0, 1] {
        assert_eq!(
            args_of(
                CudaOp::NcclBroadcast,
                variant,
                [0x10, 0x20, 8, 0, HIGH | 0xffff_ffff, 0xc0, 0x7, 0x99]
            ),
            collective(8, 0, None, Some(-1), 0xc0, 0x7)
        );
    }
    // ncclAllGather(send, recv, sendcount, type, comm, stream): six registers.
    assert_eq!(
        args_of(
            CudaOp::NcclAllGather,
            0,
            [0x10, 0x20, 3, 6, 0xc0, 0x8, 0, 0]
        ),
        collective(3, 6, None, None, 0xc0, 0x8)
    );
    // ncclSend(buff, count, type, peer, comm, stream).
    assert_eq!(
        args_of(CudaOp::NcclRecv, 0, [0x10, 5, 1, HIGH | 2, 0xc0, 0x9, 0, 0]),
        CudaArgs::PointToPoint {
            count: 5,
            datatype: NcclType(1),
            peer: 2,
            on: on(0xc0),
            stream: 0x9,
        }
    );
    assert_eq!(args_of(CudaOp::NcclGroupEnd, 0, [0; 8]), CudaArgs::Group);
    assert_eq!(
        args_of(CudaOp::NcclCommDestroy, 0, [0xc0, 0, 0, 0, 0, 0, 0, 0]),
        CudaArgs::CommEnd { comm: 0xc0 }
    );
}

#[test]
fn nccl_communicator_creations_name_rank_size_and_identity() {
    use ingero_trace::model::{CommSplit, Communicator, unique_id};
    let made = |args: &CudaArgs| match args {
        CudaArgs::CommCreate { made, split } => (*made, *split),
        other => panic!("not a creation: {other:?}"),
    };
    // ncclCommInitRank(comm *, nranks, id by value, rank): rank in the third register, the
    // id's first 16 bytes in the stack words.
    let words = [0x42f3_d171_b8bc_8655, 0x0202_00c0_1585_0002];
    let init = [0x7ffc, HIGH | 4, HIGH | 3, 0, 0, 0, words[0], words[1]];
    let (ok, split) = made(&args_with_out(CudaOp::NcclCommInitRank, 0xc0, init));
    assert_eq!(
        ok,
        Communicator {
            comm: 0xc0,
            id: Some(unique_id(words)),
            rank: Some(3),
            nranks: Some(4),
        }
    );
    assert_eq!(split, None);
    // The config form has the config pointer in the fourth register and the same layout.
    let config = made(&args_with_out(
        CudaOp::NcclCommInitRankConfig,
        0xc0,
        [0x7ffc, 4, 3, 0x7ffd, 0, 0, words[0], words[1]],
    ));
    assert_eq!(config.0, ok);
    // A failed creation wrote no handle; an unread id (zero words) is no identity.
    let mut failed = cuda(CudaOp::NcclCommInitRank, 1, [0x7ffc, 4, 3, 0, 0, 0, 0, 0]);
    failed.out = 0xc0;
    let (bad, _) = made(&decoded_args(&failed));
    assert_eq!((bad.comm, bad.id, bad.rank), (0, None, Some(3)));
    // ncclCommInitAll(comms *, ndev, devlist): comms[0] is rank 0 of ndev.
    let (all, _) = made(&args_with_out(
        CudaOp::NcclCommInitAll,
        0xd0,
        [0x7ffc, 8, 0x7ffe, 0, 0, 0, 0, 0],
    ));
    assert_eq!(
        (all.comm, all.rank, all.nranks, all.id),
        (0xd0, Some(0), Some(8), None)
    );
    // ncclCommSplit(comm, color, key, newcomm *, config).
    let (new, split) = made(&args_with_out(
        CudaOp::NcclCommSplit,
        0xe0,
        [0xc0, HIGH | 2, HIGH | 5, 0x7ffc, 0, 0, 0, 0],
    ));
    assert_eq!(new.comm, 0xe0);
    assert_eq!(
        split,
        Some(CommSplit {
            parent: 0xc0,
            color: 2,
            key: 5,
        })
    );
}
