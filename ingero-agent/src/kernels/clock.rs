//! A map with a bounded size that evicts by CLOCK (second chance), the replacement policy of
//! every bounded table in `kernels/`.
//!
//! Why CLOCK and not exact LRU: a lookup is the hot path (one per kernel launch, up to some
//! 100k a second) and under CLOCK it only sets a bit, where an LRU list would relink two
//! nodes. The workload suits it: names arrive in bursts at library load (24k for
//! libtorch_cuda) and a small hot set is launched over and over; an entry looked up since the
//! hand last passed it survives one more round, so the hot set stays and names registered but
//! never launched leave first. It approximates LRU: among entries not looked up since the
//! hand's last pass, the one the hand reaches first goes, which need not be the oldest.

use std::collections::HashMap;
use std::hash::Hash;

/// One entry of the ring.
struct Slot<K, V> {
    key: K,
    value: V,
    /// Looked up since the hand last passed: spared once.
    referenced: bool,
}

/// A hash map whose entries also sit in a ring that a CLOCK hand sweeps to pick a victim.
/// The map itself never evicts: `insert` grows it, and the owner calls [`ClockMap::evict_one`]
/// (or [`ClockMap::insert_bounded`]) when its own bound says so.
pub(crate) struct ClockMap<K, V> {
    positions: HashMap<K, usize>,
    ring: Vec<Slot<K, V>>,
    hand: usize,
}

impl<K: Hash + Eq + Copy, V> ClockMap<K, V> {
    pub(crate) fn new() -> Self {
        Self {
            positions: HashMap::new(),
            ring: Vec::new(),
            hand: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    pub(crate) fn contains(&self, key: &K) -> bool {
        self.positions.contains_key(key)
    }

    /// The value, marked as used (it survives the hand's next pass).
    pub(crate) fn get(&mut self, key: &K) -> Option<&V> {
        let position = *self.positions.get(key)?;
        let slot = self.ring.get_mut(position)?;
        slot.referenced = true;
        Some(&slot.value)
    }

    /// The value, without marking it as used.
    pub(crate) fn peek(&self, key: &K) -> Option<&V> {
        let position = *self.positions.get(key)?;
        self.ring.get(position).map(|slot| &slot.value)
    }

    /// Inserts or replaces; returns the value replaced. New entries start unreferenced, so a
    /// name registered and never launched is the first candidate for eviction.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        if let Some(&position) = self.positions.get(&key) {
            if let Some(slot) = self.ring.get_mut(position) {
                slot.referenced = true;
                return Some(std::mem::replace(&mut slot.value, value));
            }
        }
        self.positions.insert(key, self.ring.len());
        self.ring.push(Slot {
            key,
            value,
            referenced: false,
        });
        None
    }

    /// Inserts a new key, first evicting one entry if the map holds `capacity` already.
    /// Returns whether an entry was evicted to make room.
    pub(crate) fn insert_bounded(&mut self, key: K, value: V, capacity: usize) -> bool {
        let evicted =
            !self.contains(&key) && self.len() >= capacity.max(1) && self.evict_one().is_some();
        self.insert(key, value);
        evicted
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let position = self.positions.remove(key)?;
        let slot = self.ring.swap_remove(position);
        // The last slot moved into the hole: its position changed.
        if let Some(moved) = self.ring.get(position) {
            self.positions.insert(moved.key, position);
        }
        if self.hand >= self.ring.len() {
            self.hand = 0;
        }
        Some(slot.value)
    }

    /// Evicts the first entry the hand finds unreferenced, clearing the bits it passes. Ends
    /// within two turns of the ring: after one turn every bit is clear.
    pub(crate) fn evict_one(&mut self) -> Option<(K, V)> {
        let len = self.ring.len();
        for _ in 0..=len.saturating_mul(2) {
            if self.hand >= len {
                self.hand = 0;
            }
            let slot = self.ring.get_mut(self.hand)?;
            if slot.referenced {
                slot.referenced = false;
                self.hand += 1;
                continue;
            }
            let key = slot.key;
            return self.remove(&key).map(|value| (key, value));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_unreferenced_entries_before_looked_up_ones() {
        let mut map = ClockMap::new();
        for key in 0..4u64 {
            map.insert(key, key * 10);
        }
        assert_eq!(map.get(&0), Some(&0));
        assert_eq!(map.get(&1), Some(&10));
        // 0 and 1 were looked up: the hand spares them and takes 2.
        assert_eq!(map.evict_one(), Some((2, 20)));
        assert_eq!(map.evict_one(), Some((3, 30)));
        // Their bits were cleared on the first pass: now they go too.
        assert!(map.evict_one().is_some());
        assert!(map.evict_one().is_some());
        assert_eq!(map.evict_one(), None);
        assert_eq!(map.len(), 0);
    }

    #[test]
    fn insert_bounded_keeps_the_size_and_reports_evictions() {
        let mut map = ClockMap::new();
        let mut evictions = 0;
        for key in 0..100u64 {
            evictions += usize::from(map.insert_bounded(key, (), 10));
        }
        assert_eq!(map.len(), 10);
        assert_eq!(evictions, 90);
        // Replacing an existing key never evicts.
        let present = *map.positions.keys().next().expect("one key");
        assert!(!map.insert_bounded(present, (), 10));
        assert_eq!(map.len(), 10);
    }

    #[test]
    fn remove_keeps_positions_consistent() {
        let mut map = ClockMap::new();
        for key in 0..5u64 {
            map.insert(key, key);
        }
        assert_eq!(map.remove(&1), Some(1));
        assert_eq!(map.remove(&1), None);
        for key in [0u64, 2, 3, 4] {
            assert_eq!(map.peek(&key), Some(&key));
        }
        assert_eq!(map.insert(3, 33), Some(3));
        assert_eq!(map.peek(&3), Some(&33));
        assert_eq!(map.len(), 4);
    }
}
