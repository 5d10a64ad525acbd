//! The NVTX fallback's user side: calls caught by the uprobes on the NVTX libraries (for
//! processes without the injection library) turned into the same [`NvtxRecord`]s the socket
//! path writes.
//!
//! What is kept, and what cannot be:
//! - **push/pop** pair per thread (a pop closes the thread's newest push). There are no domains
//!   (the fallback probes only the global-domain C API), so one stack per thread.
//! - **marks** are instants with their message.
//! - **start/end** cannot be paired: without a tool `nvtxRangeStartA` returns id 0 and every
//!   `nvtxRangeEnd` gets 0. Each is kept as an instant (a mark-like record of kind `mark`): a
//!   start with its message, an end with the message `nvtxRangeEnd`.
//! - No domain, category, color or payload; an `Ex` call's message only when it is ASCII or
//!   UNICODE (a registered string needs the tool's table), marked `truncated` when cut.
//!
//! NVTX initializes lazily: the first call a library (linkage unit) gets jumps into an
//! `*_impl_init` function that sets the library up and jumps back into the API function
//! (`libnvToolsExt.so.1` and `libnvtx3interop.so.1` do it with a tail jump, on the same
//! stack), so the probe sees that one call twice on the same thread. When the second call
//! seen of a process repeats its first (same thread, function and message, entered at or
//! just below it on the stack, [`REENTRY_STACK`], and soon after, [`REENTRY_NS`]), it is that
//! re-entry: dropped and counted (`reentries`). Only the process's first call is checked, so a
//! program that pushes the same message twice in a loop is never affected; a second NVTX
//! library initializing later in the same process is seen twice (documented).
//!
//! A process also connected to the NVTX socket (its injection library streams everything) has
//! its fallback calls dropped and counted, so nothing is counted twice. Bounded: processes,
//! threads per process and depth per thread ([`Limits`]); what does not fit is counted.

use std::collections::HashMap;

use ingero_ebpf::{NvtxAction, NvtxCall};
use ingero_trace::model::{NvtxKind, NvtxRecord};

/// One call as the probe saw it (decoded from an `NvtxProbeRecord`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbedCall {
    pub call: NvtxCall,
    pub ts_ns: u64,
    /// The stack pointer at entry.
    pub sp: u64,
    pub pid: u32,
    pub tid: u32,
    /// The thread's name (the kernel's comm at the call).
    pub comm: String,
    pub message: String,
    pub truncated: bool,
}

/// Bounds on the fallback's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_processes: usize,
    pub max_threads: usize,
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_processes: 4096,
            max_threads: 4096,
            max_depth: 256,
        }
    }
}

/// What the fallback counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FallbackCounters {
    /// Ranges and instants produced.
    pub records: u64,
    /// Pops with nothing open on their thread.
    pub unmatched: u64,
    /// Pushes past [`Limits`] (their pops still pair), calls of processes or threads past it.
    pub over_limit: u64,
    /// Ranges closed because their process exited (or tracing ended).
    pub unclosed: u64,
    /// Calls of processes connected to the NVTX socket (captured there instead).
    pub connected: u64,
    /// Lazy-init re-entries dropped (the first call of each NVTX library, seen twice).
    pub reentries: u64,
}

/// How far below the previous call's stack pointer a re-entry enters (0 for the tail jump of
/// NVIDIA's libraries; an init function that calls instead adds its frame).
pub const REENTRY_STACK: u64 = 1024;
/// How soon after the previous call a re-entry enters (initialization without a tool is a
/// `getenv`; the bound leaves room for a loaded machine).
pub const REENTRY_NS: u64 = 10_000_000;

/// A thread's previous call, to recognise the lazy-init re-entry.
struct Last {
    call: NvtxCall,
    sp: u64,
    ts_ns: u64,
    message: String,
}

impl Last {
    fn reentered_by(&self, c: &ProbedCall) -> bool {
        self.call == c.call
            && self.message == c.message
            && c.sp <= self.sp
            && self.sp - c.sp <= REENTRY_STACK
            && c.ts_ns.saturating_sub(self.ts_ns) <= REENTRY_NS
    }
}

struct Open {
    ts_ns: u64,
    comm: String,
    message: String,
    truncated: bool,
    /// Past the depth bound: kept only so the pops stay paired, never written.
    over: bool,
}

#[derive(Default)]
struct Thread {
    stack: Vec<Open>,
    last: Option<Last>,
}

#[derive(Default)]
struct Process {
    threads: HashMap<u32, Thread>,
    /// Calls seen (only the second can be a re-entry of the first).
    calls: u64,
}

/// Every probed process's open push/pop ranges.
#[derive(Default)]
pub struct Fallback {
    limits: Limits,
    processes: HashMap<u32, Process>,
    last_ts: u64,
    pub counters: FallbackCounters,
}

/// The message an end instant carries (it has none of its own).
const END_MESSAGE: &str = "nvtxRangeEnd";

