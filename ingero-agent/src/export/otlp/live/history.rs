//! The live engine's recent past: the CUDA calls and off-CPU intervals written, in the form a
//! reader yields them, in time order, bounded by bytes. A group's numbers are folded from
//! here when it ends; a span annotation arrives when it ends, after the events it covers, so
//! they must still be here then. The oldest go first past the bound (counted: a group that
//! began before what is kept is sent marked incomplete).

use std::collections::VecDeque;

use crate::analyze::scan::Held;
use ingero_trace::model::{CudaCallRecord, OffCpuRecord};

/// A record kept.
pub enum HistRecord {
    Cuda(CudaCallRecord),
    OffCpu(OffCpuRecord),
}

impl HistRecord {
    pub fn ts_ns(&self) -> u64 {
        match self {
            HistRecord::Cuda(c) => c.ts_ns,
            HistRecord::OffCpu(o) => o.ts_ns,
        }
    }

    /// Bytes it holds (the record and what it points to, shared thread names aside).
    pub fn bytes(&self) -> usize {
        size_of::<HistRecord>()
            + match self {
                HistRecord::Cuda(_) => 0,
                HistRecord::OffCpu(o) => o.next_comm.capacity(),
            }
    }

    pub fn held(&self) -> Held<'_> {
        match self {
            HistRecord::Cuda(c) => Held::Cuda(c),
            HistRecord::OffCpu(o) => Held::OffCpu(o),
        }
    }
}

/// Records in start order, at most `max_bytes`.
pub struct History {
    recs: VecDeque<HistRecord>,
    bytes: usize,
    max_bytes: usize,
    /// The newest start time evicted past the bound (0: none).
    pub evicted_to: u64,
    /// Records evicted past the bound.
    pub evicted: u64,
}

impl History {
    pub fn new(max_bytes: usize) -> History {
        History {
            recs: VecDeque::new(),
            bytes: 0,
            max_bytes,
            evicted_to: 0,
            evicted: 0,
        }
    }

    /// Adds a record (a late one in its place), evicting the oldest past the bound.
    pub fn push(&mut self, r: HistRecord) {
        self.bytes += r.bytes();
        let ts = r.ts_ns();
        match self.recs.back() {
            Some(last) if last.ts_ns() > ts => {
                let at = self.recs.partition_point(|x| x.ts_ns() <= ts);
                self.recs.insert(at, r);
            }
            _ => self.recs.push_back(r),
        }
        while self.bytes > self.max_bytes {
            let Some(old) = self.recs.pop_front() else {
                break;
            };
            self.bytes -= old.bytes();
            self.evicted_to = self.evicted_to.max(old.ts_ns());
            self.evicted += 1;
        }
    }

    /// Lets go of the records that start before `ts` (no group still to come needs them).
    pub fn drop_before(&mut self, ts: u64) {
        while self.recs.front().is_some_and(|r| r.ts_ns() < ts) {
            if let Some(old) = self.recs.pop_front() {
                self.bytes -= old.bytes();
            }
        }
    }

    /// The records that start at or after `ts`, in order.
    pub fn from(&self, ts: u64) -> impl Iterator<Item = Held<'_>> + '_ {
        let at = self.recs.partition_point(|x| x.ts_ns() < ts);
        self.recs.range(at..).map(HistRecord::held)
    }

    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The oldest start kept.
    pub fn oldest(&self) -> Option<u64> {
        self.recs.front().map(HistRecord::ts_ns)
    }
}
