//! The rows of `query --memory`: one per process, most GPU memory held first, as JSON, a
//! table (text and CSV) and, in text, the largest live allocations of each process.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value};

use super::replay::{Level, Live, ProcMemory, ReplayResult, Unfollowed};
use crate::analyze::Analysis;
use crate::analyze::events::labels_at;
use crate::analyze::fmt;
use crate::analyze::json::Json;
use crate::analyze::table::Table;
use ingero_trace::model::MemKind;

/// The process-scoped label that names a process's rank in a distributed job.
pub use crate::analyze::query::RANK_KEY;

/// Said with every memory report.
pub const MEMORY_CAVEAT: &str = "Allocations made before tracing started are unknown: they are not in held or peak, and freeing one shows up only as an unknown free.";

/// The GPU allocators' levels, kept apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Kinds {
    pub device: Level,
    pub pool: Level,
    pub managed: Level,
    /// Physical memory by handle (`cuMemCreate` on a GPU: PyTorch's expandable segments,
    /// NCCL's buffers).
    pub vmm: Level,
}

/// A live allocation, as listed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveRow {
    /// `0x…`: the pointer, or for `cuMemCreate` memory the handle (its mappings come and go).
    pub ptr: String,
    pub size_bytes: u64,
    /// The allocating call's start.
    pub ts_ns: u64,
    pub op: &'static str,
    pub kind: MemKind,
    /// The labels in force for the process then (`step`, `phase`, …).
    pub labels: Map<String, Value>,
}

/// One process.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryRow {
    pub pid: u32,
    /// The process's `rank` label (a number), when the recording has one.
    pub rank: Option<u32>,
    pub command: String,
    /// Device, pool, managed and vmm memory together (`held_bytes`, `peak_bytes`, `peak_ns`,
    /// `allocated_bytes`, `freed_bytes`, `allocations`, `frees`, `live_allocations`).
    #[serde(flatten)]
    pub gpu: Level,
    /// The same per allocator.
    pub kinds: Kinds,
    /// Page-locked host memory, apart from the GPU's.
    pub pinned: Level,
    /// What ingero could not size or follow (`unknown_frees`, `unknown_freed_bytes`,
    /// `unknown_host_frees`, `untracked_allocations`, `untracked_bytes`,
    /// `failed_allocations`).
    #[serde(flatten)]
    pub unfollowed: Unfollowed,
    /// When the process exited, if it did in the window (it holds nothing after).
    pub exited_ns: Option<u64>,
    /// GPU bytes still allocated when it exited (released by the exit).
    pub held_at_exit_bytes: Option<u64>,
    /// The largest allocations live at the end of the window (or at the exit).
    pub largest: Vec<LiveRow>,
}

/// `query --memory`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryReport {
    /// The window: allocations and frees count from `start_ns`; held is at `end_ns`.
    pub start_ns: u64,
    pub end_ns: u64,
    pub caveat: &'static str,
    /// Allocations not followed because the live-allocation bound was reached (held may be
    /// short by them).
    pub allocations_over_limit: u64,
    /// Memory calls of processes past the process bound.
    pub untracked_process_calls: u64,
    pub processes: Vec<MemoryRow>,
}

/// The process's rank: its `rank` label as a number, as `query`'s rows carry it.
fn rank_of(an: &Analysis, p: &ProcMemory) -> Option<u32> {
    an.index
        .labels
        .process_value(RANK_KEY, p.pid)
        .and_then(|r| r.parse().ok())
}

fn live_row(an: &Analysis, pid: u32, l: &Live, scratch: &mut Vec<u32>) -> LiveRow {
    LiveRow {
        ptr: format!("{:#x}", l.ptr),
        size_bytes: l.size,
        ts_ns: l.ts_ns,
        op: l.op.name(),
        kind: l.kind,
        labels: labels_at(an, pid, l.ts_ns, scratch),
    }
}

/// Builds the report from a finished replay.
pub fn build(an: &Analysis, r: ReplayResult) -> MemoryReport {
    let mut scratch = Vec::new();
    let window = r.window.unwrap_or(super::replay::Window {
        start_ns: an.selection.range.start_ns,
        end_ns: an.selection.range.end_ns,
    });
    let mut processes: Vec<MemoryRow> = r
        .procs
        .iter()
        .map(|p| MemoryRow {
            pid: p.pid,
            rank: rank_of(an, p),
            command: p.command.to_string(),
            gpu: p.gpu,
            kinds: Kinds {
                device: p.kinds[MemKind::Device.index()],
                pool: p.kinds[MemKind::Pool.index()],
                managed: p.kinds[MemKind::Managed.index()],
                vmm: p.kinds[MemKind::Vmm.index()],
            },
            pinned: p.kinds[MemKind::Pinned.index()],
            unfollowed: p.unfollowed,
            exited_ns: p.exited.as_ref().map(|e| e.ts_ns),
            held_at_exit_bytes: p.exited.as_ref().map(|e| e.gpu_held_bytes),
            largest: p
                .largest
                .iter()
                .map(|l| live_row(an, p.pid, l, &mut scratch))
                .collect(),
        })
        .collect();
    // Who holds the most first; then who peaked highest; pids break ties.
    processes.sort_by(|a, b| {
        (b.gpu.held_bytes, b.gpu.peak_bytes, b.pinned.held_bytes)
            .cmp(&(a.gpu.held_bytes, a.gpu.peak_bytes, a.pinned.held_bytes))
            .then(a.pid.cmp(&b.pid))
    });
    MemoryReport {
        start_ns: window.start_ns,
        end_ns: window.end_ns,
        caveat: MEMORY_CAVEAT,
        allocations_over_limit: r.over_limit,
        untracked_process_calls: r.untracked_process_calls,
        processes,
    }
}

