//! A map keyed by (pid, handle) that forgets its oldest keys past a bound ([`Bounded`]): what
//! the pipeline remembers of each process's handles (CUDA graphs, NCCL communicators) costs a
//! fixed amount of memory however many a program makes.

use std::collections::{HashMap, VecDeque};

/// A process's handle.
pub type Key = (u32, u64);

/// A map that keeps at most `MAX` keys, forgetting the oldest inserted first.
pub struct Bounded<V, const MAX: usize> {
    map: HashMap<Key, V>,
    /// The keys in the map, oldest first (each once).
    order: VecDeque<Key>,
}

impl<V, const MAX: usize> Default for Bounded<V, MAX> {
    fn default() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<V, const MAX: usize> Bounded<V, MAX> {
    /// Inserts (or replaces) `key`'s value; returns whether an older key had to go.
    pub fn insert(&mut self, key: Key, v: V) -> bool {
        let mut evicted = false;
        if self.map.insert(key, v).is_none() {
            self.order.push_back(key);
            while self.map.len() > MAX {
                match self.order.pop_front() {
                    Some(old) => evicted |= self.map.remove(&old).is_some(),
                    None => break,
                }
            }
        }
        evicted
    }

    pub fn get(&self, key: &Key) -> Option<&V> {
        self.map.get(key)
    }

    pub fn get_mut(&mut self, key: &Key) -> Option<&mut V> {
        self.map.get_mut(key)
    }

    /// Removes `key`, from the order too: a key inserted again later is the newest, and no
    /// removed key is left to hold the order's memory. Linear in the keys held; removals are
    /// rare (a capture's end, a communicator's destruction).
    pub fn remove(&mut self, key: &Key) -> Option<V> {
        let v = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(v)
    }

    /// Forgets every key of process `pid` (it exited; its pid may be reused).
    pub fn retain_pid(&mut self, pid: u32) {
        self.map.retain(|k, _| k.0 != pid);
        self.order.retain(|k| k.0 != pid);
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_key_goes_first_and_a_removed_one_comes_back_as_the_newest() {
        let mut b = Bounded::<char, 2>::default();
        assert!(!b.insert((1, 10), 'a'));
        assert!(!b.insert((1, 11), 'b'));
        assert_eq!(b.remove(&(1, 10)), Some('a'));
        // Back as the newest: (1, 11) is now the oldest and goes first.
        assert!(!b.insert((1, 10), 'c'));
        assert!(b.insert((2, 12), 'd'));
        assert_eq!(b.get(&(1, 11)), None);
        assert_eq!((b.get(&(1, 10)), b.get(&(2, 12))), (Some(&'c'), Some(&'d')));
        b.retain_pid(1);
        assert_eq!(b.len(), 1);
        assert_eq!(b.order.len(), 1);
    }

    #[test]
    fn inserting_and_removing_forever_holds_no_memory() {
        let mut b = Bounded::<(), 4>::default();
        for h in 0..10_000 {
            b.insert((1, h), ());
            b.remove(&(1, h));
        }
        assert!(b.is_empty());
        assert!(b.order.is_empty());
    }
}
