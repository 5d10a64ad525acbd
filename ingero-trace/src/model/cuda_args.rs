//! A CUDA call's arguments, named per op ([`CudaArgs`]), and the error codes users see most.

use std::borrow::Cow;

use ingero_ebpf::{CudaLibrary, CudaOp};
use serde::Serialize;

use super::nccl::{CommSplit, Communicator, NcclRedOp, NcclType};

/// The direction of a copy: CUDA's `cudaMemcpyKind` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemcpyKind {
    /// `cudaMemcpyHostToHost` (0): host memory to host memory (`H2H`).
    HostToHost,
    /// `cudaMemcpyHostToDevice` (1): host memory to the GPU (`H2D`).
    HostToDevice,
    /// `cudaMemcpyDeviceToHost` (2): the GPU to host memory (`D2H`).
    DeviceToHost,
    /// `cudaMemcpyDeviceToDevice` (3): within or between GPUs (`D2D`).
    DeviceToDevice,
    /// `cudaMemcpyDefault` (4): the runtime infers the direction from the pointers (unified
    /// virtual addressing), so the recording does not know it.
    Default,
    /// A value CUDA does not define (or a newer one), kept as the call passed it.
    Unknown(u64),
}

impl MemcpyKind {
    /// The kind of the raw `cudaMemcpyKind` value a call passed.
    pub fn from_raw(v: u64) -> Self {
        match v {
            0 => Self::HostToHost,
            1 => Self::HostToDevice,
            2 => Self::DeviceToHost,
            3 => Self::DeviceToDevice,
            4 => Self::Default,
            other => Self::Unknown(other),
        }
    }

    /// The direction as users read it (`H2D`); every unknown value is `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            Self::HostToHost => "H2H",
            Self::HostToDevice => "H2D",
            Self::DeviceToHost => "D2H",
            Self::DeviceToDevice => "D2D",
            Self::Default => "Default",
            Self::Unknown(_) => "unknown",
        }
    }

    /// As written in recordings: the label, or `unknown:<raw>` so that the raw value survives.
    pub fn text(self) -> Cow<'static, str> {
        match self {
            Self::Unknown(v) => Cow::Owned(format!("unknown:{v}")),
            k => Cow::Borrowed(k.label()),
        }
    }

    /// Reads [`Self::text`]'s output; anything else is `Unknown(0)`.
    pub fn from_text(text: &str) -> MemcpyKind {
        if let Some(raw) = text.strip_prefix("unknown:") {
            return MemcpyKind::Unknown(raw.parse().unwrap_or(0));
        }
        (0..5)
            .map(MemcpyKind::from_raw)
            .find(|k| k.label() == text)
            .unwrap_or(MemcpyKind::Unknown(0))
    }
}

/// A kernel launch's configuration, as carried by the `launch` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// The kernel's host-side function address, as passed to the launch call.
    pub func: u64,
    /// Grid dimensions in blocks, `[x, y, z]`.
    pub grid: [u32; 3],
    /// Block dimensions in threads, `[x, y, z]`.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem: u64,
    /// The `cudaStream_t` handle the kernel was queued on (0: the default stream).
    pub stream: u64,
}

/// Where a `cuMemCreate` allocation lives: its `CUmemLocation` (`CU_MEM_LOCATION_TYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemLocation {
    /// `CU_MEM_LOCATION_TYPE_DEVICE` (1): GPU memory of the device with this ordinal.
    Device(i32),
    /// `CU_MEM_LOCATION_TYPE_HOST` (2): page-locked host memory.
    Host,
    /// `CU_MEM_LOCATION_TYPE_HOST_NUMA` (3): page-locked host memory of this NUMA node.
    HostNuma(i32),
    /// `CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT` (4): of the calling thread's NUMA node.
    HostNumaCurrent,
    /// Any other type (0 when the probe could not read the properties), kept as passed.
    Unknown(u32),
}

impl MemLocation {
    /// The location of a raw `CUmemLocation` (type, id).
    pub fn from_raw(kind: u32, id: i32) -> MemLocation {
        match kind {
            1 => MemLocation::Device(id),
            2 => MemLocation::Host,
            3 => MemLocation::HostNuma(id),
            4 => MemLocation::HostNumaCurrent,
            other => MemLocation::Unknown(other),
        }
    }

