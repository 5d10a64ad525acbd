//! Naming the raw argument words of each CUDA op (x86-64 System V: rdi, rsi, rdx, rcx, r8, r9,
//! then the stack) as the probes capture them. Driver launches arrive in the runtime's slot
//! layout (the eBPF side packs them), so both share one decoding.

use ingero_ebpf::{ALLOC_PTR_SLOT, CudaOp, FREE_SIZE_SLOT, MAX_ARGS};
use ingero_trace::model::{CudaArgs, MemLocation, MemcpyKind};

use super::nccl_args::nccl_args;

fn dim3(xy: u64, z: u64) -> [u32; 3] {
    [xy as u32, (xy >> 32) as u32, z as u32]
}

/// The direction of a descriptor copy from its `CUmemorytype`s (host 1, device 2, array 3,
/// unified 4), packed source low.
fn descriptor_kind(types: u64) -> MemcpyKind {
    let (src, dst) = (types as u32, (types >> 32) as u32);
    match (src, dst) {
        (1, 1) => MemcpyKind::HostToHost,
        (1, 2 | 3) => MemcpyKind::HostToDevice,
        (2 | 3, 1) => MemcpyKind::DeviceToHost,
        (2 | 3, 2 | 3) => MemcpyKind::DeviceToDevice,
        (4, _) | (_, 4) => MemcpyKind::Default,
        _ => MemcpyKind::Unknown(types),
    }
}

/// The host side of a runtime copy whose direction the caller passed: the source of a
/// host-to-device copy, the destination of a device-to-host one. `None` for the other kinds
/// (`Default` leaves the direction to the pointers, so which one is the host's is unknown).
fn host_side(kind: MemcpyKind, dst: u64, src: u64) -> Option<u64> {
    match kind {
        MemcpyKind::HostToDevice => Some(src),
        MemcpyKind::DeviceToHost => Some(dst),
        _ => None,
    }
}

/// A driver memset's element size in bytes.
fn memset_element(op: CudaOp) -> u64 {
    use CudaOp::*;
    match op {
        CuMemsetD16 | CuMemsetD16Async | CuMemsetD2D16 | CuMemsetD2D16Async => 2,
        CuMemsetD32 | CuMemsetD32Async | CuMemsetD2D32 | CuMemsetD2D32Async => 4,
        _ => 1,
    }
}

