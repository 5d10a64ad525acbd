//! The CUDA runtime operations ingero traces, the exported symbols that implement them, and the
//! per-op flags the eBPF programs act on.
//!
//! One uprobe program and one uretprobe program serve every symbol: the attach cookie carries
//! `op | flags << 16`, so the kernel side knows which extra work a call needs (stack arguments,
//! a launch config to read, an allocation to remember) without a program per function.

/// Flags carried in the upper half of the attach cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpFlags(pub u16);

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

    pub const fn contains(self, other: OpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 | other.0)
    }
}

/// Encodes an op and its flags as a uprobe attach cookie.
pub const fn cookie(op: CudaOp, flags: OpFlags) -> u64 {
    (op as u64) | ((flags.0 as u64) << 16)
}

/// Splits a cookie back into the raw op value and its flags.
pub const fn split_cookie(cookie: u64) -> (u16, OpFlags) {
    (
        (cookie & 0xffff) as u16,
        OpFlags(((cookie >> 16) & 0xffff) as u16),
    )
}

/// The NVIDIA library an op's symbols live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CudaLibrary {
    /// The CUDA runtime, `libcudart.so*` (the `cuda*` and `__cuda*` functions).
    Runtime,
    /// The CUDA driver, `libcuda.so.1` (the `cu*` functions).
    Driver,
}

impl CudaLibrary {
    /// Both libraries, runtime first.
    pub const ALL: [CudaLibrary; 2] = [CudaLibrary::Runtime, CudaLibrary::Driver];

    /// The library's file name stem, as users know it.
    pub const fn name(self) -> &'static str {
        match self {
            CudaLibrary::Runtime => "libcudart",
            CudaLibrary::Driver => "libcuda",
        }
    }
}

macro_rules! cuda_ops {
    ($( $variant:ident = $id:literal, $lib:ident, $name:literal, $flags:expr, [$($sym:literal),+ $(,)?] );+ $(;)?) => {
        /// A traced CUDA runtime operation. Per-thread-stream variants (`_ptsz`, `_ptds`) map to
        /// the same op as their base name.
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

            /// Every exported symbol that implements this op.
            pub const fn symbols(self) -> &'static [&'static str] {
                match self { $(CudaOp::$variant => &[$($sym),+]),+ }
            }
        }
    };
}

const STACK: OpFlags = OpFlags::STACK_ARGS;
const NONE: OpFlags = OpFlags::NONE;

cuda_ops! {
    Malloc = 1, Runtime, "cudaMalloc", OpFlags::ALLOC, ["cudaMalloc"];
    Free = 2, Runtime, "cudaFree", OpFlags::FREE, ["cudaFree"];
    MallocManaged = 3, Runtime, "cudaMallocManaged", OpFlags::ALLOC, ["cudaMallocManaged"];
    MallocAsync = 4, Runtime, "cudaMallocAsync", OpFlags::ALLOC, ["cudaMallocAsync", "cudaMallocAsync_ptsz"];
    FreeAsync = 5, Runtime, "cudaFreeAsync", OpFlags::FREE, ["cudaFreeAsync", "cudaFreeAsync_ptsz"];
    MallocHost = 6, Runtime, "cudaMallocHost", NONE, ["cudaMallocHost"];
    HostAlloc = 7, Runtime, "cudaHostAlloc", NONE, ["cudaHostAlloc"];
    FreeHost = 8, Runtime, "cudaFreeHost", NONE, ["cudaFreeHost"];
    LaunchKernel = 10, Runtime, "cudaLaunchKernel", STACK, ["cudaLaunchKernel", "cudaLaunchKernel_ptsz"];
    LaunchKernelExC = 11, Runtime, "cudaLaunchKernelExC", OpFlags::LAUNCH_CONFIG,
        ["cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz"];
    LaunchCooperativeKernel = 12, Runtime, "cudaLaunchCooperativeKernel", STACK,
        ["cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz"];
    GraphLaunch = 13, Runtime, "cudaGraphLaunch", NONE, ["cudaGraphLaunch", "cudaGraphLaunch_ptsz"];
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
}

/// Upper bound on `CudaOp` values, for arrays indexed by op.
pub const MAX_OP: usize = 64;

#[cfg(test)]
mod tests {
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
            let (raw, flags) = split_cookie(cookie(*op, op.flags()));
            assert_eq!(raw, *op as u16);
            assert_eq!(flags, op.flags());
        }
    }

    #[test]
    fn every_op_lists_its_canonical_name_first() {
        for op in CudaOp::ALL {
            assert_eq!(op.symbols()[0], op.name());
        }
    }
}
