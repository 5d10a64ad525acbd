//! Slices open on the main sequence: their ends wait here until the stream reaches them, so the
//! main sequence's timestamps stay monotonic, and slices on one track are kept nested (a slice
//! that would outlast the one enclosing it is shortened to end with it).
//!
//! Each slice also keeps where its thread ran ([`Placement`]: the CPU the call returned on,
//! the cgroup), and each track what its ends and instants last stated: an end or instant
//! carries the placement only when it changed (threads rarely move), and after each restart of
//! the sequences (so a reader that lost a chunk learns it again).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::fast_map::FastMap;
// Shared with the reader; the writer's other modules take it from here.
pub(super) use crate::model::Placement;

/// One track's open slices and what was last stated on it.
#[derive(Default)]
struct TrackSlices {
    /// Open slices, innermost last. Kept when empty (until the next file) so the next slice
    /// on the track does not allocate.
    open: Vec<OpenSlice>,
    /// The placement the track's last end or instant stated (`None`: nothing since the last
    /// restart).
    stated: Option<Placement>,
}

impl TrackSlices {
    /// `at` if the track has not stated it since the last restart (and now has).
    #[inline(always)]
    fn restate(&mut self, at: Placement) -> Option<Placement> {
        (self.stated != Some(at)).then(|| {
            self.stated = Some(at);
            at
        })
    }
}

/// A slice still open on a track.
#[derive(Clone, Copy)]
struct OpenSlice {
    begin: u64,
    end: u64,
    at: Placement,
}

/// A slice end due to be written: its time, its track, and the placement to state with it
/// (`None`: unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueEnd {
    pub end: u64,
    pub track: u64,
    pub state: Option<Placement>,
}

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
    tracks: FastMap<u64, TrackSlices>,
}

impl OpenSlices {
    /// Opens `[ts, end]` on `track` (an end before `ts` is taken as `ts`) for a thread that ran
    /// `at`.
    #[inline(always)]
    pub fn begin(&mut self, track: u64, ts: u64, end: u64, at: Placement) -> Begun {
        let mut end = end.max(ts);
        let mut clamped_from_ns = None;
        let stack = &mut self.tracks.entry(track).or_default().open;
        if let Some(outer) = stack.last().map(|o| o.end) {
            if end > outer {
                clamped_from_ns = Some(end - ts);
                end = outer;
            }
        }
        stack.push(OpenSlice { begin: ts, end, at });
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

    /// Takes the earliest end if it is due at or before `ts`.
    #[inline]
    pub fn pop_due(&mut self, ts: u64) -> Option<DueEnd> {
        if self.any_due(ts) { self.pop() } else { None }
    }

    /// Takes the earliest end, due or not.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<DueEnd> {
        let d = self.due.pop()?;
        let Reverse((end, _)) = d.key;
        // Ends on a track come out innermost first, so the stack's top is this slice.
        let state = self.tracks.get_mut(&d.track).and_then(|t| {
            let open = t.open.pop()?;
            t.restate(open.at)
        });
        Some(DueEnd {
            end,
            track: d.track,
            state,
        })
    }

    /// The placement to state with an end or instant written straight away on `track` (late
    /// slices, instants), `None` when the track already stated it.
    #[inline]
    pub fn state_now(&mut self, track: u64, at: Placement) -> Option<Placement> {
        self.tracks.entry(track).or_default().restate(at)
    }

    /// The earliest start of the slices still open (their ends not yet written), if any: a
    /// track's outermost open slice began first on it.
    pub fn earliest_open(&self) -> Option<u64> {
        self.tracks
            .values()
            .filter_map(|t| t.open.first().map(|o| o.begin))
            .min()
    }

    /// The sequences restarted: every track states its placement again.
    pub fn restarted(&mut self) {
        for t in self.tracks.values_mut() {
            t.stated = None;
        }
    }

    /// Forgets the per-track state (a new file); every end must have been taken.
    pub fn clear(&mut self) {
        debug_assert!(self.due.is_empty());
        self.tracks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: Placement = Placement {
        cpu: 3,
        cgroup_id: 9,
    };

    #[test]
    fn ends_come_out_in_time_order_inner_first_and_nested() {
        let mut s = OpenSlices::default();
        assert_eq!(s.begin(1, 10, 100, AT).end, 100);
        // Inner slice on the same track ending at the same time: comes out first.
        assert_eq!(s.begin(1, 20, 100, AT).end, 100);
        // Outlasts the enclosing slice: clamped to its end.
        assert_eq!(
            s.begin(1, 30, 150, AT),
            Begun {
                end: 100,
                clamped_from_ns: Some(120)
            }
        );
        // Another track is independent; an end before the start becomes the start.
        assert_eq!(s.begin(2, 40, 5, AT).end, 40);
        assert_eq!(
            s.earliest_open(),
            Some(10),
            "the outermost slice of track 1"
        );
        assert_eq!(s.pop_due(39), None);
        assert_eq!(s.pop_due(40).map(|d| (d.end, d.track)), Some((40, 2)));
        assert_eq!(s.pop_due(99), None);
        assert_eq!(s.pop_due(100).map(|d| (d.end, d.track)), Some((100, 1)));
        // The track's innermost open slice is now the second one (end 100).
        assert_eq!(
            s.begin(1, 60, 120, AT),
            Begun {
                end: 100,
                clamped_from_ns: Some(60)
            }
        );
        let rest: Vec<_> = std::iter::from_fn(|| s.pop().map(|d| (d.end, d.track))).collect();
        assert_eq!(rest, vec![(100, 1), (100, 1), (100, 1)]);
        assert_eq!(s.earliest_open(), None, "everything ended");
        s.clear();
        assert_eq!(
            s.begin(1, 200, 300, AT).clamped_from_ns,
            None,
            "nothing open"
        );
    }

    #[test]
    fn placement_is_stated_on_change_and_after_a_restart() {
        let mut s = OpenSlices::default();
        let a = Placement {
            cpu: 1,
            cgroup_id: 7,
        };
        let b = Placement { cpu: 2, ..a };
        let mut states = Vec::new();
        for (ts, at) in [(10, a), (30, a), (50, b)] {
            s.begin(1, ts, ts + 10, at);
            states.push(s.pop().map(|d| d.state));
        }
        assert_eq!(
            states,
            vec![Some(Some(a)), Some(None), Some(Some(b))],
            "first, unchanged, moved"
        );
        assert_eq!(
            s.state_now(1, b),
            None,
            "an instant on the same CPU says nothing"
        );
        assert_eq!(s.state_now(2, b), Some(b), "another track states its own");
        s.restarted();
        assert_eq!(s.state_now(1, b), Some(b), "restated after a restart");
        s.begin(1, 70, 80, b);
        assert_eq!(s.pop().and_then(|d| d.state), None);
    }
}
