//! The CUDA runtime operations ingero traces, the exported symbols that implement them, and the
//! per-op flags the eBPF programs act on.
//!
//! One uprobe program and one uretprobe program serve every symbol: the attach cookie carries
//! `op | flags << 16 | variant << 48`, so the kernel side knows which extra work a call needs
//! (stack arguments, a launch config to read, an allocation to remember) without a program per
//! function.
//!
//! Besides CUDA's runtime and driver, the table holds NCCL's collectives, point-to-point calls,
//! groups and communicators (`libnccl.so.2`): they run through the same programs, so a driver
//! call NCCL makes inside a collective names it as its parent.

/// Flags carried in bits 16..48 of the attach cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpFlags(pub u32);

impl OpFlags {
    pub const NONE: OpFlags = OpFlags(0);
    /// Arguments 7 and 8 live on the stack at `[rsp+8]` and `[rsp+16]` at entry.
    pub const STACK_ARGS: OpFlags = OpFlags(1);
    /// `args[0]` points at a `cudaLaunchConfig_t`: read grid, block, shared memory and stream.
    pub const LAUNCH_CONFIG: OpFlags = OpFlags(2);
    /// `args[0]` is `void **devPtr` and `args[1]` the size: remember the allocation at return.
    pub const ALLOC: OpFlags = OpFlags(4);
    /// `args[0]` is a pointer being freed: look up and forget its allocation.
    pub const FREE: OpFlags = OpFlags(8);
    /// The driver's 11-argument launch (`cuLaunchKernel`): blockDimZ, sharedMemBytes (both
    /// 32-bit) and the stream are the 7th to 9th arguments, on the stack.
    pub const DRIVER_LAUNCH: OpFlags = OpFlags(16);
    /// `args[0]` points at a `CUlaunchConfig` (`cuLaunchKernelEx`), `args[1]` is the function.
    pub const DRIVER_LAUNCH_CONFIG: OpFlags = OpFlags(32);
    /// At a successful return, `*args[0]` is the handle the call created (module, function,
    /// graph exec, …): carried in the record's `out`.
    pub const OUT0: OpFlags = OpFlags(64);
    /// As [`Self::OUT0`] for `*args[1]` (`cudaStreamEndCapture`'s graph).
    pub const OUT1: OpFlags = OpFlags(128);
    /// At a successful return, `args[2]` is the kernel name the `out` handle now stands for:
    /// emit a [`crate::NameRecord`] (`cuModuleGetFunction`, `cuLibraryGetKernel`).
    pub const NAME_ARG2: OpFlags = OpFlags(256);
    /// At a successful return, the `out` handle names the same kernel as `args[1]`: emit an
    /// alias [`crate::NameRecord`] (`cuKernelGetFunction`, `__cudaGetKernel`).
    pub const ALIAS_ARG1: OpFlags = OpFlags(512);
    /// `__cudaRegisterFunction`: at entry, `args[1]` (the host function) is named by the
    /// string at `args[3]`. Entry only: no return probe, no frame, no call record.
    pub const REGISTER: OpFlags = OpFlags(1024);
    /// Bookkeeping only: the return emits no [`crate::CudaRecord`] (`__cudaGetKernel`).
    pub const NO_EVENT: OpFlags = OpFlags(2048);
    /// `args[0]` points at a `CUDA_MEMCPY2D`: read width, height and the memory types.
    pub const DESC_2D: OpFlags = OpFlags(4096);
    /// `args[0]` points at a `CUDA_MEMCPY3D` (or `_PEER`): width, height, depth, memory types.
    pub const DESC_3D: OpFlags = OpFlags(8192);
    /// `args[2]` points at a `CUmemAllocationProp` (`cuMemCreate`): read where the memory
    /// lives (its `CUmemLocation`'s type and id) into `args[2]`, packed type low.
    pub const ALLOC_PROP: OpFlags = OpFlags(16384);
    /// As [`Self::OUT0`] for `*args[3]` (`ncclCommSplit`'s and `ncclCommShrink`'s new
    /// communicator).
    pub const OUT3: OpFlags = OpFlags(32768);

    pub const fn contains(self, other: OpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 | other.0)
    }

    /// These flags without `other`'s.
    pub const fn without(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 & !other.0)
    }
}

/// What a legacy export (an old ABI under the unsuffixed name, such as `cuMemAlloc` with a
/// 32-bit pointer) may still do: its arguments are reported, but nothing is dereferenced or
/// remembered with the modern layout.
pub const LEGACY_DROPS: OpFlags = OpFlags(
    OpFlags::ALLOC.0 | OpFlags::FREE.0 | OpFlags::DESC_2D.0 | OpFlags::DESC_3D.0 | OpFlags::OUT0.0,
);

