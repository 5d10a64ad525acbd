//! The benchmarks' shared workload: ring-buffer records built exactly as the kernel builds
//! them (a launch-dominated mix), fed to the pipeline with no kernel in the loop.

#![allow(dead_code, reason = "each benchmark uses part of it")]

use ingero_agent::decode;
use ingero_ebpf::{
    COMM_LEN, CudaOp, CudaRecord, OffCpuReason, OffCpuRecord, RecordHeader, RecordKind,
};

pub const RECORDS: usize = 1_000_000;

pub fn header(kind: RecordKind, op: u16, i: u64) -> RecordHeader {
    let mut comm = [0u8; COMM_LEN];
    comm[..7].copy_from_slice(b"python3");
    RecordHeader {
        kind: kind as u16,
        op,
        cpu: (i % 2) as u32,
        ts_ns: 1_000_000 + i * 1000,
        tgid: 4242,
        tid: 4242 + (i % 4) as u32,
        cgroup_id: 1,
        comm,
    }
}

/// A launch-dominated mix: 70% launches, 10% memcpy, 10% stream syncs, 5% malloc/free,
/// 5% off-CPU intervals.
pub fn records() -> Vec<Vec<u8>> {
    (0..RECORDS as u64)
        .map(|i| {
            let cuda = |op: CudaOp, args: [u64; 8]| {
                let r = CudaRecord {
                    header: header(RecordKind::Cuda, op as u16, i),
                    duration_ns: 3000 + i % 500,
                    ret: 0,
                    args,
                    out: 0,
                    parent_op: 0,
                    variant: 0,
                    depth: 0,
                };
                decode::record_bytes(&r).to_vec()
            };
            match i % 20 {
                0..14 => cuda(
                    CudaOp::LaunchKernel,
                    [0x1234, 16 | 4 << 32, 1, 32 | 8 << 32, 1, 0, 1024, 0xabcd],
                ),
                14 | 15 => cuda(CudaOp::MemcpyAsync, [1, 2, 4096, 1, 0xabcd, 0, 0, 0]),
                16 | 17 => cuda(CudaOp::StreamSynchronize, [0xabcd, 0, 0, 0, 0, 0, 0, 0]),
                18 => cuda(
                    CudaOp::Malloc,
                    [0x7ff0, 1 << 20, 0, 0, 0, 0, 0xd000_0000, 0],
                ),
                _ => {
                    let r = OffCpuRecord {
                        header: header(RecordKind::OffCpu, 0, i),
                        duration_ns: 50_000,
                        prev_state: 0x100,
                        reason: OffCpuReason::Preempted as u32,
                        next_tid: 7,
                        next_comm: [b'k'; COMM_LEN],
                    };
                    decode::record_bytes(&r).to_vec()
                }
            }
        })
        .collect()
}
