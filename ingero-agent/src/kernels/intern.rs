//! One shared `KernelName` per distinct (name, source, truncated), across all processes.
//!
//! The ranks of a job register the same kernels (24k names of 281 bytes on average for
//! libtorch_cuda, per process): interning stores each name and its demangled text once and
//! demangles it once, so the interner is also the demangling cache.
//!
//! Bound: the interner holds at most `capacity` names. When full it drops the names nobody
//! else holds (`Arc::strong_count == 1`: every handle naming them was evicted or its process
//! exited). The store holds at most `total` handles, each naming one interned name, so with
//! `capacity ≥ 2 × total` a sweep frees at least half of the interner, and the O(n) sweep
//! costs O(1) per insert amortized. If a sweep frees nothing (callers hold the names), new
//! names are handed out without being interned.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use super::name::{KernelName, NameSource};

pub(crate) struct NameInterner {
    /// Keyed by a hash of (name, source, truncated); a bucket holds the rare collisions. The
    /// key is a hash rather than the name so the name is stored once, in the `KernelName`.
    buckets: HashMap<u64, Vec<Arc<KernelName>>>,
    hasher: RandomState,
    len: usize,
    capacity: usize,
}

impl NameInterner {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            buckets: HashMap::new(),
            hasher: RandomState::new(),
            len: 0,
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The shared name for these bytes, demangled on first sight.
    pub(crate) fn intern(
        &mut self,
        mangled: &[u8],
        source: NameSource,
        truncated: bool,
    ) -> Arc<KernelName> {
        let key = self.hasher.hash_one((mangled, source, truncated));
        let matches = |name: &Arc<KernelName>| {
            name.mangled.as_bytes() == mangled
                && name.source == source
                && name.truncated == truncated
        };
        if let Some(found) = self
            .buckets
            .get(&key)
            .and_then(|bucket| bucket.iter().find(|name| matches(name)))
        {
            return Arc::clone(found);
        }
        // A name whose bytes are not UTF-8 is stored lossily; the hash of the raw bytes then
        // finds no match next time, which only costs a duplicate, never a wrong name.
        let name = Arc::new(super::name::new_name(mangled, source, truncated));
        if self.len >= self.capacity {
            self.drop_unshared();
        }
        if self.len < self.capacity {
            self.buckets.entry(key).or_default().push(Arc::clone(&name));
            self.len += 1;
        }
        name
    }

    /// Drops the names only the interner holds.
    fn drop_unshared(&mut self) {
        let mut len = 0;
        self.buckets.retain(|_, bucket| {
            bucket.retain(|name| Arc::strong_count(name) > 1);
            len += bucket.len();
            !bucket.is_empty()
        });
        self.len = len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_names_share_one_allocation() {
        let mut interner = NameInterner::new(16);
        let a = interner.intern(b"_Z9my_kernelPf", NameSource::Registration, false);
        let b = interner.intern(b"_Z9my_kernelPf", NameSource::Registration, false);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(interner.len(), 1);
        assert_eq!(&*a.demangled, "my_kernel(float*)");
    }

    #[test]
    fn source_and_truncation_are_part_of_the_identity() {
        let mut interner = NameInterner::new(16);
        let registered = interner.intern(b"_Z9my_kernelPf", NameSource::Registration, false);
        let symtab = interner.intern(b"_Z9my_kernelPf", NameSource::ElfSymtab, false);
        let cut = interner.intern(b"_Z9my_kernelPf", NameSource::Registration, true);
        assert!(!Arc::ptr_eq(&registered, &symtab));
        assert!(!Arc::ptr_eq(&registered, &cut));
        assert_eq!(interner.len(), 3);
    }

    #[test]
    fn a_full_interner_drops_names_nobody_holds() {
        let mut interner = NameInterner::new(4);
        let held: Vec<_> = (0..2)
            .map(|i| {
                interner.intern(
                    format!("held{i}").as_bytes(),
                    NameSource::DriverModule,
                    false,
                )
            })
            .collect();
        for i in 0..2 {
            interner.intern(
                format!("dropped{i}").as_bytes(),
                NameSource::DriverModule,
                false,
            );
        }
        assert_eq!(interner.len(), 4);
        let fresh = interner.intern(b"fresh", NameSource::DriverModule, false);
        assert_eq!(interner.len(), 3, "two unshared names dropped, one added");
        let again = interner.intern(b"held0", NameSource::DriverModule, false);
        assert!(Arc::ptr_eq(&again, &held[0]));
        assert!(Arc::ptr_eq(
            &fresh,
            &interner.intern(b"fresh", NameSource::DriverModule, false)
        ));
    }

    #[test]
    fn a_full_interner_of_held_names_still_returns_names() {
        let mut interner = NameInterner::new(2);
        let _a = interner.intern(b"a", NameSource::DriverModule, false);
        let _b = interner.intern(b"b", NameSource::DriverModule, false);
        let c = interner.intern(b"c", NameSource::DriverModule, false);
        assert_eq!(&*c.mangled, "c");
        assert_eq!(interner.len(), 2);
    }
}