    /// Whether the memory is host memory (page-locked by the driver), not the GPU's.
    pub fn is_host(self) -> bool {
        matches!(
            self,
            MemLocation::Host | MemLocation::HostNuma(_) | MemLocation::HostNumaCurrent
        )
    }

    /// As written in recordings and JSON: `device:0`, `host`, `host_numa:1`,
    /// `host_numa_current`, `unknown:<type>`.
    pub fn text(self) -> Cow<'static, str> {
        match self {
            MemLocation::Device(id) => Cow::Owned(format!("device:{id}")),
            MemLocation::Host => Cow::Borrowed("host"),
            MemLocation::HostNuma(id) => Cow::Owned(format!("host_numa:{id}")),
            MemLocation::HostNumaCurrent => Cow::Borrowed("host_numa_current"),
            MemLocation::Unknown(t) => Cow::Owned(format!("unknown:{t}")),
        }
    }

    /// Reads [`Self::text`]'s output; anything else is `Unknown(0)`.
    pub fn from_text(text: &str) -> MemLocation {
        let number = |s: &str| s.parse::<i32>().ok();
        match text.split_once(':') {
            None if text == "host" => MemLocation::Host,
            None if text == "host_numa_current" => MemLocation::HostNumaCurrent,
            Some(("device", id)) => number(id).map_or(MemLocation::Unknown(0), MemLocation::Device),
            Some(("host_numa", id)) => {
                number(id).map_or(MemLocation::Unknown(0), MemLocation::HostNuma)
            }
            Some(("unknown", t)) => MemLocation::Unknown(t.parse().unwrap_or(0)),
            _ => MemLocation::Unknown(0),
        }
    }
}

/// Which [`CudaArgs`] variant an op's arguments take: the one place that groups the ops, so
/// the reader (and the tests) need no op lists of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgsShape {
    /// [`CudaArgs::Alloc`]: device allocations, runtime and driver.
    Alloc,
    /// [`CudaArgs::Free`].
    Free,
    /// [`CudaArgs::HostAlloc`]: pinned host memory.
    HostAlloc,
    /// [`CudaArgs::HostFree`].
    HostFree,
    /// [`CudaArgs::HostRegister`]: page-locking memory the caller already has.
    HostRegister,
    /// [`CudaArgs::HostUnregister`].
    HostUnregister,
    /// [`CudaArgs::PhysicalCreate`]: `cuMemCreate`.
    PhysicalCreate,
    /// [`CudaArgs::PhysicalHandle`]: the calls that release, retain or import a handle.
    PhysicalHandle,
    /// [`CudaArgs::AddressRange`]: mapping, unmapping, reserving, freeing address ranges and
    /// setting their access.
    AddressRange,
    /// [`CudaArgs::Launch`]: kernel launches, runtime and driver.
    Launch,
    /// [`CudaArgs::GraphLaunch`].
    GraphLaunch,
    /// [`CudaArgs::CaptureBegin`].
    CaptureBegin,
    /// [`CudaArgs::CaptureEnd`].
    CaptureEnd,
    /// [`CudaArgs::GraphInstantiate`].
    GraphInstantiate,
    /// [`CudaArgs::ModuleLoad`]: modules and libraries.
    ModuleLoad,
    /// [`CudaArgs::GetFunction`]: function and kernel lookups.
    GetFunction,
    /// [`CudaArgs::Memcpy`]: every copy but the runtime's peer copies.
    Memcpy,
    /// [`CudaArgs::MemcpyPeer`]: the runtime's peer copies (device ordinals).
    MemcpyPeer,
    /// [`CudaArgs::Memset`].
    Memset,
    /// [`CudaArgs::Sync`].
    Sync,
    /// [`CudaArgs::Collective`]: NCCL's collectives.
    Collective,
    /// [`CudaArgs::PointToPoint`]: `ncclSend`, `ncclRecv`.
    PointToPoint,
    /// [`CudaArgs::CommCreate`]: the calls that make a communicator.
    CommCreate,
    /// [`CudaArgs::CommEnd`]: the calls that end one.
    CommEnd,
    /// [`CudaArgs::Group`]: `ncclGroupStart`, `ncclGroupEnd`.
    Group,
}

