//! Running statistics of a trace session: per-op latency sketches, off-CPU totals, lifecycle
//! counts and losses. Memory is bounded: one histogram per op, and at most
//! [`MAX_PREEMPTORS`] distinct "ran instead" names (the rest are folded into `(other)`).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use ingero_ebpf::{CudaOp, OffCpuReason};

use ingero_trace::model::{Event, ProcessOp, call_failed};

/// Distinct names kept for "who ran instead".
pub const MAX_PREEMPTORS: usize = 256;
const OTHER: &str = "(other)";

/// Latency of one op. Percentiles come from a streaming HDR histogram (3 significant digits),
/// never from sorting samples.
pub struct OpStats {
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    histogram: Histogram<u64>,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            count: 0,
            errors: 0,
            total_ns: 0,
            max_ns: 0,
            // 1 ns .. 1 hour at 3 significant digits; the bounds are constants, so this cannot
            // fail at run time.
            histogram: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!())),
        }
    }

    fn record(&mut self, duration_ns: u64, failed: bool) {
        self.count += 1;
        self.errors += u64::from(failed);
        self.total_ns = self.total_ns.saturating_add(duration_ns);
        self.max_ns = self.max_ns.max(duration_ns);
        self.histogram.saturating_record(duration_ns.max(1));
    }

    /// Calls per bucket of explicit upper bounds (`bounds` ascending, ns): one count per
    /// bound (values up to it, above the previous one) and a last one for values above all of
    /// them, as OTLP's explicit-bucket histograms count. Each value counts at its HDR bucket's
    /// top (3 significant digits).
    pub fn bucket_counts(&self, bounds: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; bounds.len() + 1];
        for v in self.histogram.iter_recorded() {
            let at = bounds.partition_point(|b| *b < v.value_iterated_to());
            if let Some(slot) = out.get_mut(at) {
                *slot += v.count_at_value();
            }
        }
        out
    }

    /// The duration at quantile `q` (0..=1). The histogram reports the top of a bucket, so the
    /// value is capped at the exact maximum seen.
    pub fn quantile(&self, q: f64) -> u64 {
        self.histogram.value_at_quantile(q).min(self.max_ns)
    }
}

/// Off-CPU totals of one reason.
#[derive(Default, Clone, Debug)]
pub struct OffCpuStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// Everything the live view and the final summary show.
#[derive(Default)]
pub struct Stats {
    pub ops: BTreeMap<CudaOp, OpStats>,
    pub preempted: OffCpuStats,
    pub blocked: OffCpuStats,
    /// Off-CPU nanoseconds by the name of what ran instead.
    pub ran_instead: BTreeMap<String, u64>,
    pub lifecycle: BTreeMap<&'static str, u64>,
    pub events: u64,
    pub decode_errors: u64,
    /// Annotations received from the socket.
    pub annotations: u64,
    /// NVTX ranges and marks received (`--annotate`).
    pub nvtx: u64,
    /// NVIDIA driver messages captured.
    pub driver_messages: u64,
    /// Of them, Xid and SXid reports of GPU and NVSwitch faults.
    pub xids: u64,
    /// What the last of them said (the live table keeps it in view).
    pub last_xid: Option<String>,
    /// Driver calls made inside a traced runtime call (not counted as operations of their own).
    pub nested: u64,
    /// Kernel names the probes could not read (their page was not resident): read from the
    /// process when a launch first asks for one (`KernelNameStats::read_late`).
    pub names_deferred: u64,
    /// Kernel names learnt (registrations and driver lookups), over the whole session.
    pub names_learned: u64,
    /// Launches and API time per kernel.
    pub kernels: KernelTally,
    /// How many kernels the table lists (`--top-kernels`).
    pub top_kernels: usize,
    /// GPU memory held per process.
    pub memory: super::memory::MemoryTally,
}

/// Most kernels tallied; launches of others are counted in [`KernelTally::untallied`].
pub const MAX_TALLIED_KERNELS: usize = 4096;

/// Launches and API time per kernel name, bounded.
#[derive(Default)]
pub struct KernelTally {
    /// Name → (launches, API time).
    pub by_name: std::collections::HashMap<std::sync::Arc<str>, (u64, u64)>,
    /// Launches of a kernel with no known name.
    pub unnamed: u64,
    /// Launches not tallied because [`MAX_TALLIED_KERNELS`] names were already held.
    pub untallied: u64,
}

impl KernelTally {
    fn add(&mut self, c: &ingero_trace::model::CudaCall) {
        let Some(k) = &c.detail.kernel else {
            self.unnamed += 1;
            return;
        };
        if !self.by_name.contains_key(&k.demangled) && self.by_name.len() >= MAX_TALLIED_KERNELS {
            self.untallied += 1;
            return;
        }
        let t = self.by_name.entry(k.demangled.clone()).or_default();
        t.0 += 1;
        t.1 = t.1.saturating_add(c.duration_ns);
    }

