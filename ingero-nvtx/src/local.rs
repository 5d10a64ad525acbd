//! What each application thread keeps: its tid, its ring and its push/pop depth per domain,
//! and the event functions the NVTX handlers call.
//!
//! The hot path (an agent connected, the thread warmed up) is: one relaxed load of
//! `CONNECTED`, one TLS access, a depth update, `clock_gettime`, the record written into the
//! ring and one release store. It takes no lock, makes no allocation and no system call. The
//! warm-up, on a thread's first recorded event, allocates the ring and hands it to the sender
//! under a lock; a new domain on a thread grows its depth table once.
//!
//! Without an agent, calls only keep the depths (push and pop return real depths either way).
//! After a `fork`, the child's first call renews the forking thread's tid and ring.

use std::cell::{Cell, UnsafeCell};
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::fast::{self, RawAttrs};
use crate::ffi::NO_PUSH_POP_TRACKING;
use crate::ring::{Ring, Written};
use crate::state::{self, CONNECTED, FORK_GENERATION};
use crate::wire::kind;

/// One thread's state.
struct Inner {
    /// `FORK_GENERATION` when `tid` and `ring` were set.
    generation: u32,
    /// 0 until the first call.
    tid: u32,
    ring: Option<Arc<Ring>>,
    /// (domain, depth): the open push ranges per domain.
    depths: Vec<(u64, i32)>,
}

struct Local {
    /// Inside a call already (a signal handler calling NVTX mid-call): the nested call is
    /// ignored rather than aliasing the state.
    busy: Cell<bool>,
    inner: UnsafeCell<Inner>,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The thread is exiting: the sender drains what is left, then frees the ring.
        if let Some(ring) = self.inner.get_mut().ring.take() {
            ring.closed.store(true, Ordering::Release);
        }
    }
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            busy: Cell::new(false),
            inner: UnsafeCell::new(Inner { generation: 0, tid: 0, ring: None, depths: Vec::new() }),
        }
    };
}

/// Runs `f` on this thread's state; `fallback` when the state is gone (a call from a TLS
/// destructor at thread exit) or busy (a nested call).
#[inline]
fn with<R>(fallback: R, f: impl FnOnce(&mut Inner) -> R) -> R {
    LOCAL
        .try_with(|l| {
            if l.busy.replace(true) {
                return None;
            }
            // SAFETY: `busy` was false, so no other reference into `inner` exists on this
            // thread, and TLS is not shared with other threads; it is set back below.
            let inner = unsafe { &mut *l.inner.get() };
            inner.refresh();
            let r = f(inner);
            l.busy.set(false);
            Some(r)
        })
        .ok()
        .flatten()
        .unwrap_or(fallback)
}

impl Inner {
    /// Sets the tid on the first call, and again in a forked child (whose copy of this
    /// thread's ring belongs to the parent's sender: it is left alone, and leaked).
    #[inline]
    fn refresh(&mut self) {
        let generation = FORK_GENERATION.load(Ordering::Relaxed);
        if self.tid == 0 || self.generation != generation {
            self.generation = generation;
            self.tid = state::gettid();
            if let Some(old) = self.ring.take() {
                std::mem::forget(old);
            }
        }
    }

    fn slot(&mut self, domain: u64) -> Option<&mut i32> {
        if let Some(i) = self.depths.iter().position(|&(d, _)| d == domain) {
            return self.depths.get_mut(i).map(|(_, depth)| depth);
        }
        let _errno = state::ErrnoGuard::new();
        if self.depths.capacity() == 0 {
            self.depths.reserve(4);
        }
        self.depths.push((domain, 0));
        self.depths.last_mut().map(|(_, depth)| depth)
    }

    /// The level of the range being opened (0-based).
    fn push_depth(&mut self, domain: u64) -> c_int {
        match self.slot(domain) {
            Some(d) => {
                *d = d.saturating_add(1);
                *d - 1
            }
            None => NO_PUSH_POP_TRACKING,
        }
    }

    /// The level of the range being closed, or -1 when none is open (NVTX: "a negative value
    /// on error").
    fn pop_depth(&mut self, domain: u64) -> c_int {
        match self.slot(domain) {
            Some(d) if *d > 0 => {
                *d -= 1;
                *d
            }
            Some(_) => -1,
            None => NO_PUSH_POP_TRACKING,
        }
    }