impl ArgsShape {
    /// The shape of `op`'s arguments (the agent's decoder produces this variant for it).
    pub const fn of(op: CudaOp) -> ArgsShape {
        use CudaOp::*;
        match op {
            Malloc
            | MallocManaged
            | MallocAsync
            | CuMemAlloc
            | CuMemAllocAsync
            | CuMemAllocFromPoolAsync
            | CuMemAllocManaged
            | CuMemAllocPitch => ArgsShape::Alloc,
            Free | FreeAsync | CuMemFree | CuMemFreeAsync => ArgsShape::Free,
            MallocHost | HostAlloc | CuMemAllocHost | CuMemHostAlloc => ArgsShape::HostAlloc,
            FreeHost | CuMemFreeHost => ArgsShape::HostFree,
            HostRegister | CuMemHostRegister => ArgsShape::HostRegister,
            HostUnregister | CuMemHostUnregister => ArgsShape::HostUnregister,
            CuMemCreate => ArgsShape::PhysicalCreate,
            CuMemRelease | CuMemRetainAllocationHandle | CuMemImportFromShareableHandle => {
                ArgsShape::PhysicalHandle
            }
            CuMemMap | CuMemUnmap | CuMemAddressReserve | CuMemAddressFree | CuMemSetAccess => {
                ArgsShape::AddressRange
            }
            LaunchKernel
            | LaunchCooperativeKernel
            | LaunchKernelExC
            | CuLaunchKernel
            | CuLaunchKernelEx
            | CuLaunchCooperativeKernel => ArgsShape::Launch,
            GraphLaunch | CuGraphLaunch => ArgsShape::GraphLaunch,
            StreamBeginCapture | StreamBeginCaptureToGraph | CuStreamBeginCapture => {
                ArgsShape::CaptureBegin
            }
            StreamEndCapture | CuStreamEndCapture => ArgsShape::CaptureEnd,
            GraphInstantiate
            | GraphInstantiateWithFlags
            | GraphInstantiateWithParams
            | CuGraphInstantiate
            | CuGraphInstantiateWithFlags
            | CuGraphInstantiateWithParams => ArgsShape::GraphInstantiate,
            CuModuleLoad
            | CuModuleLoadData
            | CuModuleLoadDataEx
            | CuModuleLoadFatBinary
            | CuLibraryLoadData
            | CuLibraryLoadFromFile => ArgsShape::ModuleLoad,
            CuModuleGetFunction | CuLibraryGetKernel | CuKernelGetFunction => {
                ArgsShape::GetFunction
            }
            Memcpy | MemcpyAsync | Memcpy2D | Memcpy2DAsync | CuMemcpy | CuMemcpyAsync
            | CuMemcpyHtoD | CuMemcpyDtoH | CuMemcpyDtoD | CuMemcpyHtoDAsync
            | CuMemcpyDtoHAsync | CuMemcpyDtoDAsync | CuMemcpyPeer | CuMemcpyPeerAsync
            | CuMemcpy2D | CuMemcpy2DAsync | CuMemcpy2DUnaligned | CuMemcpy3D | CuMemcpy3DAsync
            | CuMemcpy3DPeer | CuMemcpy3DPeerAsync | CuMemcpyAtoA | CuMemcpyAtoD | CuMemcpyAtoH
            | CuMemcpyAtoHAsync | CuMemcpyDtoA | CuMemcpyHtoA | CuMemcpyHtoAAsync => {
                ArgsShape::Memcpy
            }
            MemcpyPeer | MemcpyPeerAsync => ArgsShape::MemcpyPeer,
            Memset | MemsetAsync | CuMemsetD8 | CuMemsetD16 | CuMemsetD32 | CuMemsetD8Async
            | CuMemsetD16Async | CuMemsetD32Async | CuMemsetD2D8 | CuMemsetD2D16
            | CuMemsetD2D32 | CuMemsetD2D8Async | CuMemsetD2D16Async | CuMemsetD2D32Async => {
                ArgsShape::Memset
            }
            // The registration ops never produce a call record; Sync is their empty shape.
            StreamSynchronize | DeviceSynchronize | EventSynchronize | CuStreamSynchronize
            | CuCtxSynchronize | CuEventSynchronize | RegisterFunction | GetKernel => {
                ArgsShape::Sync
            }
            NcclAllReduce | NcclBroadcast | NcclReduce | NcclAllGather | NcclReduceScatter
            | NcclAlltoAll | NcclGather | NcclScatter => ArgsShape::Collective,
            NcclSend | NcclRecv => ArgsShape::PointToPoint,
            NcclCommInitRank
            | NcclCommInitRankConfig
            | NcclCommInitRankScalable
            | NcclCommInitAll
            | NcclCommSplit
            | NcclCommShrink => ArgsShape::CommCreate,
            NcclCommFinalize | NcclCommDestroy | NcclCommAbort => ArgsShape::CommEnd,
            NcclGroupStart | NcclGroupEnd => ArgsShape::Group,
        }
    }
}

