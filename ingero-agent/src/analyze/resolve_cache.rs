//! [`ResolveCache`]: per process, the groups the last label lookup resolved to and the time
//! interval over which that answer holds. Records arrive nearly in time order and labels change
//! far more slowly than events, so most events reuse the previous answer instead of searching
//! the label index and hashing a group key.

/// Processes remembered at once; beyond that the oldest entry is replaced.
const ENTRIES: usize = 16;

/// One process's last answer: group slots valid for events in `[start, end)`.
struct Entry {
    pid: u32,
    start: u64,
    end: u64,
    slots: Vec<u32>,
}

/// The last resolved groups of the most recent processes.
#[derive(Default)]
pub struct ResolveCache {
    entries: Vec<Entry>,
    /// The entry hit last: consecutive events usually come from the same process.
    last: usize,
    /// The entry replaced next when all are taken.
    victim: usize,
}

impl ResolveCache {
    /// The group slots of an event of `pid` at `t`, if a previous answer covers `t`.
    #[inline]
    pub fn get(&mut self, pid: u32, t: u64) -> Option<&[u32]> {
        let i = match self.entries.get(self.last) {
            Some(e) if e.pid == pid => self.last,
            _ => {
                let i = self.entries.iter().position(|e| e.pid == pid)?;
                self.last = i;
                i
            }
        };
        let e = self.entries.get(i)?;
        (e.start <= t && t < e.end).then_some(e.slots.as_slice())
    }

    /// The slots of the entry answered or stored last.
    #[inline]
    pub fn current(&self) -> &[u32] {
        self.entries
            .get(self.last)
            .map_or(&[], |e| e.slots.as_slice())
    }

    /// Remembers that events of `pid` in `[start, end)` belong to `slots`.
    pub fn put(&mut self, pid: u32, start: u64, end: u64, slots: &[u32]) {
        let i = match self.entries.iter().position(|e| e.pid == pid) {
            Some(i) => i,
            None if self.entries.len() < ENTRIES => {
                self.entries.push(Entry {
                    pid,
                    start,
                    end,
                    slots: Vec::new(),
                });
                self.entries.len() - 1
            }
            None => {
                let i = self.victim;
                self.victim = (self.victim + 1) % ENTRIES;
                i
            }
        };
        if let Some(e) = self.entries.get_mut(i) {
            e.pid = pid;
            e.start = start;
            e.end = end;
            e.slots.clear();
            e.slots.extend_from_slice(slots);
        }
        self.last = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_inside_the_interval_of_the_same_process() {
        let mut c = ResolveCache::default();
        assert!(c.get(7, 10).is_none());
        c.put(7, 10, 20, &[3]);
        assert_eq!(c.get(7, 10), Some(&[3][..]));
        assert_eq!(c.get(7, 19), Some(&[3][..]));
        assert!(c.get(7, 20).is_none(), "the end is exclusive");
        assert!(
            c.get(7, 9).is_none(),
            "an earlier (late-arriving) event misses"
        );
        assert!(c.get(8, 15).is_none(), "another process misses");
        assert_eq!(c.current(), &[3], "the entry answered last");
        c.put(8, 0, 100, &[]);
        assert!(c.current().is_empty(), "the entry stored last");
        assert_eq!(c.get(8, 15), Some(&[][..]), "no group is an answer too");
        assert_eq!(
            c.get(7, 15),
            Some(&[3][..]),
            "the first process is still there"
        );
    }

    #[test]
    fn replaces_an_entry_when_full_and_updates_in_place() {
        let mut c = ResolveCache::default();
        for pid in 0..ENTRIES as u32 {
            c.put(pid, 0, 10, &[pid]);
        }
        c.put(0, 10, 20, &[42, 43]);
        assert_eq!(c.get(0, 15), Some(&[42, 43][..]));
        assert!(c.get(0, 5).is_none(), "the old interval was replaced");
        c.put(99, 0, 10, &[1]);
        assert_eq!(c.get(99, 5), Some(&[1][..]));
        assert_eq!(c.entries.len(), ENTRIES, "bounded");
    }
}