    /// Writes one record of at most `max` bytes into this thread's ring.
    #[inline]
    fn emit(&mut self, max: usize, fill: impl FnOnce(&mut [u8], u32, u64) -> usize) {
        if self.ring.is_none() {
            self.ring = Some(new_ring());
        }
        let Some(ring) = &self.ring else { return };
        let (tid, ts) = (self.tid, state::now_ns());
        match ring.write(max, |buf| fill(buf, tid, ts)) {
            Written::Ok => {}
            Written::HalfFull => state::wake_sender(),
            Written::Full => state::count_drop(1),
        }
    }
}

/// The warm-up: a ring for this thread, handed to the sender.
#[cold]
fn new_ring() -> Arc<Ring> {
    let _errno = state::ErrnoGuard::new();
    let ring = Arc::new(Ring::new());
    state::NEW_RINGS.lock().push(Arc::clone(&ring));
    state::NEW_RINGS_PENDING.store(true, Ordering::Release);
    ring
}

#[inline]
fn connected() -> bool {
    CONNECTED.load(Ordering::Relaxed)
}

/// `nvtxRangePush*`: the level of the new range.
#[inline]
pub fn push<'a>(domain: u64, attrs: impl FnOnce() -> RawAttrs<'a>) -> c_int {
    with(NO_PUSH_POP_TRACKING, |t| {
        let level = t.push_depth(domain);
        if connected() {
            let a = attrs();
            t.emit(fast::event_bound(kind::PUSH, &a), |buf, tid, ts| {
                fast::encode_event(buf, kind::PUSH, tid, ts, domain, 0, &a)
            });
        }
        level
    })
}

/// `nvtxRangePop`: the level of the range closed, -1 when none was open.
#[inline]
pub fn pop(domain: u64) -> c_int {
    with(NO_PUSH_POP_TRACKING, |t| {
        let level = t.pop_depth(domain);
        if level >= 0 && connected() {
            t.emit(fast::CLOSE_BOUND, |buf, tid, ts| {
                fast::encode_close(buf, tid, ts, domain, None)
            });
        }
        level
    })
}

/// `nvtxRangeStart*`: a fresh id (never 0), whether or not an agent listens.
#[inline]
pub fn start<'a>(domain: u64, attrs: impl FnOnce() -> RawAttrs<'a>) -> u64 {
    let id = state::NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
    if connected() {
        with((), |t| {
            let a = attrs();
            t.emit(fast::event_bound(kind::START, &a), |buf, tid, ts| {
                fast::encode_event(buf, kind::START, tid, ts, domain, id, &a)
            });
        });
    }
    id
}

/// `nvtxRangeEnd`.
#[inline]
pub fn end(domain: u64, id: u64) {
    if connected() {
        with((), |t| {
            t.emit(fast::CLOSE_BOUND, |buf, tid, ts| {
                fast::encode_close(buf, tid, ts, domain, Some(id))
            });
        });
    }
}

/// `nvtxMark*`.
#[inline]
pub fn mark<'a>(domain: u64, attrs: impl FnOnce() -> RawAttrs<'a>) {
    if connected() {
        with((), |t| {
            let a = attrs();
            t.emit(fast::event_bound(kind::MARK, &a), |buf, tid, ts| {
                fast::encode_event(buf, kind::MARK, tid, ts, domain, 0, &a)
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_are_per_domain_and_underflow_is_negative() {
        // CONNECTED is false in unit tests: only the depths are kept.
        assert_eq!(push(0, || RawAttrs::message(fast::RawMessage::None)), 0);
        assert_eq!(push(0, || RawAttrs::message(fast::RawMessage::None)), 1);
        assert_eq!(push(7, || RawAttrs::message(fast::RawMessage::None)), 0);
        assert_eq!(pop(0), 1);
        assert_eq!(pop(7), 0);
        assert_eq!(pop(0), 0);
        assert_eq!(pop(0), -1);
        assert_eq!(pop(9), -1);
        assert_ne!(start(0, || RawAttrs::message(fast::RawMessage::None)), 0);
    }
}