impl ArgsShape {
    /// Whether the shape allocates or frees memory (device, pool, managed, pinned host, or
    /// physical memory by handle and the address ranges it is mapped into). A driver call
    /// nested in such a call is the runtime call's own work (`cuMemAlloc` inside
    /// `cudaMalloc`): memory accounting counts the outer call only.
    pub const fn is_memory(self) -> bool {
        matches!(
            self,
            ArgsShape::Alloc
                | ArgsShape::Free
                | ArgsShape::HostAlloc
                | ArgsShape::HostFree
                | ArgsShape::PhysicalCreate
                | ArgsShape::PhysicalHandle
                | ArgsShape::AddressRange
        )
    }

    /// Whether the shape page-locks host memory the caller already has, or unlocks it. Not
    /// memory of its own (nothing is allocated, so memory accounting leaves it out), but a
    /// driver call nested in it is the runtime call's work all the same.
    pub const fn is_host_registration(self) -> bool {
        matches!(self, ArgsShape::HostRegister | ArgsShape::HostUnregister)
    }
}

/// Which allocator a block came from; kept apart because they are different resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemKind {
    /// `cudaMalloc`, `cuMemAlloc`, `cuMemAllocPitch`.
    Device,
    /// Stream-ordered pool allocations: `cudaMallocAsync`, `cuMemAllocAsync`,
    /// `cuMemAllocFromPoolAsync`.
    Pool,
    /// Unified memory: `cudaMallocManaged`, `cuMemAllocManaged`.
    Managed,
    /// Page-locked host memory: `cudaMallocHost`, `cudaHostAlloc`, `cuMemAllocHost`,
    /// `cuMemHostAlloc`, and `cuMemCreate` at a host location. Memory page-locked by
    /// `cudaHostRegister` / `cuMemHostRegister` is the caller's own allocation, so it is no
    /// kind: those calls allocate nothing.
    Pinned,
    /// Physical GPU memory created by handle (`cuMemCreate` at a device location), the
    /// virtual memory management API: held until the handle is released and unmapped.
    Vmm,
}

impl MemKind {
    /// The kind's place in per-kind arrays (declaration order).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// As written in reports (`device`, `pool`, `managed`, `pinned`).
    pub const fn name(self) -> &'static str {
        match self {
            MemKind::Device => "device",
            MemKind::Pool => "pool",
            MemKind::Managed => "managed",
            MemKind::Pinned => "pinned",
            MemKind::Vmm => "vmm",
        }
    }

    /// Every kind, in [`Self::index`] order.
    pub const ALL: [MemKind; 5] = [
        MemKind::Device,
        MemKind::Pool,
        MemKind::Managed,
        MemKind::Pinned,
        MemKind::Vmm,
    ];

    /// Whether the kind is the GPU's memory (all but pinned host memory).
    pub const fn is_gpu(self) -> bool {
        !matches!(self, MemKind::Pinned)
    }

    /// The kind of physical memory `cuMemCreate` made at `location`: pinned host memory at a
    /// host location, else the GPU's (a location the probe could not read included).
    pub fn of_location(location: MemLocation) -> MemKind {
        if location.is_host() {
            MemKind::Pinned
        } else {
            MemKind::Vmm
        }
    }

    /// The kind an allocating op hands out; `None` for every other op (`cuMemCreate`'s kind
    /// depends on its location: [`Self::of_location`]).
    pub fn of_alloc(op: CudaOp) -> Option<MemKind> {
        use CudaOp::*;
        Some(match op {
            Malloc | CuMemAlloc | CuMemAllocPitch => MemKind::Device,
            MallocAsync | CuMemAllocAsync | CuMemAllocFromPoolAsync => MemKind::Pool,
            MallocManaged | CuMemAllocManaged => MemKind::Managed,
            _ if matches!(ArgsShape::of(op), ArgsShape::HostAlloc) => MemKind::Pinned,
            _ => return None,
        })
    }
}

