//! The process-wide state the application threads and the sender share: a handful of atomics,
//! the list of rings the sender has not adopted yet, and the clock, thread-id and errno helpers.
//! Everything here is reset in a forked child by `crate::sender`'s `fork` handlers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::lock::Lock;
use crate::ring::Ring;

/// An agent is connected: events are recorded. Checked first by every call; when false the
/// event is discarded at once.
pub static CONNECTED: AtomicBool = AtomicBool::new(false);
/// Events dropped: a ring was full, or they were in flight when a connection failed.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Bumped in a forked child so that the forking thread's cached tid and ring are renewed.
pub static FORK_GENERATION: AtomicU32 = AtomicU32::new(0);
/// The sender's eventfd (-1 before it exists): written on a ring's half-full transition.
pub static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// Rings made by threads since the sender last looked.
pub static NEW_RINGS: Lock<Vec<Arc<Ring>>> = Lock::new(Vec::new());
/// `NEW_RINGS` is non-empty (so the sender does not take the lock on every tick).
pub static NEW_RINGS_PENDING: AtomicBool = AtomicBool::new(false);

/// Handle counters, process-wide because every linkage unit of the process shares this one
/// library instance; they start at 1 because 0 (NULL) means "no handle" to NVTX.
pub static NEXT_DOMAIN: AtomicU64 = AtomicU64::new(1);
/// Registered-string handles.
pub static NEXT_STRING: AtomicU64 = AtomicU64::new(1);
/// Process-range ids.
pub static NEXT_RANGE: AtomicU64 = AtomicU64::new(1);

/// `CLOCK_MONOTONIC` in ns: the agent's trace clock (and `bpf_ktime_get_ns`'s).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux, so the vDSO
    // call succeeds and leaves errno alone.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The calling thread's kernel id.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Tells the sender to drain now. Called on the half-full transition only, never blocks (the
/// eventfd is non-blocking and an 8-byte add cannot overflow in practice).
pub fn wake_sender() {
    let fd = WAKE_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let _errno = ErrnoGuard::new();
    let one: u64 = 1;
    // SAFETY: `one` is 8 readable bytes; a stale fd (a race with a fork child's reset) only
    // makes write fail, and errno is restored.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Restores the caller's errno on drop, around the library's own system calls on application
/// threads (allocation, thread creation, the eventfd write), so no NVTX call changes errno.
pub struct ErrnoGuard(i32);

impl ErrnoGuard {
    /// Saves errno.
    pub fn new() -> ErrnoGuard {
        // SAFETY: __errno_location returns the calling thread's errno slot.
        ErrnoGuard(unsafe { *libc::__errno_location() })
    }
}

impl Drop for ErrnoGuard {
    fn drop(&mut self) {
        // SAFETY: as in `new`; the slot belongs to this thread.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// Counts one dropped event.
pub fn count_drop(n: u64) {
    DROPPED.fetch_add(n, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_and_errno_survives() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a && a > 0);
        assert!(gettid() > 0);
        // SAFETY: the thread's own errno.
        unsafe { *libc::__errno_location() = 77 };
        {
            let _g = ErrnoGuard::new();
            // SAFETY: as above.
            unsafe { *libc::__errno_location() = 5 };
        }
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, 77);
    }
}