impl Fallback {
    /// With the default [`Limits`].
    pub fn default_limits() -> Fallback {
        Fallback::new(Limits::default())
    }

    pub fn new(limits: Limits) -> Fallback {
        Fallback {
            limits,
            ..Fallback::default()
        }
    }

    /// Takes one call; `connected` says the process streams through the socket too (then the
    /// call is dropped and counted). Completed records go to `out`.
    pub fn feed(&mut self, c: ProbedCall, connected: bool, out: &mut impl FnMut(NvtxRecord)) {
        self.last_ts = self.last_ts.max(c.ts_ns);
        if connected {
            self.counters.connected += 1;
            return;
        }
        let Some((thread, calls)) = thread_of(
            &mut self.processes,
            &self.limits,
            &mut self.counters,
            c.pid,
            c.tid,
        ) else {
            return;
        };
        if calls == 2 && thread.last.as_ref().is_some_and(|l| l.reentered_by(&c)) {
            thread.last = None;
            self.counters.reentries += 1;
            return;
        }
        thread.last = Some(Last {
            call: c.call,
            sp: c.sp,
            ts_ns: c.ts_ns,
            message: c.message.clone(),
        });
        let instant = |message: String, truncated: bool| {
            let mut r = NvtxRecord::new(NvtxKind::Mark, c.pid, c.tid, c.ts_ns, c.ts_ns);
            r.message = message;
            r.truncated = truncated;
            r.thread_name = c.comm.clone();
            r
        };
        match c.call.action() {
            NvtxAction::Mark | NvtxAction::Start => {
                self.counters.records += 1;
                out(instant(c.message.clone(), c.truncated));
            }
            NvtxAction::End => {
                self.counters.records += 1;
                out(instant(END_MESSAGE.to_owned(), false));
            }
            NvtxAction::Push => {
                let over = thread.stack.len() >= self.limits.max_depth;
                thread.stack.push(Open {
                    ts_ns: c.ts_ns,
                    comm: c.comm,
                    message: if over { String::new() } else { c.message },
                    truncated: c.truncated,
                    over,
                });
                if over {
                    self.counters.over_limit += 1;
                }
            }
            NvtxAction::Pop => match thread.stack.pop() {
                Some(open) if !open.over => {
                    let depth = thread.stack.len();
                    self.counters.records += 1;
                    out(range(c.pid, c.tid, open, depth, c.ts_ns, false));
                }
                Some(_) => {}
                None => self.counters.unmatched += 1,
            },
        }
    }

    /// The process exited at `at`: its open ranges end there, flagged `unclosed`.
    pub fn exit(&mut self, pid: u32, at: u64, out: &mut impl FnMut(NvtxRecord)) {
        if let Some(p) = self.processes.remove(&pid) {
            self.close(pid, p, at, out);
        }
    }

    /// Tracing ends: every open range ends at the newest time seen, flagged `unclosed`.
    pub fn finish(&mut self, out: &mut impl FnMut(NvtxRecord)) {
        let at = self.last_ts;
        let mut pids: Vec<u32> = self.processes.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.exit(pid, at, out);
        }
    }

    fn close(&mut self, pid: u32, p: Process, at: u64, out: &mut impl FnMut(NvtxRecord)) {
        let mut open: Vec<(u32, u32, Open)> = Vec::new();
        for (tid, thread) in p.threads {
            for (depth, o) in thread.stack.into_iter().enumerate() {
                if !o.over {
                    open.push((tid, depth as u32, o));
                }
            }
        }
        open.sort_by_key(|(tid, depth, o)| (o.ts_ns, *depth, *tid));
        for (tid, depth, o) in open {
            self.counters.unclosed += 1;
            self.counters.records += 1;
            out(range(pid, tid, o, depth as usize, at, true));
        }
    }
}

/// A thread's state, made when there is room (else counted), and the calls its process made
/// so far, this one included.
fn thread_of<'a>(
    processes: &'a mut HashMap<u32, Process>,
    limits: &Limits,
    counters: &mut FallbackCounters,
    pid: u32,
    tid: u32,
) -> Option<(&'a mut Thread, u64)> {
    if !processes.contains_key(&pid) && processes.len() >= limits.max_processes {
        counters.over_limit += 1;
        return None;
    }
    let process = processes.entry(pid).or_default();
    if !process.threads.contains_key(&tid) && process.threads.len() >= limits.max_threads {
        counters.over_limit += 1;
        return None;
    }
    process.calls += 1;
    Some((process.threads.entry(tid).or_default(), process.calls))
}

fn range(pid: u32, tid: u32, open: Open, depth: usize, end: u64, unclosed: bool) -> NvtxRecord {
    let mut r = NvtxRecord::new(NvtxKind::PushPop, pid, tid, open.ts_ns, end.max(open.ts_ns));
    r.depth = depth as u32;
    r.message = open.message;
    r.truncated = open.truncated;
    r.unclosed = unclosed;
    r.thread_name = open.comm;
    r
}

#[cfg(test)]
#[path = "fallback_tests.rs"]
mod tests;
