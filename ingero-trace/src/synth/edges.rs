//! The seek tests' workload: records that the edges of a time window cut in every way a
//! reader seeking to it could get wrong, written in small chunks with the sequences restarting
//! at each, and rotated over several files.
//!
//! Three threads of one process, a call every 5–45 µs, and among them: long
//! `cudaDeviceSynchronize` calls (2–10 ms, the thread's other calls nested inside them; one
//! in 5,000 of 100–400 ms, open across dozens of restarts), off-CPU intervals of 50 µs–5 ms,
//! late calls (0.5–10 ms in the past when written, some ending after the stream's time),
//! allocations and frees (device-memory counters), thread starts, a `step` label every
//! ~1,000 calls and `request_id` spans. Deterministic for a seed.

use std::path::PathBuf;

use ingero_ebpf::{CudaOp, OffCpuReason};

use super::{SCENARIO_PID, SCENARIO_T0, annotation, cuda, launch_args, lifecycle, task};
use crate::model::{Comm, CudaArgs, Event, FinalStats, OffCpu, ProcessOp, SessionInfo};
use crate::model::{DriverMessage, NvtxKind, NvtxRecord};
use crate::model::{Task, TimelineRecord};
use crate::write::{Recorder, RecorderConfig, Result};

/// The workload's process.
pub const PID: u32 = SCENARIO_PID + 200;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// What [`write`] writes.
#[derive(Clone, Copy, Debug)]
pub struct EdgeOptions {
    /// Calls (and other records) in the workload.
    pub records: u64,
    /// A chunk is written (and the sequences restart) after this many records.
    pub flush_every: u64,
    /// `RecorderConfig::max_file_size`: several files.
    pub max_file_size: u64,
    /// The generator's seed.
    pub seed: u64,
    /// Labels of every kind besides the steps and requests: a trace-wide `phase` held for
    /// thousands of records (open across many restarts and files) and cleared now and then,
    /// annotations that arrive late, requests that began long before they end, NVTX ranges
    /// (push/pop and start/end) and marks; and NVIDIA driver messages (Xid reports), which are
    /// not labels but are written on the same plain sequence.
    pub extra_labels: bool,
}

impl Default for EdgeOptions {
    fn default() -> Self {
        EdgeOptions {
            records: 40_000,
            flush_every: 150,
            max_file_size: 500_000,
            seed: 7,
            extra_labels: false,
        }
    }
}

