//! Reading a CUDA call's arguments at entry: the registers, the user stack (7th argument on),
//! and the structures some calls take by pointer (launch configs, copy descriptors). Every
//! op's words end up in the slot layout `ingero_agent::decode` names, so a driver launch and a
//! runtime launch share one: func, grid xy, grid z, block xy, block z, -, shared memory, stream.

use aya_ebpf::{helpers::bpf_probe_read_user, programs::ProbeContext};
use ingero_ebpf::{MAX_ARGS, OpFlags, counters};

use super::context::count;

/// `cudaLaunchConfig_t` and `CUlaunchConfig` up to the fields ingero reads (offsets checked
/// against cuda.h 12.9 with `offsetof`: grid@0, block@12, shared memory@24, stream@32). The
/// driver's shared memory is a `u32` followed by padding, so it is masked for driver ops.
#[repr(C)]
#[derive(Clone, Copy)]
struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u64,
    stream: u64,
}

/// Where a copy descriptor keeps what ingero reads: the source and destination memory types
/// (`CUmemorytype`, u32) and the width in bytes, height (and depth) as consecutive u64s.
/// Offsets checked against cuda.h 12.9 with `offsetof`; only these fields are read, so the
/// 128- and 200-byte structures never sit on the 512-byte eBPF stack.
struct Descriptor {
    src_type: u64,
    dst_type: u64,
    dims: u64,
}

/// `CUDA_MEMCPY2D`.
const COPY_2D: Descriptor = Descriptor {
    src_type: 16,
    dst_type: 72,
    dims: 112,
};

/// `CUDA_MEMCPY3D` and `CUDA_MEMCPY3D_PEER` (the same offsets).
const COPY_3D: Descriptor = Descriptor {
    src_type: 32,
    dst_type: 120,
    dims: 176,
};

/// Where `CUmemAllocationProp` keeps its `CUmemLocation` (type: u32, id: i32), checked with
/// `offsetof` against the cuda.h of CUDA 12.9 and 13.
const ALLOC_PROP_LOCATION: u64 = 8;

/// Reads `T` from user memory, counting a failure.
#[inline(always)]
fn user<T>(addr: u64) -> Option<T> {
    // SAFETY: reads of user memory through the checked helper; failure is handled.
    match unsafe { bpf_probe_read_user(addr as *const T) } {
        Ok(v) => Some(v),
        Err(_) => {
            count(counters::ARG_READ_FAILED);
            None
        }
    }
}

#[inline(always)]
fn pack(lo: u32, hi: u32) -> u64 {
    lo as u64 | (hi as u64) << 32
}

/// The argument words of a call at entry, per its flags.
#[inline(always)]
pub fn read(ctx: &ProbeContext, flags: OpFlags) -> [u64; MAX_ARGS] {
    // SAFETY: `regs` is the probe's saved register set.
    let regs = unsafe { &*ctx.regs };
    let mut args: [u64; MAX_ARGS] = [
        regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9, 0, 0,
    ];
    // At entry [rsp] is the return address; the 7th argument and the next follow it.
    let stack = regs.rsp + 8;
    if flags.contains(OpFlags::STACK_ARGS) {
        if let Some(words) = user::<[u64; 2]>(stack) {
            args[6] = words[0];
            args[7] = words[1];
        }
    }
    if flags.contains(OpFlags::DRIVER_LAUNCH) {
        // cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, …): blockDimZ and
        // sharedMemBytes are 32-bit values in 8-byte slots whose upper halves are garbage.
        if let Some(words) = user::<[u64; 3]>(stack) {
            args = [
                args[0],
                pack(args[1] as u32, args[2] as u32),
                args[3] as u32 as u64,
                pack(args[4] as u32, args[5] as u32),
                words[0] as u32 as u64,
                0,
                words[1] as u32 as u64,
                words[2],
            ];
        }
    }
    let config = flags.contains(OpFlags::LAUNCH_CONFIG);
    let driver_config = flags.contains(OpFlags::DRIVER_LAUNCH_CONFIG);
    if config || driver_config {
        let config_ptr = args[0];
        if let Some(c) = user::<LaunchConfig>(config_ptr) {
            let shared_mem = if driver_config {
                c.shared_mem as u32 as u64
            } else {
                c.shared_mem
            };
            args = [
                args[1],
                pack(c.grid[0], c.grid[1]),
                c.grid[2] as u64,
                pack(c.block[0], c.block[1]),
                c.block[2] as u64,
                config_ptr,
                shared_mem,
                c.stream,
            ];
        }
    }
    if flags.contains(OpFlags::DESC_2D) {
        let d = args[0];
        if let Some([w, h]) = user::<[u64; 2]>(d + COPY_2D.dims) {
            args[4] = w;
            args[5] = h;
        }
        args[6] = memory_types(d, &COPY_2D);
    }
    if flags.contains(OpFlags::ALLOC_PROP) {
        // Unread (0, the invalid location type) when the pointer is bad: the call fails too.
        args[2] = user::<[u32; 2]>(args[2] + ALLOC_PROP_LOCATION).map_or(0, |[t, id]| pack(t, id));
    }
    if flags.contains(OpFlags::DESC_3D) {
        let d = args[0];
        if let Some([w, h, depth]) = user::<[u64; 3]>(d + COPY_3D.dims) {
            args[3] = depth;
            args[4] = w;
            args[5] = h;
        }
        args[6] = memory_types(d, &COPY_3D);
    }
    args
}

/// A descriptor's source and destination memory types, packed source low.
#[inline(always)]
fn memory_types(descriptor: u64, layout: &Descriptor) -> u64 {
    let src = user::<u32>(descriptor + layout.src_type).unwrap_or(0);
    let dst = user::<u32>(descriptor + layout.dst_type).unwrap_or(0);
    pack(src, dst)
}
