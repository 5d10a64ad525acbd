//! [`IidTable`]: the reader's tables indexed by interning id (and by track uuid and sequence
//! id): a dense vector for the small sequential ids ingero writes, a hash map for the rest.

use crate::fast_map::FastMap;

/// Interning ids at or above this go to a hash map instead of a dense vector, so a corrupt or
/// foreign iid cannot make the reader allocate a huge table.
pub(super) const MAX_DENSE_IID: u64 = 1 << 20;

/// An iid-indexed table: dense for the small sequential ids ingero writes. The dense part
/// grows to an iid only while it stays about half full (the iid is below twice the entries,
/// plus a few), so a corrupt or foreign iid costs one entry in the map, not a table up to it.
/// An iid below `dense.len()` lives in `dense`, any other in `sparse`.
pub(super) struct IidTable<T> {
    dense: Vec<Option<T>>,
    sparse: FastMap<u64, T>,
    /// Entries in both.
    len: usize,
}

impl<T> Default for IidTable<T> {
    fn default() -> Self {
        IidTable {
            dense: Vec::new(),
            sparse: FastMap::default(),
            len: 0,
        }
    }
}

impl<T> IidTable<T> {
    #[inline(always)]
    pub(super) fn get_mut(&mut self, iid: u64) -> Option<&mut T> {
        if iid < self.dense.len() as u64 {
            self.dense[iid as usize].as_mut()
        } else {
            self.sparse.get_mut(&iid)
        }
    }

    #[inline(always)]
    pub(super) fn get(&self, iid: u64) -> Option<&T> {
        if iid < self.dense.len() as u64 {
            self.dense[iid as usize].as_ref()
        } else {
            self.sparse.get(&iid)
        }
    }

    /// `iid`'s slot in `dense`, grown to it if the table of `len` entries stays about half
    /// full; `None` when `iid` belongs in `sparse`.
    fn dense_slot<'a>(
        dense: &'a mut Vec<Option<T>>,
        sparse: &mut FastMap<u64, T>,
        len: usize,
        iid: u64,
    ) -> Option<&'a mut Option<T>> {
        let had = dense.len() as u64;
        if iid >= had {
            if iid >= MAX_DENSE_IID || iid >= 2 * len as u64 + 16 {
                return None;
            }
            dense.resize_with(iid as usize + 1, || None);
            // What the map held in the new range moves in: one home per iid.
            if !sparse.is_empty() {
                for i in had..=iid {
                    if let Some(v) = sparse.remove(&i) {
                        dense[i as usize] = Some(v);
                    }
                }
            }
        }
        dense.get_mut(iid as usize)
    }

    pub(super) fn insert(&mut self, iid: u64, v: T) {
        let old = match Self::dense_slot(&mut self.dense, &mut self.sparse, self.len, iid) {
            Some(slot) => slot.replace(v),
            None => self.sparse.insert(iid, v),
        };
        self.len += usize::from(old.is_none());
    }

    pub(super) fn clear(&mut self) {
        self.dense.clear();
        self.sparse.clear();
        self.len = 0;
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let dense = self.dense.iter_mut().filter_map(Option::as_mut);
        dense.chain(self.sparse.values_mut())
    }
}

impl<T: Default> IidTable<T> {
    #[inline]
    pub(super) fn get_or_default(&mut self, iid: u64) -> &mut T {
        let IidTable { dense, sparse, len } = self;
        match Self::dense_slot(dense, sparse, *len, iid) {
            Some(slot) => {
                *len += usize::from(slot.is_none());
                slot.get_or_insert_with(T::default)
            }
            None => sparse.entry(iid).or_insert_with(|| {
                *len += 1;
                T::default()
            }),
        }
    }
}