/// Encodes an op, its flags and the index of the symbol that fired ([`CudaOp::symbol`]) as a
/// uprobe attach cookie: op in bits 0..16, flags in 16..48, the variant in 48..56.
pub const fn cookie(op: CudaOp, flags: OpFlags, variant: u8) -> u64 {
    (op as u64) | ((flags.0 as u64) << 16) | ((variant as u64) << 48)
}

/// Splits a cookie back into the raw op value and its flags.
pub const fn split_cookie(cookie: u64) -> (u16, OpFlags) {
    (
        (cookie & 0xffff) as u16,
        OpFlags(((cookie >> 16) & 0xffff_ffff) as u32),
    )
}

/// The symbol index a cookie carries.
pub const fn cookie_variant(cookie: u64) -> u16 {
    ((cookie >> 48) & 0xff) as u16
}

/// The NVIDIA library an op's symbols live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CudaLibrary {
    /// The CUDA runtime, `libcudart.so*` (the `cuda*` and `__cuda*` functions).
    Runtime,
    /// The CUDA driver, `libcuda.so.1` (the `cu*` functions).
    Driver,
    /// NVIDIA's collective communications library, `libnccl.so.2` (the `nccl*` functions).
    Nccl,
}

impl CudaLibrary {
    /// Every library, runtime first.
    pub const ALL: [CudaLibrary; 3] =
        [CudaLibrary::Runtime, CudaLibrary::Driver, CudaLibrary::Nccl];

    /// The library's file name stem, as users know it.
    pub const fn name(self) -> &'static str {
        match self {
            CudaLibrary::Runtime => "libcudart",
            CudaLibrary::Driver => "libcuda",
            CudaLibrary::Nccl => "libnccl",
        }
    }
}

macro_rules! cuda_ops {
    ($( $variant:ident = $id:literal, $lib:ident, $name:literal, $flags:expr,
        [$($sym:literal),+ $(,)?] $(legacy [$($leg:literal),+ $(,)?])? );+ $(;)?) => {
        /// A traced CUDA operation, runtime (`cuda*`) or driver (`cu*`). Every export that
        /// implements it (`_v2`, `_ptsz`, `_ptds`, …) maps to the one op, named by its API
        /// name without version suffix; which export fired is the record's `variant`.
        #[repr(u16)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CudaOp { $($variant = $id),+ }

        impl CudaOp {
            pub const ALL: &'static [CudaOp] = &[$(CudaOp::$variant),+];

            pub fn from_u16(v: u16) -> Option<CudaOp> {
                match v { $($id => Some(CudaOp::$variant),)+ _ => None }
            }

            /// The canonical CUDA name, as shown to users.
            pub const fn name(self) -> &'static str {
                match self { $(CudaOp::$variant => $name),+ }
            }

            /// The library that exports the op's symbols.
            pub const fn library(self) -> CudaLibrary {
                match self { $(CudaOp::$variant => CudaLibrary::$lib),+ }
            }

            pub const fn flags(self) -> OpFlags {
                match self { $(CudaOp::$variant => $flags),+ }
            }

            /// Every exported symbol that implements this op with its current signature.
            pub const fn symbols(self) -> &'static [&'static str] {
                match self { $(CudaOp::$variant => &[$($sym),+]),+ }
            }

            /// Exports under this op's name with an older signature (32-bit sizes, fewer
            /// arguments): attached and reported, decoded without the modern layout.
            pub const fn legacy_symbols(self) -> &'static [&'static str] {
                match self { $(CudaOp::$variant => &[$($($leg),+)?]),+ }
            }
        }
    };
}

