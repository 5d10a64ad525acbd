//! [`PidSlots`]: numbers the processes of a scan densely (0, 1, 2, ... in order of first
//! appearance) so per-process state lives in vectors. Consecutive events mostly come from the
//! same process, so the last answer is checked before the map.

use ingero_trace::fast_map::FastMap;

/// Process id to dense slot.
#[derive(Default)]
pub struct PidSlots {
    /// The process of each slot.
    pub pids: Vec<u32>,
    slot_of: FastMap<u32, usize>,
    last: Option<(u32, usize)>,
}

impl PidSlots {
    /// The slot of `pid`; a process seen for the first time gets the next slot, and `new` is
    /// called so the caller can grow its per-slot state.
    #[inline]
    pub fn slot(&mut self, pid: u32, new: impl FnOnce()) -> usize {
        if let Some((p, s)) = self.last {
            if p == pid {
                return s;
            }
        }
        self.slot_slow(pid, new)
    }

    #[inline(never)]
    fn slot_slow(&mut self, pid: u32, new: impl FnOnce()) -> usize {
        let s = match self.slot_of.get(&pid) {
            Some(s) => *s,
            None => {
                let s = self.pids.len();
                self.pids.push(pid);
                self.slot_of.insert(pid, s);
                new();
                s
            }
        };
        self.last = Some((pid, s));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_dense_and_stable() {
        let mut p = PidSlots::default();
        let mut created = 0;
        assert_eq!(p.slot(70, || created += 1), 0);
        assert_eq!(p.slot(70, || created += 1), 0);
        assert_eq!(p.slot(9, || created += 1), 1);
        assert_eq!(
            p.slot(70, || created += 1),
            0,
            "an earlier process keeps its slot"
        );
        assert_eq!(p.slot(9, || created += 1), 1);
        assert_eq!(created, 2);
        assert_eq!(p.pids, [70, 9]);
    }
}
