//! Process exits that wait for the CUDA ring before the pipeline forgets the process.
//!
//! An exit is read from the scheduler ring, a process's last CUDA calls from the CUDA ring, and
//! the agent drains the two rings one after the other: when the agent runs only after a short
//! program has launched and exited (a busy machine), both rings are ready and either may be
//! drained first. Forgetting the process at its exit then strips its last launches of their
//! kernel names (learned moments before, now forgotten, and the process is gone, so the ELF
//! fallback cannot read them either) and of their graphs, re-creates a dead process in the GPU
//! memory table, and leaves a stale rank entry that hides the next process given that pid.
//!
//! So an exit takes effect only after a drain of the CUDA ring that began after the exit was
//! read: every CUDA record of that process was written before its exit, so that drain took
//! them all. [`ExitMark`] is the point a drain begins at.

use std::collections::VecDeque;

/// Exits waiting at most; past it the oldest takes effect at once, counted.
pub const MAX_WAITING_EXITS: usize = 4096;

/// A point in the sequence of exits read: a CUDA drain that began there settles the exits read
/// before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitMark(u64);

/// The exits read and not yet settled, oldest first.
#[derive(Debug, Default)]
pub struct WaitingExits {
    /// (sequence number, pid).
    queue: VecDeque<(u64, u32)>,
    next: u64,
    /// Exits settled before a CUDA drain had passed them, because the queue was full (the
    /// process's last launches may then lose their kernel names).
    pub settled_early: u64,
}

impl WaitingExits {
    /// Queues the exit of `pid`; returns the oldest waiting pid when the queue was full, which
    /// the caller settles now.
    pub fn push(&mut self, pid: u32) -> Option<u32> {
        let evicted = if self.queue.len() >= MAX_WAITING_EXITS {
            self.settled_early += 1;
            self.queue.pop_front().map(|(_, pid)| pid)
        } else {
            None
        };
        self.queue.push_back((self.next, pid));
        self.next += 1;
        evicted
    }

    /// Where a CUDA drain beginning now stands.
    pub fn mark(&self) -> ExitMark {
        ExitMark(self.next)
    }

    /// The oldest exit read before `mark`, removed; `None` when there is none.
    pub fn pop_before(&mut self, mark: ExitMark) -> Option<u32> {
        match self.queue.front() {
            Some(&(seq, pid)) if seq < mark.0 => {
                self.queue.pop_front();
                Some(pid)
            }
            _ => None,
        }
    }

    /// How many exits wait.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_settles_only_the_exits_read_before_it_began() {
        let mut w = WaitingExits::default();
        w.push(1);
        let mark = w.mark();
        w.push(2);
        assert_eq!(w.pop_before(mark), Some(1));
        assert_eq!(w.pop_before(mark), None, "read after the drain began");
        assert_eq!(w.pop_before(w.mark()), Some(2));
        assert!(w.is_empty());
    }

    #[test]
    fn a_full_queue_settles_its_oldest_exit_and_counts_it() {
        let mut w = WaitingExits::default();
        for pid in 0..MAX_WAITING_EXITS as u32 {
            assert_eq!(w.push(pid), None);
        }
        assert_eq!(w.push(99_999), Some(0));
        assert_eq!((w.len(), w.settled_early), (MAX_WAITING_EXITS, 1));
        let mark = w.mark();
        let mut settled = Vec::new();
        while let Some(pid) = w.pop_before(mark) {
            settled.push(pid);
        }
        assert_eq!(settled.first(), Some(&1));
        assert_eq!(settled.last(), Some(&99_999));
        assert_eq!(settled.len(), MAX_WAITING_EXITS);
    }
}
