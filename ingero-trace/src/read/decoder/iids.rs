//! [`IidTable`]: the reader's tables indexed by interning id (and by track uuid and sequence
//! id): a dense vector for the small sequential ids ingero writes, a hash map for the rest.

use crate::fast_map::FastMap;

/// Interning ids at or above this go to a hash map instead of a dense vector, so a corrupt or
/// foreign iid cannot make the reader allocate a huge table.
pub(super) const MAX_DENSE_IID: u64 = 1 << 20;

/// An iid-indexed table: dense for the small sequential ids ingero writes.
pub(super) struct IidTable<T> {
    dense: Vec<Option<T>>,
    sparse: FastMap<u64, T>,
}

impl<T> Default for IidTable<T> {
    fn default() -> Self {
        IidTable {
            dense: Vec::new(),
            sparse: FastMap::default(),
        }
    }
}

impl<T> IidTable<T> {
    #[inline(always)]
    pub(super) fn get_mut(&mut self, iid: u64) -> Option<&mut T> {
        if iid < MAX_DENSE_IID {
            self.dense.get_mut(iid as usize).and_then(Option::as_mut)
        } else {
            self.sparse.get_mut(&iid)
        }
    }

    #[inline(always)]
    pub(super) fn get(&self, iid: u64) -> Option<&T> {
        if iid < MAX_DENSE_IID {
            self.dense.get(iid as usize).and_then(Option::as_ref)
        } else {
            self.sparse.get(&iid)
        }
    }

    pub(super) fn insert(&mut self, iid: u64, v: T) {
        if iid < MAX_DENSE_IID {
            let i = iid as usize;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i] = Some(v);
        } else {
            self.sparse.insert(iid, v);
        }
    }

    pub(super) fn clear(&mut self) {
        self.dense.clear();
        self.sparse.clear();
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let dense = self.dense.iter_mut().filter_map(Option::as_mut);
        dense.chain(self.sparse.values_mut())
    }
}

impl<T: Default> IidTable<T> {
    #[inline]
    pub(super) fn get_or_default(&mut self, iid: u64) -> &mut T {
        if iid < MAX_DENSE_IID {
            let i = iid as usize;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].get_or_insert_with(T::default)
        } else {
            self.sparse.entry(iid).or_default()
        }
    }
}
