//! Drain capacity: the user-space pipeline after the ring buffers (decode, statistics, and
//! optionally `--json` rendering) fed from records built exactly as the kernel builds them, with
//! no kernel in the loop. Reports events per second on one core for each stage, and the
//! pipeline's rate as a ratio of the decode-only baseline measured in the same run.
//!
//! Run: `cargo bench -p ingero-agent --bench drain` (or `cargo xtask bench probes`).

use std::{hint::black_box, time::Instant};

use ingero_agent::{decode, pipeline::Pipeline};
use ingero_ebpf::{
    COMM_LEN, CudaOp, CudaRecord, OffCpuReason, OffCpuRecord, RecordHeader, RecordKind,
};

const RECORDS: usize = 1_000_000;
const ROUNDS: usize = 5;

fn header(kind: RecordKind, op: u16, i: u64) -> RecordHeader {
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
fn records() -> Vec<Vec<u8>> {
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

/// Best rate over the rounds (events per second).
fn rate(mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    RECORDS as f64 / best
}

fn main() {
    let recs = records();
    let decode_only = rate(|| {
        for r in &recs {
            let _ = black_box(decode::decode(black_box(r)));
        }
    });
    let mut stats_pipeline = Pipeline::new(None);
    let stats = rate(|| {
        for r in &recs {
            stats_pipeline.handle_record(black_box(r));
        }
    });
    let mut json_pipeline = Pipeline::new(Some(Box::new(std::io::sink())));
    let json = rate(|| {
        for r in &recs {
            json_pipeline.handle_record(black_box(r));
        }
    });
    println!(
        "### Drain capacity (`cargo bench -p ingero-agent --bench drain`, {RECORDS} records, best of {ROUNDS})\n"
    );
    println!("| stage | events/s on one core | ratio to decode-only |\n|---|---|---|");
    println!("| decode only (baseline) | {decode_only:.0} | 1.00 |");
    println!(
        "| decode + statistics (live view) | {stats:.0} | {:.2} (target ≥ 2,000,000 events/s) |",
        stats / decode_only
    );
    println!(
        "| decode + statistics + `--json` lines | {json:.0} | {:.2} |",
        json / decode_only
    );
}