/// xorshift64: deterministic, so every run writes the same records.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `lo..hi`.
    fn within(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// The workload's records, in the order they are written (time order but for the late ones).
pub fn records(o: &EdgeOptions) -> Vec<TimelineRecord> {
    let threads: Vec<Task> = (0..3)
        .map(|i| task(PID, PID + i, ["train", "loader", "comm"][i as usize]))
        .collect();
    let mut rng = Rng(o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut ts = SCENARIO_T0;
    let mut live: Vec<u64> = Vec::new();
    let mut next_ptr = 0x7f00_0000_0000u64;
    let mut request_start = ts;
    let mut step = 0u64;
    let mut out = Vec::with_capacity(o.records as usize + 8);
    for i in 0..o.records {
        ts += rng.within(5 * US, 45 * US);
        let t = threads[(rng.next() % 3) as usize];
        let pick = rng.next() % 1000;
        let sync = CudaArgs::Sync {
            stream: None,
            event: None,
        };
        if o.extra_labels {
            if let Some(extra) = extra_label(&mut rng, i, ts, t) {
                out.push(extra);
                continue;
            }
        }
        let rec = match pick / 10 {
            0 if pick == 0 && i % 5 == 0 => {
                let dur = rng.within(100 * MS, 400 * MS);
                cuda(t, ts, dur, CudaOp::DeviceSynchronize, 0, sync)
            }
            0 if pick < 2 => {
                let dur = rng.within(2 * MS, 10 * MS);
                cuda(t, ts, dur, CudaOp::DeviceSynchronize, 0, sync)
            }
            2..=4 => TimelineRecord::Event(Event::OffCpu(OffCpu {
                ts_ns: ts,
                duration_ns: rng.within(50 * US, 5 * MS),
                task: t,
                reason: if pick < 30 {
                    OffCpuReason::Preempted
                } else {
                    OffCpuReason::Blocked
                },
                prev_state: i64::from(pick >= 30),
                next_tid: 77,
                next_comm: Comm::from_str_lossy("kworker/1:0"),
            })),
            5 => {
                next_ptr += 1 << 20;
                live.push(next_ptr);
                let args = CudaArgs::Alloc {
                    size: 1 << 20,
                    ptr: Some(next_ptr),
                    stream: None,
                };
                cuda(t, ts, 30 * US, CudaOp::Malloc, 0, args)
            }
            6 if !live.is_empty() => {
                let ptr = live.swap_remove((rng.next() % live.len() as u64) as usize);
                let args = CudaArgs::Free {
                    ptr,
                    size: Some(1 << 20),
                    stream: None,
                };
                cuda(t, ts, 20 * US, CudaOp::Free, 0, args)
            }
            7 => lifecycle(t, ts, ProcessOp::ThreadStart, t.tid + 1000, "worker"),
            8 | 9 => {
                // Reported long after it began: behind what was written, to the late sequence.
                let back = rng.within(MS / 2, 10 * MS).min(ts - SCENARIO_T0);
                let dur = rng.within(10 * US, 10 * MS);
                let args = CudaArgs::Memcpy {
                    count: 4096,
                    kind: crate::model::MemcpyKind::DeviceToHost,
                    stream: Some(0x5600_0000_0010),
                    width_height: None,
                    host_ptr: None,
                };
                cuda(t, ts - back, dur, CudaOp::Memcpy, 0, args)
            }
            10 if i / 1000 != step => {
                step = i / 1000;
                let v = step.to_string();
                annotation(ts, None, Some(PID), &[("step", &v)])
            }
            11 => {
                let id = format!("r-{i}");
                let span = annotation(request_start, Some(ts), Some(PID), &[("request_id", &id)]);
                request_start = ts;
                span
            }
            _ => {
                let grid = [128, 256, 1024][(rng.next() % 3) as usize];
                let dur = rng.within(US, 3 * US);
                cuda(
                    t,
                    ts,
                    dur,
                    CudaOp::LaunchKernel,
                    0,
                    launch_args(grid, 0x5600_0000_0010),
                )
            }
        };
        out.push(rec);
    }
    out
}

/// One of [`EdgeOptions::extra_labels`]' records for record `i` at `ts` on thread `t`, or
/// `None` for an ordinary one.
fn extra_label(rng: &mut Rng, i: u64, ts: u64, t: Task) -> Option<TimelineRecord> {
    let pick = rng.next() % 1000;
    if i % 7_000 == 3_500 {
        // Trace-wide, held across thousands of records; cleared one time in three.
        let value = ["train", "eval", ""][((i / 7_000) % 3) as usize];
        return Some(annotation(ts, None, None, &[("phase", value)]));
    }
    let rec = match pick {
        // Late: behind what was written, its state change at the stream's time.
        0..=1 => {
            let back = rng.within(MS / 2, 3 * MS).min(ts - SCENARIO_T0);
            annotation(
                ts - back,
                None,
                Some(PID),
                &[("epoch", &(i / 9_000).to_string())],
            )
        }
        // A request that began up to a second before.
        2 => {
            let back = rng.within(MS, 1_000 * MS).min(ts - SCENARIO_T0);
            let id = format!("long-{i}");
            annotation(ts - back, Some(ts), Some(PID), &[("request_id", &id)])
        }
        3..=6 => {
            let kind = [NvtxKind::PushPop, NvtxKind::StartEnd, NvtxKind::Mark][(pick % 3) as usize];
            let back = if kind == NvtxKind::Mark {
                0
            } else {
                rng.within(10 * US, 20 * MS).min(ts - SCENARIO_T0)
            };
            let mut n = NvtxRecord::new(kind, PID, t.tid, ts - back, ts);
            n.message = ["forward", "backward", "optimizer"][(pick % 3) as usize].to_owned();
            n.domain = (pick == 6).then(|| "ingero-edges".to_owned());
            TimelineRecord::Nvtx(n)
        }
        // A GPU fault the NVIDIA driver reported: naming the process, or (a device fault)
        // naming none.
        7 => TimelineRecord::Driver(DriverMessage {
            ts_ns: ts,
            text: match i % 2 {
                0 => format!("NVRM: Xid (PCI:0000:01:00): 31, pid={PID}, name=train, Ch 0000000{}", i % 10),
                _ => "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.".to_owned(),
            },
            truncated: false,
        }),
        _ => return None,
    };
    Some(rec)
}

/// Writes [`records`] to `path` (rotated files beside it) in chunks of
/// [`EdgeOptions::flush_every`] records, the sequences restarting at every chunk; returns the
/// files.
pub fn write(path: PathBuf, o: &EdgeOptions) -> Result<Vec<PathBuf>> {
    let cfg = RecorderConfig {
        path: Some(path),
        max_file_size: o.max_file_size,
        restart_bytes: 1,
        session: SessionInfo {
            command_line: "synth edges".into(),
            ..SessionInfo::default()
        },
        machine_id: Some(11),
        chown_to_sudo_user: false,
        ..Default::default()
    };
    let mut rec = Recorder::create_with(cfg, false)?;
    for (i, r) in records(o).iter().enumerate() {
        rec.write(r)?;
        if (i as u64 + 1).is_multiple_of(o.flush_every) {
            rec.flush()?;
        }
    }
    rec.finish(&FinalStats::default())
}