/// Names the raw argument words of `op` as the probe captured them. `out` is what the call
/// wrote through its out-pointer (0: nothing); `legacy` says the export has the old ABI
/// (32-bit sizes and pointers), whose upper halves are not the caller's.
pub fn cuda_args(op: CudaOp, a: &[u64; MAX_ARGS], ret: i32, out: u64, legacy: bool) -> CudaArgs {
    use CudaOp::*;
    let word = |v: u64| if legacy { v & 0xffff_ffff } else { v };
    let raw_out = out;
    let out = (ret == 0 && out != 0).then_some(out);
    match op {
        Malloc | MallocManaged | MallocAsync | CuMemAlloc | CuMemAllocAsync | CuMemAllocManaged => {
            CudaArgs::Alloc {
                size: word(a[1]),
                ptr: (ret == 0 && !legacy).then_some(a[ALLOC_PTR_SLOT]),
                stream: matches!(op, MallocAsync | CuMemAllocAsync).then_some(a[2]),
            }
        }
        CuMemAllocFromPoolAsync => CudaArgs::Alloc {
            size: a[1],
            ptr: (ret == 0).then_some(a[ALLOC_PTR_SLOT]),
            stream: Some(a[3]),
        },
        CuMemAllocPitch => CudaArgs::Alloc {
            // (dptr, pitch out, width in bytes, height, element size): width × height is what
            // was asked for; the pitch (the row stride the driver chose) is not read.
            size: word(a[2]).saturating_mul(word(a[3])),
            ptr: out,
            stream: None,
        },
        Free | FreeAsync | CuMemFree | CuMemFreeAsync => CudaArgs::Free {
            ptr: word(a[0]),
            size: (a[FREE_SIZE_SLOT] != 0 && !legacy).then_some(a[FREE_SIZE_SLOT]),
            stream: matches!(op, FreeAsync | CuMemFreeAsync).then_some(a[1]),
        },
        // `void **pHost` first: the probe reads the pointer the call wrote (OUT0).
        MallocHost | HostAlloc | CuMemAllocHost | CuMemHostAlloc => CudaArgs::HostAlloc {
            size: word(a[1]),
            ptr: out,
        },
        FreeHost | CuMemFreeHost => CudaArgs::HostFree { ptr: a[0] },
        // (void *ptr, size_t size, unsigned flags): the range is the caller's own memory.
        HostRegister | CuMemHostRegister => CudaArgs::HostRegister {
            ptr: a[0],
            size: a[1],
            flags: a[2] as u32,
        },
        HostUnregister | CuMemHostUnregister => CudaArgs::HostUnregister { ptr: a[0] },
        // (handle *, size, prop *, flags): the probe read the prop's location into a[2].
        CuMemCreate => CudaArgs::PhysicalCreate {
            size: a[1],
            handle: out,
            location: MemLocation::from_raw(a[2] as u32, (a[2] >> 32) as u32 as i32),
        },
        CuMemRelease => CudaArgs::PhysicalHandle {
            handle: Some(a[0]),
            ptr: None,
        },
        // (handle *, addr).
        CuMemRetainAllocationHandle => CudaArgs::PhysicalHandle {
            handle: out,
            ptr: Some(a[1]),
        },
        // (handle *, os handle, handle type).
        CuMemImportFromShareableHandle => CudaArgs::PhysicalHandle {
            handle: out,
            ptr: None,
        },
        // (ptr, size, offset, handle, flags).
        CuMemMap => CudaArgs::AddressRange {
            ptr: Some(a[0]),
            size: a[1],
            handle: Some(a[3]),
        },
        // (ptr *, size, alignment, addr, flags).
        CuMemAddressReserve => CudaArgs::AddressRange {
            ptr: out,
            size: a[1],
            handle: None,
        },
        // (ptr, size[, access descriptors, count]).
        CuMemUnmap | CuMemAddressFree | CuMemSetAccess => CudaArgs::AddressRange {
            ptr: Some(a[0]),
            size: a[1],
            handle: None,
        },
        LaunchKernel
        | LaunchCooperativeKernel
        | LaunchKernelExC
        | CuLaunchKernel
        | CuLaunchKernelEx
        | CuLaunchCooperativeKernel => CudaArgs::Launch {
            func: a[0],
            grid: dim3(a[1], a[2]),
            block: dim3(a[3], a[4]),
            shared_mem: a[6],
            stream: a[7],
        },
        GraphLaunch | CuGraphLaunch => CudaArgs::GraphLaunch {
            graph_exec: a[0],
            stream: a[1],
            captured: None,
        },
        StreamBeginCapture | CuStreamBeginCapture => CudaArgs::CaptureBegin {
            stream: a[0],
            mode: (!legacy).then_some(a[1] as u32),
        },
        StreamBeginCaptureToGraph => CudaArgs::CaptureBegin {
            stream: a[0],
            mode: Some(a[5] as u32),
        },
        StreamEndCapture | CuStreamEndCapture => CudaArgs::CaptureEnd {
            stream: a[0],
            graph: out,
            kernel_nodes: None,
        },
        GraphInstantiate
        | GraphInstantiateWithFlags
        | GraphInstantiateWithParams
        | CuGraphInstantiate
        | CuGraphInstantiateWithFlags
        | CuGraphInstantiateWithParams => CudaArgs::GraphInstantiate {
            graph: a[1],
            graph_exec: out,
        },
        CuModuleLoad
        | CuModuleLoadData
        | CuModuleLoadDataEx
        | CuModuleLoadFatBinary
        | CuLibraryLoadData
        | CuLibraryLoadFromFile => CudaArgs::ModuleLoad { module: out },
        CuModuleGetFunction | CuLibraryGetKernel | CuKernelGetFunction => CudaArgs::GetFunction {
            owner: a[1],
            function: out,
        },
        // (dst, src, count, kind[, stream]).
        Memcpy | MemcpyAsync => {
            let kind = MemcpyKind::from_raw(a[3]);
            CudaArgs::Memcpy {
                count: a[2],
                kind,
                stream: (op == MemcpyAsync).then_some(a[4]),
                width_height: None,
                host_ptr: host_side(kind, a[0], a[1]),
            }
        }
        // (dst, dpitch, src, spitch, width, height, kind[, stream]).
        Memcpy2D | Memcpy2DAsync => {
            let kind = MemcpyKind::from_raw(a[6]);
            CudaArgs::Memcpy {
                count: a[4].saturating_mul(a[5]),
                kind,
                stream: (op == Memcpy2DAsync).then_some(a[7]),
                width_height: Some((a[4], a[5])),
                host_ptr: host_side(kind, a[0], a[2]),
            }
        }
        MemcpyPeer | MemcpyPeerAsync => CudaArgs::MemcpyPeer {
            count: a[4],
            dst_device: a[1] as i32,
            src_device: a[3] as i32,
            stream: (op == MemcpyPeerAsync).then_some(a[5]),
        },
        CuMemcpy | CuMemcpyAsync => CudaArgs::Memcpy {
            count: a[2],
            kind: MemcpyKind::Default,
            stream: (op == CuMemcpyAsync).then_some(a[3]),
            width_height: None,
            host_ptr: None,
        },
        CuMemcpyHtoD | CuMemcpyDtoH | CuMemcpyDtoD | CuMemcpyHtoDAsync | CuMemcpyDtoHAsync
        | CuMemcpyDtoDAsync => CudaArgs::Memcpy {
            count: word(a[2]),
            kind: match op {
                CuMemcpyHtoD | CuMemcpyHtoDAsync => MemcpyKind::HostToDevice,
                CuMemcpyDtoH | CuMemcpyDtoHAsync => MemcpyKind::DeviceToHost,
                _ => MemcpyKind::DeviceToDevice,
            },
            stream: matches!(
                op,
                CuMemcpyHtoDAsync | CuMemcpyDtoHAsync | CuMemcpyDtoDAsync
            )
            .then_some(a[3]),
            width_height: None,
            // HtoD (dstDevice, srcHost, …), DtoH (dstHost, srcDevice, …). A host pointer is
            // 64 bits wide in the legacy exports too (only `CUdeviceptr` was 32-bit there).
            host_ptr: match op {
                CuMemcpyHtoD | CuMemcpyHtoDAsync => Some(a[1]),
                CuMemcpyDtoH | CuMemcpyDtoHAsync => Some(a[0]),
                _ => None,
            },
        },
        // The driver's peer copies take contexts, not device ordinals: a device-to-device copy.
        CuMemcpyPeer | CuMemcpyPeerAsync => CudaArgs::Memcpy {
            count: a[4],
            kind: MemcpyKind::DeviceToDevice,
            stream: (op == CuMemcpyPeerAsync).then_some(a[5]),
            width_height: None,
            host_ptr: None,
        },
        CuMemcpy2D | CuMemcpy2DAsync | CuMemcpy2DUnaligned => CudaArgs::Memcpy {
            count: a[4].saturating_mul(a[5]),
            kind: if legacy {
                MemcpyKind::Unknown(0)
            } else {
                descriptor_kind(a[6])
            },
            stream: (op == CuMemcpy2DAsync).then_some(a[1]),
            width_height: (!legacy).then_some((a[4], a[5])),
            // The probe reads the descriptor's sizes and memory types, not its pointers.
            host_ptr: None,
        },
        CuMemcpy3D | CuMemcpy3DAsync | CuMemcpy3DPeer | CuMemcpy3DPeerAsync => CudaArgs::Memcpy {
            count: a[4].saturating_mul(a[5]).saturating_mul(a[3]),
            kind: if legacy {
                MemcpyKind::Unknown(0)
            } else {
                descriptor_kind(a[6])
            },
            stream: matches!(op, CuMemcpy3DAsync | CuMemcpy3DPeerAsync).then_some(a[1]),
            width_height: (!legacy).then_some((a[4], a[5])),
            host_ptr: None,
        },
        CuMemcpyAtoA => CudaArgs::Memcpy {
            count: word(a[4]),
            kind: MemcpyKind::DeviceToDevice,
            stream: None,
            width_height: None,
            host_ptr: None,
        },
        CuMemcpyAtoD | CuMemcpyDtoA => CudaArgs::Memcpy {
            count: word(a[3]),
            kind: MemcpyKind::DeviceToDevice,
            stream: None,
            width_height: None,
            host_ptr: None,
        },
        // (dstHost, srcArray, srcOffset, count[, stream]).
        CuMemcpyAtoH | CuMemcpyAtoHAsync => CudaArgs::Memcpy {
            count: word(a[3]),
            kind: MemcpyKind::DeviceToHost,
            stream: (op == CuMemcpyAtoHAsync).then_some(a[4]),
            width_height: None,
            host_ptr: Some(a[0]),
        },
        // (dstArray, dstOffset, srcHost, count[, stream]).
        CuMemcpyHtoA | CuMemcpyHtoAAsync => CudaArgs::Memcpy {
            count: word(a[3]),
            kind: MemcpyKind::HostToDevice,
            stream: (op == CuMemcpyHtoAAsync).then_some(a[4]),
            width_height: None,
            host_ptr: Some(a[2]),
        },
        Memset | MemsetAsync => CudaArgs::Memset {
            count: a[2],
            stream: (op == MemsetAsync).then_some(a[3]),
        },
        // (dst, value, N[, stream]): N elements.
        CuMemsetD8 | CuMemsetD16 | CuMemsetD32 | CuMemsetD8Async | CuMemsetD16Async
        | CuMemsetD32Async => CudaArgs::Memset {
            count: word(a[2]).saturating_mul(memset_element(op)),
            stream: matches!(op, CuMemsetD8Async | CuMemsetD16Async | CuMemsetD32Async)
                .then_some(a[3]),
        },
        // (dst, pitch, value, width, height[, stream]): width elements by height rows.
        CuMemsetD2D8 | CuMemsetD2D16 | CuMemsetD2D32 | CuMemsetD2D8Async | CuMemsetD2D16Async
        | CuMemsetD2D32Async => CudaArgs::Memset {
            count: word(a[3])
                .saturating_mul(word(a[4]))
                .saturating_mul(memset_element(op)),
            stream: matches!(
                op,
                CuMemsetD2D8Async | CuMemsetD2D16Async | CuMemsetD2D32Async
            )
            .then_some(a[5]),
        },
        StreamSynchronize | CuStreamSynchronize => CudaArgs::Sync {
            stream: Some(a[0]),
            event: None,
        },
        EventSynchronize | CuEventSynchronize => CudaArgs::Sync {
            stream: None,
            event: Some(a[0]),
        },
        DeviceSynchronize | CuCtxSynchronize => CudaArgs::Sync {
            stream: None,
            event: None,
        },
        // Bookkeeping ops that never produce a call record (their probes emit names).
        RegisterFunction | GetKernel => CudaArgs::Sync {
            stream: None,
            event: None,
        },
        NcclAllReduce
        | NcclBroadcast
        | NcclReduce
        | NcclAllGather
        | NcclReduceScatter
        | NcclAlltoAll
        | NcclGather
        | NcclScatter
        | NcclSend
        | NcclRecv
        | NcclGroupStart
        | NcclGroupEnd
        | NcclCommInitRank
        | NcclCommInitRankConfig
        | NcclCommInitRankScalable
        | NcclCommInitAll
        | NcclCommSplit
        | NcclCommShrink
        | NcclCommFinalize
        | NcclCommDestroy
        | NcclCommAbort => nccl_args(op, a, ret, raw_out).unwrap_or(CudaArgs::Group),
    }
}
