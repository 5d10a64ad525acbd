//! Slices open on the main sequence: their ends wait here until the stream reaches them, so the
//! main sequence's timestamps stay monotonic, and slices on one track are kept nested (a slice
//! that would outlast the one enclosing it is shortened to end with it).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::fast_map::FastMap;

/// A slice end waiting for the stream to reach its time.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    /// Earliest end first; at equal ends the later-begun (inner) slice first.
    key: Reverse<(u64, Reverse<u64>)>,
    track: u64,
}

/// What [`OpenSlices::begin`] decided about a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Begun {
    /// The end to write (clamped to the enclosing open slice's end).
    pub end: u64,
    /// The original duration, when it was clamped.
    pub clamped_from_ns: Option<u64>,
}

#[derive(Default)]
pub struct OpenSlices {
    due: BinaryHeap<Due>,
    begun: u64,
    /// Per track: end times of its open slices, innermost last. Empty stacks are kept (until
    /// the next file) so the next slice on the track does not allocate.
    open: FastMap<u64, Vec<u64>>,
}

impl OpenSlices {
    /// Opens `[ts, end]` on `track` (an end before `ts` is taken as `ts`).
    #[inline]
    pub fn begin(&mut self, track: u64, ts: u64, end: u64) -> Begun {
        let mut end = end.max(ts);
        let mut clamped_from_ns = None;
        let stack = self.open.entry(track).or_default();
        if let Some(outer) = stack.last().copied() {
            if end > outer {
                clamped_from_ns = Some(end - ts);
                end = outer;
            }
        }
        stack.push(end);
        self.begun += 1;
        self.due.push(Due {
            key: Reverse((end, Reverse(self.begun))),
            track,
        });
        Begun {
            end,
            clamped_from_ns,
        }
    }

    /// Whether an end is due at or before `ts`.
    #[inline(always)]
    pub fn any_due(&self, ts: u64) -> bool {
        self.due.peek().is_some_and(|d| (d.key.0).0 <= ts)
    }

    /// Takes the earliest end if it is due at or before `ts`: `(end, track)`.
    #[inline]
    pub fn pop_due(&mut self, ts: u64) -> Option<(u64, u64)> {
        if self.any_due(ts) { self.pop() } else { None }
    }

    /// Takes the earliest end, due or not: `(end, track)`.
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        let d = self.due.pop()?;
        if let Some(stack) = self.open.get_mut(&d.track) {
            stack.pop();
        }
        let Reverse((end, _)) = d.key;
        Some((end, d.track))
    }

    /// Forgets the per-track stacks (a new file); every end must have been taken.
    pub fn clear(&mut self) {
        debug_assert!(self.due.is_empty());
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_come_out_in_time_order_inner_first_and_nested() {
        let mut s = OpenSlices::default();
        assert_eq!(s.begin(1, 10, 100).end, 100);
        // Inner slice on the same track ending at the same time: comes out first.
        assert_eq!(s.begin(1, 20, 100).end, 100);
        // Outlasts the enclosing slice: clamped to its end.
        assert_eq!(
            s.begin(1, 30, 150),
            Begun {
                end: 100,
                clamped_from_ns: Some(120)
            }
        );
        // Another track is independent; an end before the start becomes the start.
        assert_eq!(s.begin(2, 40, 5).end, 40);
        assert_eq!(s.pop_due(39), None);
        assert_eq!(s.pop_due(40), Some((40, 2)));
        assert_eq!(s.pop_due(99), None);
        assert_eq!(s.pop_due(100), Some((100, 1)));
        // The track's innermost open slice is now the second one (end 100).
        assert_eq!(
            s.begin(1, 60, 120),
            Begun {
                end: 100,
                clamped_from_ns: Some(60)
            }
        );
        let rest: Vec<_> = std::iter::from_fn(|| s.pop()).collect();
        assert_eq!(rest, vec![(100, 1), (100, 1), (100, 1)]);
        s.clear();
        assert_eq!(s.begin(1, 200, 300).clamped_from_ns, None, "nothing open");
    }
}
