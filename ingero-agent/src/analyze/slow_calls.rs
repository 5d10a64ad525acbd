//! The slowest calls of each operation, with what happened to their thread around them.
//!
//! Each traced thread keeps its last few off-CPU intervals ([`OffCpuRings`]); off-CPU slices
//! end before the call they interrupt does, so when a call arrives (at its end) the intervals
//! inside it are already there. A call that makes an operation's top [`TOP_K`] takes a copy of
//! the off-CPU time in its window `[start − CAUSE_WINDOW_NS, end]`. Memory is bounded: rings of
//! fixed length per thread, `TOP_K` calls per operation.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use ingero_ebpf::cuda_ops::MAX_OP;
use ingero_ebpf::{CudaOp, OffCpuReason};

use super::groups::add_preempter;
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::{CudaCallRecord, OffCpuRecord};

/// Slowest calls kept per operation.
pub const TOP_K: usize = 32;
/// How far before a slow call its causes are looked for.
pub const CAUSE_WINDOW_NS: u64 = 1_000_000;
/// Off-CPU intervals remembered per thread.
const RING_LEN: usize = 64;

#[derive(Clone, Copy)]
struct OffCpuSpan {
    start: u64,
    end: u64,
    reason: OffCpuReason,
    who: u32,
}

/// The recent off-CPU intervals of every thread.
#[derive(Default)]
pub struct OffCpuRings {
    rings: FastMap<u32, VecDeque<OffCpuSpan>>,
}

impl OffCpuRings {
    pub fn push(&mut self, o: &OffCpuRecord, who: u32) {
        let ring = self.rings.entry(o.thread.tid).or_default();
        if ring.len() == RING_LEN {
            ring.pop_front();
        }
        ring.push_back(OffCpuSpan {
            start: o.ts_ns,
            end: o.ts_ns + o.duration_ns,
            reason: o.reason,
            who,
        });
    }

    /// Off-CPU time of `tid` overlapping `[a, b]`: preempted, blocked, and by whom.
    pub(super) fn overlap(&self, tid: u32, a: u64, b: u64) -> (u64, u64, Vec<(u32, u64)>) {
        let (mut pre, mut blk, mut who) = (0, 0, Vec::new());
        if let Some(ring) = self.rings.get(&tid) {
            for s in ring.iter().rev() {
                if s.end < a {
                    break;
                }
                let ns = s.end.min(b).saturating_sub(s.start.max(a));
                match s.reason {
                    OffCpuReason::Preempted => {
                        pre += ns;
                        add_preempter(&mut who, s.who, ns);
                    }
                    OffCpuReason::Blocked => blk += ns,
                }
            }
        }
        (pre, blk, who)
    }
}

/// A slow call and its thread's off-CPU time in its window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowCall {
    pub ts_ns: u64,
    pub duration_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub preempted_ns: u64,
    pub blocked_ns: u64,
    pub preempters: Vec<(u32, u64)>,
}

impl PartialOrd for SlowCall {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SlowCall {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.duration_ns, Reverse(self.ts_ns), self.tid).cmp(&(
            other.duration_ns,
            Reverse(other.ts_ns),
            other.tid,
        ))
    }
}

/// The top [`TOP_K`] slowest calls of each operation.
pub struct SlowCalls {
    heaps: FastMap<CudaOp, BinaryHeap<Reverse<SlowCall>>>,
    /// Per op whose heap is full, the duration a call must exceed to enter it, so most calls
    /// are turned away without touching the heap.
    floor: Vec<Option<u64>>,
}

impl Default for SlowCalls {
    fn default() -> SlowCalls {
        SlowCalls {
            heaps: FastMap::default(),
            floor: vec![None; MAX_OP],
        }
    }
}

impl SlowCalls {
    #[inline]
    pub fn offer(&mut self, c: &CudaCallRecord, rings: &OffCpuRings) {
        if let Some(Some(min)) = self.floor.get(c.op as usize) {
            if *min >= c.duration_ns {
                return;
            }
        }
        self.offer_slow(c, rings);
    }

    /// A call that may enter its op's top [`TOP_K`].
    #[inline(never)]
    fn offer_slow(&mut self, c: &CudaCallRecord, rings: &OffCpuRings) {
        let floor = self.floor.get_mut(c.op as usize);
        let heap = self.heaps.entry(c.op).or_default();
        if heap.len() == TOP_K
            && heap
                .peek()
                .is_some_and(|Reverse(min)| min.duration_ns >= c.duration_ns)
        {
            return;
        }
        let end = c.ts_ns + c.duration_ns;
        let (pre, blk, who) =
            rings.overlap(c.thread.tid, c.ts_ns.saturating_sub(CAUSE_WINDOW_NS), end);
        heap.push(Reverse(SlowCall {
            ts_ns: c.ts_ns,
            duration_ns: c.duration_ns,
            pid: c.thread.pid,
            tid: c.thread.tid,
            preempted_ns: pre,
            blocked_ns: blk,
            preempters: who,
        }));
        if heap.len() > TOP_K {
            heap.pop();
        }
        if heap.len() == TOP_K
            && let (Some(f), Some(Reverse(min))) = (floor, heap.peek())
        {
            *f = Some(min.duration_ns);
        }
    }

    /// An operation's kept calls, slowest first.
    pub fn of(&self, op: CudaOp) -> Vec<SlowCall> {
        let mut v: Vec<SlowCall> = self
            .heaps
            .get(&op)
            .map(|h| h.iter().map(|Reverse(c)| c.clone()).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| b.cmp(a));
        v
    }
}
