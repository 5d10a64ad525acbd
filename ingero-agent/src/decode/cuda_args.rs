//! Naming the raw argument words of each CUDA op (x86-64 System V: rdi, rsi, rdx, rcx, r8, r9,
//! then the stack) as the probes capture them.

use ingero_ebpf::{ALLOC_PTR_SLOT, CudaOp, FREE_SIZE_SLOT, MAX_ARGS};
use ingero_trace::model::{CudaArgs, MemcpyKind};

fn dim3(xy: u64, z: u64) -> [u32; 3] {
    [xy as u32, (xy >> 32) as u32, z as u32]
}

/// Names the raw argument words of `op` as the probe captured them.
pub fn cuda_args(op: CudaOp, a: &[u64; MAX_ARGS], ret: i32) -> CudaArgs {
    use CudaOp::*;
    match op {
        Malloc | MallocManaged | MallocAsync => CudaArgs::Alloc {
            size: a[1],
            ptr: (ret == 0).then_some(a[ALLOC_PTR_SLOT]),
            stream: (op == MallocAsync).then_some(a[2]),
        },
        Free | FreeAsync => CudaArgs::Free {
            ptr: a[0],
            size: (a[FREE_SIZE_SLOT] != 0).then_some(a[FREE_SIZE_SLOT]),
            stream: (op == FreeAsync).then_some(a[1]),
        },
        MallocHost | HostAlloc => CudaArgs::HostAlloc { size: a[1] },
        FreeHost => CudaArgs::HostFree { ptr: a[0] },
        LaunchKernel | LaunchCooperativeKernel | LaunchKernelExC => CudaArgs::Launch {
            func: a[0],
            grid: dim3(a[1], a[2]),
            block: dim3(a[3], a[4]),
            shared_mem: a[6],
            stream: a[7],
        },
        GraphLaunch => CudaArgs::GraphLaunch {
            graph_exec: a[0],
            stream: a[1],
        },
        Memcpy | MemcpyAsync => CudaArgs::Memcpy {
            count: a[2],
            kind: MemcpyKind::from_raw(a[3]),
            stream: (op == MemcpyAsync).then_some(a[4]),
            width_height: None,
        },
        Memcpy2D | Memcpy2DAsync => CudaArgs::Memcpy {
            count: a[4].saturating_mul(a[5]),
            kind: MemcpyKind::from_raw(a[6]),
            stream: (op == Memcpy2DAsync).then_some(a[7]),
            width_height: Some((a[4], a[5])),
        },
        MemcpyPeer | MemcpyPeerAsync => CudaArgs::MemcpyPeer {
            count: a[4],
            dst_device: a[1] as i32,
            src_device: a[3] as i32,
            stream: (op == MemcpyPeerAsync).then_some(a[5]),
        },
        Memset | MemsetAsync => CudaArgs::Memset {
            count: a[2],
            stream: (op == MemsetAsync).then_some(a[3]),
        },
        StreamSynchronize => CudaArgs::Sync {
            stream: Some(a[0]),
            event: None,
        },
        EventSynchronize => CudaArgs::Sync {
            stream: None,
            event: Some(a[0]),
        },
        DeviceSynchronize => CudaArgs::Sync {
            stream: None,
            event: None,
        },
    }
}