/// Whether a call counts for memory: a driver call made inside a runtime memory call
/// (`cuMemAlloc` inside `cudaMalloc`, `cuMemHostRegister` inside `cudaHostRegister`) is that
/// call's work and counted once, as it. A driver allocation nested in some other runtime call
/// (a launch that allocates lazily) is the only record of that memory and counts.
pub fn counts_for_memory(parent: Option<CudaOp>) -> bool {
    parent.is_none_or(|p| {
        let shape = ArgsShape::of(p);
        !(shape.is_memory() || shape.is_host_registration())
    })
}

/// What ingero saw of the capture that built an executable graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Captured {
    /// Kernel launches traced on the capturing stream between begin and end.
    pub kernel_nodes: u32,
    /// The stream that was captured.
    pub stream: u64,
}

/// The arguments of a call, named per op.
#[derive(Clone, Debug, PartialEq)]
pub enum CudaArgs {
    /// cudaMalloc, cudaMallocManaged, cudaMallocAsync. `ptr` is the resolved device pointer
    /// (only on success).
    Alloc {
        /// Bytes requested.
        size: u64,
        /// The device pointer the call returned; `None` when it failed.
        ptr: Option<u64>,
        /// The stream of the async form; `None` for the synchronous ones.
        stream: Option<u64>,
    },
    /// cudaFree, cudaFreeAsync. `size` is what the freed allocation held, when it was seen.
    Free {
        /// The device pointer freed.
        ptr: u64,
        /// Bytes the allocation held; `None` when the probes had not seen it allocated (made
        /// before tracing started, for one).
        size: Option<u64>,
        /// The stream of the async form; `None` for `cudaFree`.
        stream: Option<u64>,
    },
    /// cudaMallocHost, cudaHostAlloc, cuMemAllocHost, cuMemHostAlloc.
    HostAlloc {
        /// Bytes of pinned host memory requested.
        size: u64,
        /// The pinned host pointer the call returned; `None` when it failed (or the export is
        /// a legacy one, or the recording predates host pointers).
        ptr: Option<u64>,
    },
    /// cudaFreeHost.
    HostFree {
        /// The pinned host pointer freed.
        ptr: u64,
    },
    /// cudaHostRegister, cuMemHostRegister: page-locks `size` bytes of host memory the caller
    /// allocated itself, from `ptr` on (copies from and to it are then truly asynchronous).
    HostRegister {
        /// The start of the host range.
        ptr: u64,
        /// Bytes of the range.
        size: u64,
        /// The registration flags as passed (`cudaHostRegisterPortable` 1, `Mapped` 2,
        /// `IoMemory` 4, `ReadOnly` 8).
        flags: u32,
    },
    /// cudaHostUnregister, cuMemHostUnregister.
    HostUnregister {
        /// The start of the range registered before.
        ptr: u64,
    },
    /// cuMemCreate: physical memory, named by a handle until it is released.
    PhysicalCreate {
        /// Bytes requested.
        size: u64,
        /// The `CUmemGenericAllocationHandle` created; `None` when the call failed.
        handle: Option<u64>,
        /// Where the memory lives.
        location: MemLocation,
    },
    /// cuMemRelease (`handle`: the one released), cuMemRetainAllocationHandle (`handle`: the
    /// one returned, `ptr`: the mapped address asked), cuMemImportFromShareableHandle
    /// (`handle`: the one returned for another process's memory).
    PhysicalHandle {
        /// The handle released, or returned on success; `None` when the call failed.
        handle: Option<u64>,
        /// cuMemRetainAllocationHandle's address; `None` for the other two.
        ptr: Option<u64>,
    },
    /// cuMemMap (`handle`: the memory mapped), cuMemUnmap, cuMemAddressReserve (`ptr`: the
    /// range returned), cuMemAddressFree, cuMemSetAccess.
    AddressRange {
        /// The range's start; `None` when a reservation failed.
        ptr: Option<u64>,
        /// Bytes of the range.
        size: u64,
        /// cuMemMap's handle; `None` for the other three.
        handle: Option<u64>,
    },
    /// cudaLaunchKernel, cudaLaunchCooperativeKernel, cudaLaunchKernelExC.
    Launch {
        /// The kernel's host-side function address.
        func: u64,
        /// Grid dimensions in blocks, `[x, y, z]`.
        grid: [u32; 3],
        /// Block dimensions in threads, `[x, y, z]`.
        block: [u32; 3],
        /// Dynamic shared memory per block, in bytes.
        shared_mem: u64,
        /// The `cudaStream_t` handle (0: the default stream).
        stream: u64,
    },
    /// cudaGraphLaunch, cuGraphLaunch.
    GraphLaunch {
        /// The `cudaGraphExec_t` handle launched.
        graph_exec: u64,
        /// The `cudaStream_t` handle (0: the default stream).
        stream: u64,
        /// What the capture that built the graph recorded, when it was traced.
        captured: Option<Captured>,
    },
    /// cudaStreamBeginCapture[ToGraph], cuStreamBeginCapture.
    CaptureBegin {
        /// The stream whose work is captured.
        stream: u64,
        /// The `cudaStreamCaptureMode` (absent for the legacy one-argument driver export).
        mode: Option<u32>,
    },
    /// cudaStreamEndCapture, cuStreamEndCapture.
    CaptureEnd {
        /// The stream whose capture ended.
        stream: u64,
        /// The graph it produced (on success).
        graph: Option<u64>,
        /// Kernel launches traced on the stream during the capture (recorded into the graph).
        kernel_nodes: Option<u32>,
    },
    /// cudaGraphInstantiate*, cuGraphInstantiate*.
    GraphInstantiate {
        /// The graph instantiated.
        graph: u64,
        /// The executable graph created (on success).
        graph_exec: Option<u64>,
    },
    /// cuModuleLoad*, cuLibraryLoad*.
    ModuleLoad {
        /// The `CUmodule` or `CUlibrary` created (on success).
        module: Option<u64>,
    },
    /// cuModuleGetFunction, cuLibraryGetKernel (`owner`: the module or library),
    /// cuKernelGetFunction (`owner`: the `CUkernel`).
    GetFunction {
        /// The module, library or kernel asked.
        owner: u64,
        /// The `CUfunction` or `CUkernel` returned (on success).
        function: Option<u64>,
    },
    /// cudaMemcpy family. `width`/`height` only for the 2D forms (count = width × height).
    Memcpy {
        /// Bytes copied.
        count: u64,
        /// The direction the caller passed.
        kind: MemcpyKind,
        /// The stream of the async forms; `None` for the synchronous ones.
        stream: Option<u64>,
        /// The 2D forms' width in bytes and height in rows; `None` for the 1D forms.
        width_height: Option<(u64, u64)>,
        /// The host side's pointer when the direction has one (the source of a host-to-device
        /// copy, the destination of a device-to-host one), so a reader can tell pinned from
        /// pageable memory. `None` when the call leaves the direction to the pointers
        /// (`Default`), copies within one side, passes a descriptor (the 2D and 3D driver
        /// copies), or the recording predates host pointers.
        host_ptr: Option<u64>,
    },
    /// cudaMemcpyPeer, cudaMemcpyPeerAsync.
    MemcpyPeer {
        /// Bytes copied.
        count: u64,
        /// The destination device's ordinal.
        dst_device: i32,
        /// The source device's ordinal.
        src_device: i32,
        /// The stream of the async form; `None` for `cudaMemcpyPeer`.
        stream: Option<u64>,
    },
    /// cudaMemset, cudaMemsetAsync.
    Memset {
        /// Bytes set.
        count: u64,
        /// The stream of the async form; `None` for `cudaMemset`.
        stream: Option<u64>,
    },
    /// cudaStreamSynchronize (`stream`), cudaEventSynchronize (`event`), cudaDeviceSynchronize.
    Sync {
        /// The stream waited for (cudaStreamSynchronize); `None` for the other two.
        stream: Option<u64>,
        /// The `cudaEvent_t` waited for (cudaEventSynchronize); `None` for the other two.
        event: Option<u64>,
    },
    /// NCCL's collectives: `count` elements of `datatype` as the call passed it (per rank:
    /// an all-gather's send count, a reduce-scatter's receive count).
    Collective {
        /// Elements.
        count: u64,
        /// Their type.
        datatype: NcclType,
        /// The reductions' operator (all-reduce, reduce, reduce-scatter); `None` otherwise.
        red_op: Option<NcclRedOp>,
        /// The root rank of broadcast, reduce, gather and scatter; `None` otherwise.
        root: Option<i32>,
        /// The communicator, with what the agent knew of it.
        on: Communicator,
        /// The `cudaStream_t` the work was queued on.
        stream: u64,
        /// The collective's place in its communicator's order in this process, from 1
        /// (counting the collectives NCCL took); `None` when it was not numbered.
        seq: Option<u64>,
    },
    /// ncclSend, ncclRecv.
    PointToPoint {
        /// Elements.
        count: u64,
        /// Their type.
        datatype: NcclType,
        /// The rank sent to or received from.
        peer: i32,
        /// The communicator, with what the agent knew of it.
        on: Communicator,
        /// The `cudaStream_t` the work was queued on.
        stream: u64,
    },
    /// ncclCommInitRank, ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommInitAll,
    /// ncclCommSplit, ncclCommShrink: `made.comm` is the new handle (0 when the call failed).
    CommCreate {
        /// The communicator made, as far as the call says.
        made: Communicator,
        /// The communicator it was split from.
        split: Option<CommSplit>,
    },
    /// ncclCommFinalize, ncclCommDestroy, ncclCommAbort.
    CommEnd {
        /// The communicator ended.
        comm: u64,
    },
    /// ncclGroupStart, ncclGroupEnd.
    Group,
}