impl CudaOp {
    /// The export a record's `variant` names: an index into [`Self::symbols`], then into
    /// [`Self::legacy_symbols`].
    pub fn symbol(self, variant: u16) -> Option<&'static str> {
        let v = variant as usize;
        let current = self.symbols();
        if v < current.len() {
            Some(current[v])
        } else {
            self.legacy_symbols().get(v - current.len()).copied()
        }
    }

    /// Whether the op launches a kernel (runtime or driver; not a graph).
    pub const fn is_kernel_launch(self) -> bool {
        matches!(
            self,
            CudaOp::LaunchKernel
                | CudaOp::LaunchKernelExC
                | CudaOp::LaunchCooperativeKernel
                | CudaOp::CuLaunchKernel
                | CudaOp::CuLaunchKernelEx
                | CudaOp::CuLaunchCooperativeKernel
        )
    }

    /// Whether the op submits GPU work to run: a kernel or a graph.
    pub const fn is_launch(self) -> bool {
        self.is_kernel_launch() || self.is_graph_launch()
    }

    /// Whether the op waits for the device (its time is synchronisation wait).
    pub const fn is_sync(self) -> bool {
        matches!(
            self,
            CudaOp::StreamSynchronize
                | CudaOp::DeviceSynchronize
                | CudaOp::EventSynchronize
                | CudaOp::CuStreamSynchronize
                | CudaOp::CuCtxSynchronize
                | CudaOp::CuEventSynchronize
        )
    }

    /// Whether the op is one of NCCL's collectives (every rank of a communicator calls it, in
    /// the same order): not the point-to-point calls, groups or communicator calls.
    pub const fn is_collective(self) -> bool {
        matches!(
            self,
            CudaOp::NcclAllReduce
                | CudaOp::NcclBroadcast
                | CudaOp::NcclReduce
                | CudaOp::NcclAllGather
                | CudaOp::NcclReduceScatter
                | CudaOp::NcclAlltoAll
                | CudaOp::NcclGather
                | CudaOp::NcclScatter
        )
    }

    /// Whether the op launches a CUDA graph.
    pub const fn is_graph_launch(self) -> bool {
        matches!(self, CudaOp::GraphLaunch | CudaOp::CuGraphLaunch)
    }

    /// Whether `variant` is a legacy export (see [`Self::legacy_symbols`]).
    pub fn is_legacy(self, variant: u16) -> bool {
        let v = variant as usize;
        v >= self.symbols().len() && v < self.symbols().len() + self.legacy_symbols().len()
    }

    /// Every export of the op with the flags its probe carries and its variant index.
    pub fn exports(self) -> impl Iterator<Item = (&'static str, OpFlags, u8)> {
        let current = self.symbols().iter().map(move |s| (*s, self.flags()));
        let legacy = self
            .legacy_symbols()
            .iter()
            .map(move |s| (*s, self.flags().without(LEGACY_DROPS)));
        current
            .chain(legacy)
            .enumerate()
            .map(|(i, (s, f))| (s, f, i as u8))
    }
}

const STACK: OpFlags = OpFlags::STACK_ARGS;
const NONE: OpFlags = OpFlags::NONE;
const ALLOC: OpFlags = OpFlags::ALLOC;
const FREE: OpFlags = OpFlags::FREE;
const OUT0: OpFlags = OpFlags::OUT0;
const OUT1: OpFlags = OpFlags::OUT1;
const OUT3: OpFlags = OpFlags::OUT3;
const STACK_OUT0: OpFlags = OpFlags(OpFlags::STACK_ARGS.0 | OpFlags::OUT0.0);
const DESC_2D: OpFlags = OpFlags::DESC_2D;
const DESC_3D: OpFlags = OpFlags::DESC_3D;
const DRIVER_LAUNCH: OpFlags = OpFlags::DRIVER_LAUNCH;
const GET_FUNCTION: OpFlags = OpFlags(OpFlags::OUT0.0 | OpFlags::NAME_ARG2.0);
const ALIAS: OpFlags = OpFlags(OpFlags::OUT0.0 | OpFlags::ALIAS_ARG1.0);