/// The row's notes for the table: what ingero could not size or follow, and an exit.
fn notes(r: &MemoryRow, origin: u64) -> String {
    let mut n = Vec::new();
    let u = &r.unfollowed;
    if u.unknown_frees > 0 {
        n.push(format!("{} unknown free(s)", u.unknown_frees));
    }
    if u.unknown_host_frees > 0 {
        n.push(format!("{} unknown host free(s)", u.unknown_host_frees));
    }
    if u.untracked_allocations > 0 {
        n.push(format!(
            "{} untracked alloc(s) {}",
            u.untracked_allocations,
            fmt::bytes(u.untracked_bytes)
        ));
    }
    if u.failed_allocations > 0 {
        n.push(format!("{} failed alloc(s)", u.failed_allocations));
    }
    if let (Some(t), Some(b)) = (r.exited_ns, r.held_at_exit_bytes) {
        n.push(format!(
            "exited at {} holding {}",
            fmt::offset(t, origin),
            fmt::bytes(b)
        ));
    }
    n.join("; ")
}

fn labels_text(m: &Map<String, Value>) -> String {
    crate::analyze::query::label_text(m)
}

impl MemoryReport {
    pub fn json(&self) -> Json<&MemoryReport> {
        Json(self)
    }

    /// One row per process (text and CSV share it); times are offsets from `origin`.
    pub fn table(&self, origin: u64) -> Table {
        let mut t = Table::new(&[
            "pid",
            "rank",
            "command",
            "held",
            "peak",
            "peak at",
            "allocated",
            "freed",
            "live",
            "device",
            "pool",
            "managed",
            "vmm",
            "pinned",
            "notes",
        ]);
        for r in &self.processes {
            t.push(vec![
                r.pid.to_string(),
                r.rank.map_or_else(|| "-".into(), |r| r.to_string()),
                r.command.clone(),
                fmt::bytes(r.gpu.held_bytes),
                fmt::bytes(r.gpu.peak_bytes),
                r.gpu
                    .peak_ns
                    .map_or_else(|| "-".into(), |t| fmt::offset(t, origin)),
                fmt::bytes(r.gpu.allocated_bytes),
                fmt::bytes(r.gpu.freed_bytes),
                r.gpu.live_allocations.to_string(),
                fmt::bytes(r.kinds.device.held_bytes),
                fmt::bytes(r.kinds.pool.held_bytes),
                fmt::bytes(r.kinds.managed.held_bytes),
                fmt::bytes(r.kinds.vmm.held_bytes),
                fmt::bytes(r.pinned.held_bytes),
                notes(r, origin),
            ]);
        }
        t
    }

    fn footnotes(&self) -> Vec<String> {
        let mut out = vec![self.caveat.to_owned()];
        if self.allocations_over_limit > 0 {
            out.push(format!(
                "{} allocation(s) were not followed (more than {} live at once): held may be short by them",
                self.allocations_over_limit,
                super::replay::MAX_LIVE
            ));
        }
        if self.untracked_process_calls > 0 {
            out.push(format!(
                "{} memory call(s) of processes past the first {} were not followed",
                self.untracked_process_calls,
                super::replay::MAX_PROCESSES
            ));
        }
        out
    }

    /// The table, each process's largest live allocations, then the notes.
    pub fn text(&self, origin: u64) -> String {
        let mut out = if self.processes.is_empty() {
            "no memory calls in the selection\n".to_owned()
        } else {
            self.table(origin).text()
        };
        let mut big = Table::new(&["pid", "size", "allocated at", "op", "kind", "labels"]);
        for r in &self.processes {
            for l in &r.largest {
                big.push(vec![
                    r.pid.to_string(),
                    fmt::bytes(l.size_bytes),
                    fmt::offset(l.ts_ns, origin),
                    l.op.to_owned(),
                    l.kind.name().to_owned(),
                    labels_text(&l.labels),
                ]);
            }
        }
        if !big.rows.is_empty() {
            let _ = write!(out, "\nlargest live allocations:\n{}", big.text());
        }
        for n in self.footnotes() {
            let _ = writeln!(out, "\nnote: {n}");
        }
        out
    }

    /// CSV of the process rows; the notes as leading `#` lines.
    pub fn csv(&self, origin: u64) -> String {
        let mut out = String::new();
        for n in self.footnotes() {
            let _ = writeln!(out, "# {n}");
        }
        out.push_str(&self.table(origin).csv());
        out
    }
}