impl CudaArgs {
    /// Whether the call is one of CUDA's virtual memory management API (memory by handle,
    /// [`super::PhysicalMemory`]): created, released, retained, imported, or the address
    /// ranges it is mapped into.
    pub const fn is_by_handle(&self) -> bool {
        matches!(
            self,
            CudaArgs::PhysicalCreate { .. }
                | CudaArgs::PhysicalHandle { .. }
                | CudaArgs::AddressRange { .. }
        )
    }
}

impl CudaArgs {
    /// The Perfetto flow of a collective on a communicator the agent saw made (the same on
    /// every rank: [`super::nccl::collective_flow`]); `None` for every other call.
    pub fn collective_flow(&self) -> Option<u64> {
        match *self {
            CudaArgs::Collective {
                on: Communicator { id: Some(id), .. },
                seq: Some(seq),
                ..
            } => Some(super::nccl::collective_flow(id, seq)),
            _ => None,
        }
    }

    /// Bytes an NCCL collective or point-to-point call moves per rank as passed (count × the
    /// element size); `None` for every other call and for an unknown element type.
    pub fn nccl_bytes(&self) -> Option<u64> {
        match self {
            CudaArgs::Collective {
                count, datatype, ..
            }
            | CudaArgs::PointToPoint {
                count, datatype, ..
            } => datatype.size().map(|s| s.saturating_mul(*count)),
            _ => None,
        }
    }
}