cuda_ops! {
    // The runtime, libcudart.
    Malloc = 1, Runtime, "cudaMalloc", ALLOC, ["cudaMalloc"];
    Free = 2, Runtime, "cudaFree", FREE, ["cudaFree"];
    MallocManaged = 3, Runtime, "cudaMallocManaged", ALLOC, ["cudaMallocManaged"];
    MallocAsync = 4, Runtime, "cudaMallocAsync", ALLOC, ["cudaMallocAsync", "cudaMallocAsync_ptsz"];
    FreeAsync = 5, Runtime, "cudaFreeAsync", FREE, ["cudaFreeAsync", "cudaFreeAsync_ptsz"];
    MallocHost = 6, Runtime, "cudaMallocHost", OUT0, ["cudaMallocHost"];
    HostAlloc = 7, Runtime, "cudaHostAlloc", OUT0, ["cudaHostAlloc"];
    FreeHost = 8, Runtime, "cudaFreeHost", NONE, ["cudaFreeHost"];
    LaunchKernel = 10, Runtime, "cudaLaunchKernel", STACK, ["cudaLaunchKernel", "cudaLaunchKernel_ptsz"];
    LaunchKernelExC = 11, Runtime, "cudaLaunchKernelExC", OpFlags::LAUNCH_CONFIG,
        ["cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz"];
    LaunchCooperativeKernel = 12, Runtime, "cudaLaunchCooperativeKernel", STACK,
        ["cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz"];
    GraphLaunch = 13, Runtime, "cudaGraphLaunch", NONE, ["cudaGraphLaunch", "cudaGraphLaunch_ptsz"];
    StreamBeginCapture = 14, Runtime, "cudaStreamBeginCapture", NONE,
        ["cudaStreamBeginCapture", "cudaStreamBeginCapture_ptsz"];
    StreamBeginCaptureToGraph = 15, Runtime, "cudaStreamBeginCaptureToGraph", NONE,
        ["cudaStreamBeginCaptureToGraph", "cudaStreamBeginCaptureToGraph_ptsz"];
    StreamEndCapture = 16, Runtime, "cudaStreamEndCapture", OUT1,
        ["cudaStreamEndCapture", "cudaStreamEndCapture_ptsz"];
    GraphInstantiate = 17, Runtime, "cudaGraphInstantiate", OUT0, ["cudaGraphInstantiate"];
    GraphInstantiateWithFlags = 18, Runtime, "cudaGraphInstantiateWithFlags", OUT0,
        ["cudaGraphInstantiateWithFlags"];
    GraphInstantiateWithParams = 19, Runtime, "cudaGraphInstantiateWithParams", OUT0,
        ["cudaGraphInstantiateWithParams", "cudaGraphInstantiateWithParams_ptsz"];
    Memcpy = 20, Runtime, "cudaMemcpy", NONE, ["cudaMemcpy", "cudaMemcpy_ptds"];
    MemcpyAsync = 21, Runtime, "cudaMemcpyAsync", NONE, ["cudaMemcpyAsync", "cudaMemcpyAsync_ptsz"];
    Memcpy2D = 22, Runtime, "cudaMemcpy2D", STACK, ["cudaMemcpy2D", "cudaMemcpy2D_ptds"];
    Memcpy2DAsync = 23, Runtime, "cudaMemcpy2DAsync", STACK, ["cudaMemcpy2DAsync", "cudaMemcpy2DAsync_ptsz"];
    MemcpyPeer = 24, Runtime, "cudaMemcpyPeer", NONE, ["cudaMemcpyPeer"];
    MemcpyPeerAsync = 25, Runtime, "cudaMemcpyPeerAsync", NONE, ["cudaMemcpyPeerAsync"];
    Memset = 26, Runtime, "cudaMemset", NONE, ["cudaMemset", "cudaMemset_ptds"];
    MemsetAsync = 27, Runtime, "cudaMemsetAsync", NONE, ["cudaMemsetAsync", "cudaMemsetAsync_ptsz"];
    StreamSynchronize = 30, Runtime, "cudaStreamSynchronize", NONE,
        ["cudaStreamSynchronize", "cudaStreamSynchronize_ptsz"];
    DeviceSynchronize = 31, Runtime, "cudaDeviceSynchronize", NONE, ["cudaDeviceSynchronize"];
    EventSynchronize = 32, Runtime, "cudaEventSynchronize", NONE, ["cudaEventSynchronize"];
    RegisterFunction = 40, Runtime, "__cudaRegisterFunction", OpFlags::REGISTER,
        ["__cudaRegisterFunction"];
    GetKernel = 41, Runtime, "__cudaGetKernel", OpFlags(ALIAS.0 | OpFlags::NO_EVENT.0),
        ["__cudaGetKernel"];
    // Page-locking memory the caller already has (ptr, size, flags in registers: no flags).
    HostRegister = 50, Runtime, "cudaHostRegister", NONE, ["cudaHostRegister"];
    HostUnregister = 51, Runtime, "cudaHostUnregister", NONE, ["cudaHostUnregister"];

    // The driver, libcuda.so.1.
    CuLaunchKernel = 100, Driver, "cuLaunchKernel", DRIVER_LAUNCH, ["cuLaunchKernel", "cuLaunchKernel_ptsz"];
    CuLaunchKernelEx = 101, Driver, "cuLaunchKernelEx", OpFlags::DRIVER_LAUNCH_CONFIG,
        ["cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"];
    CuLaunchCooperativeKernel = 102, Driver, "cuLaunchCooperativeKernel", DRIVER_LAUNCH,
        ["cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"];
    CuGraphLaunch = 103, Driver, "cuGraphLaunch", NONE, ["cuGraphLaunch", "cuGraphLaunch_ptsz"];
    CuStreamBeginCapture = 104, Driver, "cuStreamBeginCapture", NONE,
        ["cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"]
        legacy ["cuStreamBeginCapture", "cuStreamBeginCapture_ptsz"];
    CuStreamEndCapture = 105, Driver, "cuStreamEndCapture", OUT1,
        ["cuStreamEndCapture", "cuStreamEndCapture_ptsz"];
    CuGraphInstantiate = 106, Driver, "cuGraphInstantiate", OUT0,
        ["cuGraphInstantiate_v2", "cuGraphInstantiate"];
    CuGraphInstantiateWithFlags = 107, Driver, "cuGraphInstantiateWithFlags", OUT0,
        ["cuGraphInstantiateWithFlags"];
    CuGraphInstantiateWithParams = 108, Driver, "cuGraphInstantiateWithParams", OUT0,
        ["cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"];

    CuMemAlloc = 110, Driver, "cuMemAlloc", ALLOC, ["cuMemAlloc_v2"] legacy ["cuMemAlloc"];
    CuMemAllocAsync = 111, Driver, "cuMemAllocAsync", ALLOC, ["cuMemAllocAsync", "cuMemAllocAsync_ptsz"];
    CuMemAllocFromPoolAsync = 112, Driver, "cuMemAllocFromPoolAsync", ALLOC,
        ["cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"];
    CuMemAllocManaged = 113, Driver, "cuMemAllocManaged", ALLOC, ["cuMemAllocManaged"];
    CuMemAllocPitch = 114, Driver, "cuMemAllocPitch", OUT0, ["cuMemAllocPitch_v2"] legacy ["cuMemAllocPitch"];
    CuMemAllocHost = 115, Driver, "cuMemAllocHost", OUT0, ["cuMemAllocHost_v2"] legacy ["cuMemAllocHost"];
    CuMemHostAlloc = 116, Driver, "cuMemHostAlloc", OUT0, ["cuMemHostAlloc"];
    CuMemFree = 117, Driver, "cuMemFree", FREE, ["cuMemFree_v2"] legacy ["cuMemFree"];
    CuMemFreeAsync = 118, Driver, "cuMemFreeAsync", FREE, ["cuMemFreeAsync", "cuMemFreeAsync_ptsz"];
    CuMemFreeHost = 119, Driver, "cuMemFreeHost", NONE, ["cuMemFreeHost"];

    CuMemcpy = 120, Driver, "cuMemcpy", NONE, ["cuMemcpy", "cuMemcpy_ptds"];
    CuMemcpyAsync = 121, Driver, "cuMemcpyAsync", NONE, ["cuMemcpyAsync", "cuMemcpyAsync_ptsz"];
    CuMemcpyHtoD = 122, Driver, "cuMemcpyHtoD", NONE, ["cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"]
        legacy ["cuMemcpyHtoD"];
    CuMemcpyDtoH = 123, Driver, "cuMemcpyDtoH", NONE, ["cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"]
        legacy ["cuMemcpyDtoH"];
    CuMemcpyDtoD = 124, Driver, "cuMemcpyDtoD", NONE, ["cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds"]
        legacy ["cuMemcpyDtoD"];
    CuMemcpyHtoDAsync = 125, Driver, "cuMemcpyHtoDAsync", NONE,
        ["cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"] legacy ["cuMemcpyHtoDAsync"];
    CuMemcpyDtoHAsync = 126, Driver, "cuMemcpyDtoHAsync", NONE,
        ["cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz"] legacy ["cuMemcpyDtoHAsync"];
    CuMemcpyDtoDAsync = 127, Driver, "cuMemcpyDtoDAsync", NONE,
        ["cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz"] legacy ["cuMemcpyDtoDAsync"];
    CuMemcpyPeer = 128, Driver, "cuMemcpyPeer", NONE, ["cuMemcpyPeer", "cuMemcpyPeer_ptds"];
    CuMemcpyPeerAsync = 129, Driver, "cuMemcpyPeerAsync", NONE,
        ["cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz"];
    CuMemcpy2D = 130, Driver, "cuMemcpy2D", DESC_2D, ["cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds"]
        legacy ["cuMemcpy2D"];
    CuMemcpy2DAsync = 131, Driver, "cuMemcpy2DAsync", DESC_2D,
        ["cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz"] legacy ["cuMemcpy2DAsync"];
    CuMemcpy2DUnaligned = 132, Driver, "cuMemcpy2DUnaligned", DESC_2D,
        ["cuMemcpy2DUnaligned_v2", "cuMemcpy2DUnaligned_v2_ptds"] legacy ["cuMemcpy2DUnaligned"];
    CuMemcpy3D = 133, Driver, "cuMemcpy3D", DESC_3D, ["cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds"]
        legacy ["cuMemcpy3D"];
    CuMemcpy3DAsync = 134, Driver, "cuMemcpy3DAsync", DESC_3D,
        ["cuMemcpy3DAsync_v2", "cuMemcpy3DAsync_v2_ptsz"] legacy ["cuMemcpy3DAsync"];
    CuMemcpy3DPeer = 135, Driver, "cuMemcpy3DPeer", DESC_3D, ["cuMemcpy3DPeer", "cuMemcpy3DPeer_ptds"];
    CuMemcpy3DPeerAsync = 136, Driver, "cuMemcpy3DPeerAsync", DESC_3D,
        ["cuMemcpy3DPeerAsync", "cuMemcpy3DPeerAsync_ptsz"];
    CuMemcpyAtoA = 137, Driver, "cuMemcpyAtoA", NONE, ["cuMemcpyAtoA_v2", "cuMemcpyAtoA_v2_ptds"]
        legacy ["cuMemcpyAtoA"];
    CuMemcpyAtoD = 138, Driver, "cuMemcpyAtoD", NONE, ["cuMemcpyAtoD_v2", "cuMemcpyAtoD_v2_ptds"]
        legacy ["cuMemcpyAtoD"];
    CuMemcpyAtoH = 139, Driver, "cuMemcpyAtoH", NONE, ["cuMemcpyAtoH_v2", "cuMemcpyAtoH_v2_ptds"]
        legacy ["cuMemcpyAtoH"];
    CuMemcpyAtoHAsync = 140, Driver, "cuMemcpyAtoHAsync", NONE,
        ["cuMemcpyAtoHAsync_v2", "cuMemcpyAtoHAsync_v2_ptsz"] legacy ["cuMemcpyAtoHAsync"];
    CuMemcpyDtoA = 141, Driver, "cuMemcpyDtoA", NONE, ["cuMemcpyDtoA_v2", "cuMemcpyDtoA_v2_ptds"]
        legacy ["cuMemcpyDtoA"];
    CuMemcpyHtoA = 142, Driver, "cuMemcpyHtoA", NONE, ["cuMemcpyHtoA_v2", "cuMemcpyHtoA_v2_ptds"]
        legacy ["cuMemcpyHtoA"];
    CuMemcpyHtoAAsync = 143, Driver, "cuMemcpyHtoAAsync", NONE,
        ["cuMemcpyHtoAAsync_v2", "cuMemcpyHtoAAsync_v2_ptsz"] legacy ["cuMemcpyHtoAAsync"];

    CuMemsetD8 = 150, Driver, "cuMemsetD8", NONE, ["cuMemsetD8_v2", "cuMemsetD8_v2_ptds"] legacy ["cuMemsetD8"];
    CuMemsetD16 = 151, Driver, "cuMemsetD16", NONE, ["cuMemsetD16_v2", "cuMemsetD16_v2_ptds"]
        legacy ["cuMemsetD16"];
    CuMemsetD32 = 152, Driver, "cuMemsetD32", NONE, ["cuMemsetD32_v2", "cuMemsetD32_v2_ptds"]
        legacy ["cuMemsetD32"];
    CuMemsetD8Async = 153, Driver, "cuMemsetD8Async", NONE, ["cuMemsetD8Async", "cuMemsetD8Async_ptsz"];
    CuMemsetD16Async = 154, Driver, "cuMemsetD16Async", NONE,
        ["cuMemsetD16Async", "cuMemsetD16Async_ptsz"];
    CuMemsetD32Async = 155, Driver, "cuMemsetD32Async", NONE,
        ["cuMemsetD32Async", "cuMemsetD32Async_ptsz"];
    CuMemsetD2D8 = 156, Driver, "cuMemsetD2D8", NONE, ["cuMemsetD2D8_v2", "cuMemsetD2D8_v2_ptds"]
        legacy ["cuMemsetD2D8"];
    CuMemsetD2D16 = 157, Driver, "cuMemsetD2D16", NONE, ["cuMemsetD2D16_v2", "cuMemsetD2D16_v2_ptds"]
        legacy ["cuMemsetD2D16"];
    CuMemsetD2D32 = 158, Driver, "cuMemsetD2D32", NONE, ["cuMemsetD2D32_v2", "cuMemsetD2D32_v2_ptds"]
        legacy ["cuMemsetD2D32"];
    CuMemsetD2D8Async = 159, Driver, "cuMemsetD2D8Async", NONE,
        ["cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz"];
    CuMemsetD2D16Async = 160, Driver, "cuMemsetD2D16Async", NONE,
        ["cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz"];
    CuMemsetD2D32Async = 161, Driver, "cuMemsetD2D32Async", NONE,
        ["cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz"];

    CuStreamSynchronize = 170, Driver, "cuStreamSynchronize", NONE,
        ["cuStreamSynchronize", "cuStreamSynchronize_ptsz"];
    CuCtxSynchronize = 171, Driver, "cuCtxSynchronize", NONE, ["cuCtxSynchronize", "cuCtxSynchronize_v2"];
    CuEventSynchronize = 172, Driver, "cuEventSynchronize", NONE, ["cuEventSynchronize"];

    CuModuleLoad = 180, Driver, "cuModuleLoad", OUT0, ["cuModuleLoad"];
    CuModuleLoadData = 181, Driver, "cuModuleLoadData", OUT0, ["cuModuleLoadData"];
    CuModuleLoadDataEx = 182, Driver, "cuModuleLoadDataEx", OUT0, ["cuModuleLoadDataEx"];
    CuModuleLoadFatBinary = 183, Driver, "cuModuleLoadFatBinary", OUT0, ["cuModuleLoadFatBinary"];
    CuModuleGetFunction = 184, Driver, "cuModuleGetFunction", GET_FUNCTION, ["cuModuleGetFunction"];
    CuLibraryLoadData = 185, Driver, "cuLibraryLoadData", OUT0, ["cuLibraryLoadData"];
    CuLibraryLoadFromFile = 186, Driver, "cuLibraryLoadFromFile", OUT0, ["cuLibraryLoadFromFile"];
    CuLibraryGetKernel = 187, Driver, "cuLibraryGetKernel", GET_FUNCTION, ["cuLibraryGetKernel"];
    CuKernelGetFunction = 188, Driver, "cuKernelGetFunction", ALIAS, ["cuKernelGetFunction"];

    // Page-locking memory the caller already has. The unsuffixed cuMemHostRegister (from before
    // CUDA 6.5) has the `_v2` signature (void *, size_t, unsigned), so it is no legacy export.
    CuMemHostRegister = 190, Driver, "cuMemHostRegister", NONE,
        ["cuMemHostRegister_v2", "cuMemHostRegister"];
    CuMemHostUnregister = 191, Driver, "cuMemHostUnregister", NONE, ["cuMemHostUnregister"];

    // Virtual memory management: physical memory is created as a handle and mapped into an
    // address range reserved apart (PyTorch's expandable segments, NCCL's buffers since 2.19,
    // vLLM's sleep mode). None of it goes through cuMemAlloc. The handle a call creates,
    // retains or imports is its `out`; the range a reservation returns too.
    CuMemCreate = 192, Driver, "cuMemCreate", OpFlags(OUT0.0 | OpFlags::ALLOC_PROP.0), ["cuMemCreate"];
    CuMemRelease = 193, Driver, "cuMemRelease", NONE, ["cuMemRelease"];
    CuMemMap = 194, Driver, "cuMemMap", NONE, ["cuMemMap"];
    CuMemUnmap = 195, Driver, "cuMemUnmap", NONE, ["cuMemUnmap"];
    CuMemRetainAllocationHandle = 196, Driver, "cuMemRetainAllocationHandle", OUT0,
        ["cuMemRetainAllocationHandle"];
    CuMemImportFromShareableHandle = 197, Driver, "cuMemImportFromShareableHandle", OUT0,
        ["cuMemImportFromShareableHandle"];
    CuMemAddressReserve = 198, Driver, "cuMemAddressReserve", OUT0, ["cuMemAddressReserve"];
    CuMemAddressFree = 199, Driver, "cuMemAddressFree", NONE, ["cuMemAddressFree"];
    // Makes a mapped range accessible to devices: updates page tables on each device asked, the
    // slow part of growing an expandable segment.
    CuMemSetAccess = 200, Driver, "cuMemSetAccess", NONE, ["cuMemSetAccess"];

    // NCCL, libnccl.so.2. Collectives return once their work is queued on the stream, so their
    // time is the host's enqueue (and, the first time on a communicator, its connections); the
    // wait for peers is in the synchronisation that follows. The `Config` exports (NCCL 2.29+)
    // take the same arguments and one more. ncclBcast is not probed: it is one call to
    // ncclBroadcast, which is.
    NcclAllReduce = 210, Nccl, "ncclAllReduce", STACK, ["ncclAllReduce", "ncclAllReduceConfig"];
    NcclBroadcast = 211, Nccl, "ncclBroadcast", STACK, ["ncclBroadcast", "ncclBroadcastConfig"];
    NcclReduce = 212, Nccl, "ncclReduce", STACK, ["ncclReduce", "ncclReduceConfig"];
    NcclAllGather = 213, Nccl, "ncclAllGather", NONE, ["ncclAllGather", "ncclAllGatherConfig"];
    NcclReduceScatter = 214, Nccl, "ncclReduceScatter", STACK,
        ["ncclReduceScatter", "ncclReduceScatterConfig"];
    NcclAlltoAll = 215, Nccl, "ncclAlltoAll", NONE, ["ncclAlltoAll", "ncclAlltoAllConfig"];
    NcclGather = 216, Nccl, "ncclGather", STACK, ["ncclGather", "ncclGatherConfig"];
    NcclScatter = 217, Nccl, "ncclScatter", STACK, ["ncclScatter", "ncclScatterConfig"];
    NcclSend = 220, Nccl, "ncclSend", NONE, ["ncclSend"];
    NcclRecv = 221, Nccl, "ncclRecv", NONE, ["ncclRecv"];
    NcclGroupStart = 225, Nccl, "ncclGroupStart", NONE, ["ncclGroupStart"];
    NcclGroupEnd = 226, Nccl, "ncclGroupEnd", NONE, ["ncclGroupEnd"];
    // Communicators. The unique id is passed by value (128 bytes on the stack, no register):
    // the stack words are its first 16 bytes (the root's random magic and address), the same
    // on every rank; `rank` is in the third register.
    NcclCommInitRank = 230, Nccl, "ncclCommInitRank", STACK_OUT0, ["ncclCommInitRank"];
    NcclCommInitRankConfig = 231, Nccl, "ncclCommInitRankConfig", STACK_OUT0,
        ["ncclCommInitRankConfig"];
    NcclCommInitRankScalable = 232, Nccl, "ncclCommInitRankScalable", OUT0,
        ["ncclCommInitRankScalable"];
    NcclCommInitAll = 233, Nccl, "ncclCommInitAll", OUT0, ["ncclCommInitAll"];
    NcclCommSplit = 234, Nccl, "ncclCommSplit", OUT3, ["ncclCommSplit"];
    NcclCommShrink = 235, Nccl, "ncclCommShrink", OUT3, ["ncclCommShrink"];
    NcclCommFinalize = 236, Nccl, "ncclCommFinalize", NONE, ["ncclCommFinalize"];
    NcclCommDestroy = 237, Nccl, "ncclCommDestroy", NONE, ["ncclCommDestroy"];
    NcclCommAbort = 238, Nccl, "ncclCommAbort", NONE, ["ncclCommAbort"];
}

