//! Ranks: which rank of a distributed job each traced process is, read once from its
//! environment and recorded as a process-scoped annotation (`rank`, `local_rank`,
//! `world_size`, `run_id`).
//!
//! The labels take the annotations' path (the `--json` line, the reorder window, the writer's
//! label tracks) rather than a field of their own, so everything that understands a
//! process-scoped label understands a rank: `query --group-by step,rank`, `--label rank=3`,
//! explain's straggler rule, Perfetto's label tracks. An adapter that sets `rank` itself
//! (Lightning's) simply sets the same key later. The records are marked as the agent's: its
//! own pid, uid and gid as provenance, and `stamped_by_agent`.
//!
//! Looked at on the first event of each pid (and again after an `exec`, which may bring a new
//! environment); a process's exit forgets it ([`Ranks::forget`], once its last CUDA records
//! were taken), so a reused pid is read afresh. The cache of
//! pids seen is bounded; reads that fail are counted, never fatal.

pub mod environ;

use std::path::PathBuf;

use ingero_trace::clock::{ClockConverter, monotonic_now_ns};
use ingero_trace::fast_map::FastMap;
use ingero_trace::model::{AnnotationRecord, Event, ProcessOp, Scope};

use crate::annotate::authz::proc_info;

/// Pids remembered at most (as many as the probes track, `TRACKED`).
pub const MAX_PROCESSES: usize = 65_536;

/// What was learnt about one pid.
struct Seen {
    /// The labels recorded for it (empty: none found, or the read failed).
    labels: Vec<(String, String)>,
}

/// Counters of what could not be read (reported with the session's losses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RankStats {
    /// Processes whose `/proc/<pid>/{stat,environ}` could not be read (gone, or no access).
    pub unreadable: u64,
    /// Environments longer than [`environ::ENVIRON_MAX_BYTES`] (their tail was not read).
    pub truncated: u64,
    /// Pids not looked at because [`MAX_PROCESSES`] were remembered.
    pub cache_full: u64,
    /// Annotations made.
    pub labelled: u64,
}

/// The pids seen and the rank labels found for them.
pub struct Ranks {
    proc_root: PathBuf,
    seen: FastMap<u32, Seen>,
    clock: ClockConverter,
    /// The agent's own identity, the provenance of its annotations.
    own_pid: u32,
    uid: u32,
    gid: u32,
    pub stats: RankStats,
}

impl Default for Ranks {
    fn default() -> Self {
        Ranks::new(PathBuf::from("/proc"))
    }
}

impl Ranks {
    /// Reads processes under `proc_root` (`/proc`; a directory of fakes in tests).
    pub fn new(proc_root: PathBuf) -> Ranks {
        // SAFETY: geteuid and getegid take no arguments, cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Ranks {
            proc_root,
            seen: FastMap::default(),
            clock: ClockConverter::default(),
            own_pid: std::process::id(),
            uid,
            gid,
            stats: RankStats::default(),
        }
    }

    /// Looks at an event before it is recorded: the first event of a pid (or an exec) reads
    /// the process's environment, and returns the annotation to record before the event when
    /// it names a rank or run. One hash lookup for every other event.
    pub fn observe(&mut self, event: &Event) -> Option<AnnotationRecord> {
        let pid = event.task().pid;
        let exec = match event {
            // Forgotten later (`Ranks::forget`): the process's last CUDA records may still
            // come, and must not read a dead process's environment again.
            Event::Process(p) if p.op == ProcessOp::Exit => return None,
            Event::Process(p) => p.op == ProcessOp::Exec,
            _ => false,
        };
        if !exec && self.seen.contains_key(&pid) {
            return None;
        }
        self.look(pid, event.ts_ns())
    }

    #[inline(never)]
    fn look(&mut self, pid: u32, ts_ns: u64) -> Option<AnnotationRecord> {
        if !self.seen.contains_key(&pid) && self.seen.len() >= MAX_PROCESSES {
            self.stats.cache_full += 1;
            return None;
        }
        let found = self.read(pid);
        let previous = self.seen.insert(
            pid,
            Seen {
                labels: found.as_ref().map_or_else(Vec::new, |(_, l)| l.clone()),
            },
        );
        let (scope, labels) = found?;
        // After an exec, only a changed environment is worth a new annotation.
        if labels.is_empty() || previous.is_some_and(|p| p.labels == labels) {
            return None;
        }
        self.stats.labelled += 1;
        Some(AnnotationRecord {
            labels,
            scope: Some(scope),
            ts_ns,
            end_ns: None,
            provenance_uid: self.uid,
            provenance_pid: Some(self.own_pid),
            provenance_gid: self.gid,
            received_ns: monotonic_now_ns(),
            realtime_ns: self.clock.monotonic_to_realtime(ts_ns),
            end_realtime_ns: None,
            stamped_by_agent: true,
        })
    }

    /// The process's incarnation and the labels of its environment; `None` (counted) when
    /// either cannot be read.
    fn read(&mut self, pid: u32) -> Option<(Scope, Vec<(String, String)>)> {
        let read = proc_info(&self.proc_root, pid).and_then(|info| {
            let (bytes, cut) = environ::read(&self.proc_root, pid)?;
            Ok((info.start_time, bytes, cut))
        });
        match read {
            Ok((start_time, bytes, cut)) => {
                self.stats.truncated += u64::from(cut);
                Some((Scope { pid, start_time }, environ::parse(&bytes)))
            }
            Err(_) => {
                self.stats.unreadable += 1;
                None
            }
        }
    }

    /// Forgets an exited process, so the next process given its pid is read afresh.
    pub fn forget(&mut self, pid: u32) {
        self.seen.remove(&pid);
    }

    /// How many pids are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests;