/// The name of the error code a call returned: an `ncclResult_t` for NCCL's calls, else a
/// `cudaError_t` (the driver's `CUresult` shares the codes users meet most).
pub fn call_error_name(op: CudaOp, code: i32) -> Option<&'static str> {
    match op.library() {
        CudaLibrary::Nccl => super::nccl::nccl_error_name(code),
        CudaLibrary::Runtime | CudaLibrary::Driver => cuda_error_name(code),
    }
}

/// Whether a call failed: any non-zero return but NCCL's `ncclInProgress` (7), which a
/// non-blocking communicator returns for work it took.
pub fn call_failed(op: CudaOp, ret: i32) -> bool {
    ret != 0 && !(ret == 7 && matches!(op.library(), CudaLibrary::Nccl))
}

/// The name of a `cudaError_t`, for the codes users meet most.
pub fn cuda_error_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "cudaSuccess",
        1 => "cudaErrorInvalidValue",
        2 => "cudaErrorMemoryAllocation",
        3 => "cudaErrorInitializationError",
        4 => "cudaErrorCudartUnloading",
        9 => "cudaErrorInvalidConfiguration",
        35 => "cudaErrorInsufficientDriver",
        98 => "cudaErrorInvalidDeviceFunction",
        100 => "cudaErrorNoDevice",
        101 => "cudaErrorInvalidDevice",
        200 => "cudaErrorInvalidKernelImage",
        209 => "cudaErrorNoKernelImageForDevice",
        400 => "cudaErrorInvalidResourceHandle",
        600 => "cudaErrorNotReady",
        700 => "cudaErrorIllegalAddress",
        701 => "cudaErrorLaunchOutOfResources",
        702 => "cudaErrorLaunchTimeout",
        719 => "cudaErrorLaunchFailure",
        999 => "cudaErrorUnknown",
        _ => return None,
    })
}

#[cfg(test)]
#[path = "cuda_args_tests.rs"]
mod tests;