/// Upper bound on `CudaOp` values, for arrays indexed by op.
pub const MAX_OP: usize = 256;

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    #[test]
    fn ids_are_unique_and_round_trip() {
        for (i, op) in CudaOp::ALL.iter().enumerate() {
            assert_eq!(CudaOp::from_u16(*op as u16), Some(*op));
            assert!((*op as usize) < MAX_OP);
            for other in &CudaOp::ALL[i + 1..] {
                assert_ne!(*op as u16, *other as u16);
            }
        }
    }

    #[test]
    fn cookie_round_trips() {
        for op in CudaOp::ALL {
            for (symbol, flags, variant) in op.exports() {
                let c = cookie(*op, flags, variant);
                let (raw, f) = split_cookie(c);
                assert_eq!(raw, *op as u16);
                assert_eq!(f, flags);
                assert_eq!(op.symbol(cookie_variant(c)), Some(symbol));
            }
        }
    }

    #[test]
    fn every_symbol_is_the_op_name_with_a_known_suffix() {
        let suffixes = [
            "", "_v2", "_ptsz", "_ptds", "_v2_ptsz", "_v2_ptds", "Config",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for op in CudaOp::ALL {
            for symbol in op.symbols().iter().chain(op.legacy_symbols()) {
                let suffix = symbol.strip_prefix(op.name()).expect(symbol);
                assert!(suffixes.contains(&suffix), "{symbol}");
                assert!(seen.insert(*symbol), "{symbol} listed twice");
            }
            assert!(op.symbols().len() + op.legacy_symbols().len() <= 255);
        }
    }

    #[test]
    fn legacy_exports_never_dereference_with_the_modern_layout() {
        for (symbol, flags, variant) in CudaOp::CuMemAlloc.exports() {
            assert_eq!(
                CudaOp::CuMemAlloc.is_legacy(variant.into()),
                symbol == "cuMemAlloc"
            );
            if symbol == "cuMemAlloc" {
                assert!(!flags.contains(OpFlags::ALLOC));
            } else {
                assert!(flags.contains(OpFlags::ALLOC));
            }
        }
        assert_eq!(CudaOp::CuMemAlloc.symbol(2), None);
    }

    #[test]
    fn ops_live_in_the_library_their_name_says() {
        for op in CudaOp::ALL {
            let runtime = op.name().starts_with("cuda") || op.name().starts_with("__cuda");
            let nccl = op.name().starts_with("nccl");
            assert_eq!(op.library() == CudaLibrary::Runtime, runtime, "{op:?}");
            assert_eq!(op.library() == CudaLibrary::Nccl, nccl, "{op:?}");
            assert!(!op.is_collective() || nccl, "{op:?}");
        }
    }

    #[test]
    fn every_flag_and_the_largest_variant_survive_the_cookie() {
        let all = OpFlags(u32::MAX);
        let c = cookie(CudaOp::NcclCommSplit, all, u8::MAX);
        assert_eq!(split_cookie(c), (CudaOp::NcclCommSplit as u16, all));
        assert_eq!(cookie_variant(c), u8::MAX as u16);
    }
}