    /// The `n` kernels with the most API time: (name, launches, API time).
    pub fn top(&self, n: usize) -> Vec<(&str, u64, u64)> {
        let mut all: Vec<(&str, u64, u64)> = self
            .by_name
            .iter()
            .map(|(k, (count, ns))| (&**k, *count, *ns))
            .collect();
        all.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(b.0)));
        all.truncate(n);
        all
    }
}

impl Stats {
    pub fn record(&mut self, event: &Event) {
        self.events += 1;
        self.memory.record(event);
        match event {
            // A driver call made by a runtime call is part of that call: counted once, as it.
            Event::Cuda(c) if c.detail.parent.is_some() => self.nested += 1,
            Event::Cuda(c) => {
                if c.op.is_kernel_launch() {
                    self.kernels.add(c);
                }
                self.ops
                    .entry(c.op)
                    .or_insert_with(OpStats::new)
                    .record(c.duration_ns, call_failed(c.op, c.ret))
            }
            Event::OffCpu(o) => {
                let bucket = match o.reason {
                    OffCpuReason::Preempted => &mut self.preempted,
                    OffCpuReason::Blocked => &mut self.blocked,
                };
                bucket.count += 1;
                bucket.total_ns = bucket.total_ns.saturating_add(o.duration_ns);
                bucket.max_ns = bucket.max_ns.max(o.duration_ns);
                if o.reason == OffCpuReason::Preempted {
                    let name = o.next_comm.as_str();
                    let key = if self.ran_instead.contains_key(name.as_ref())
                        || self.ran_instead.len() < MAX_PREEMPTORS
                    {
                        name.into_owned()
                    } else {
                        OTHER.to_string()
                    };
                    *self.ran_instead.entry(key).or_default() += o.duration_ns;
                }
            }
            Event::Process(p) => {
                let name = match p.op {
                    ProcessOp::Exec => "exec",
                    ProcessOp::Exit => "exit",
                    ProcessOp::ThreadExit => "thread_exit",
                    ProcessOp::Fork => "fork",
                    ProcessOp::ThreadStart => "thread_start",
                };
                *self.lifecycle.entry(name).or_default() += 1;
            }
        }
    }

    /// The processes that preempted traced threads most, by time, largest first.
    pub fn top_preemptors(&self, n: usize) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self
            .ran_instead
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ingero_trace::model::{Comm, CudaArgs, CudaCall, OffCpu, Task};

    fn call(duration_ns: u64, ret: i32) -> Event {
        Event::Cuda(CudaCall {
            detail: Default::default(),
            ts_ns: 1,
            duration_ns,
            task: Task {
                pid: 1,
                tid: 1,
                comm: Comm::from_str_lossy("t"),
                cgroup_id: 0,
                cpu: 0,
            },
            op: CudaOp::Malloc,
            ret,
            args: CudaArgs::Alloc {
                size: 1,
                ptr: None,
                stream: None,
            },
        })
    }

    #[test]
    fn percentiles_track_the_distribution() {
        let mut stats = Stats::default();
        for i in 1..=1000u64 {
            stats.record(&call(i * 1000, i32::from(i % 10 == 0)));
        }
        let op = &stats.ops[&CudaOp::Malloc];
        assert_eq!(op.count, 1000);
        assert_eq!(op.errors, 100);
        assert_eq!(op.max_ns, 1_000_000);
        let p50 = op.quantile(0.5) as f64;
        let p99 = op.quantile(0.99) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.01, "p50 {p50}");
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.01, "p99 {p99}");
        assert_eq!(op.total_ns, (1..=1000u64).map(|i| i * 1000).sum::<u64>());
    }

    #[test]
    fn preemptor_names_are_bounded() {
        let mut stats = Stats::default();
        for i in 0..(MAX_PREEMPTORS + 50) {
            stats.record(&Event::OffCpu(OffCpu {
                ts_ns: 0,
                duration_ns: 10,
                task: Task {
                    pid: 1,
                    tid: 1,
                    comm: Comm::from_str_lossy("t"),
                    cgroup_id: 0,
                    cpu: 0,
                },
                reason: OffCpuReason::Preempted,
                prev_state: 0,
                next_tid: 2,
                next_comm: Comm::from_str_lossy(&format!("p{i}")),
            }));
        }
        assert_eq!(stats.ran_instead.len(), MAX_PREEMPTORS + 1);
        assert_eq!(stats.ran_instead[OTHER], 500);
        assert_eq!(stats.preempted.count, MAX_PREEMPTORS as u64 + 50);
    }
}
