//! A spin lock whose state a `fork` handler can take and reset.
//!
//! `std::sync::Mutex` cannot be acquired in `pthread_atfork`'s prepare handler and released in
//! the parent and child handlers (its guard cannot cross those calls). This lock can: the
//! prepare handler takes it with [`Lock::acquire_raw`] so no other thread is inside when the
//! process forks, and both sides release it with [`Lock::release_raw`]. It guards only short,
//! cold sections (a thread registering its ring, a definition, the sender's copies), so
//! spinning with `sched_yield` is enough.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A value behind a spin lock.
pub struct Lock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which exists for one holder at a time
// (the `locked` flag, taken with Acquire and released with Release).
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    /// An unlocked lock.
    pub const fn new(value: T) -> Self {
        Lock {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(value),
        }
    }

    /// Waits for the lock.
    pub fn lock(&self) -> Guard<'_, T> {
        self.acquire_raw();
        Guard(self)
    }

    /// Takes the lock without a guard (the fork prepare handler).
    pub fn acquire_raw(&self) {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
    }

    /// Releases a lock taken with [`Lock::acquire_raw`].
    pub fn release_raw(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// The value, for the fork child handler while it holds the lock taken by prepare.
    ///
    /// # Safety
    /// The caller holds the lock through [`Lock::acquire_raw`] and no guard exists.
    #[expect(
        clippy::mut_from_ref,
        reason = "exclusive by the lock the caller holds"
    )]
    pub unsafe fn get_held(&self) -> &mut T {
        // SAFETY: the caller holds the lock, so nobody else reaches the data.
        unsafe { &mut *self.data.get() }
    }
}

/// Access to a locked value; unlocks on drop.
pub struct Guard<'a, T>(&'a Lock<T>);

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.0.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` makes this the only borrow.
        unsafe { &mut *self.0.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.0.release_raw();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns() {
        let lock = Arc::new(Lock::new(0u64));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let l = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*lock.lock(), 40_000);
    }
}
