//! The background sender thread, the `fork` handlers and the exit flush.
//!
//! The sender starts on the process's first NVTX call (and in a forked child on the child's
//! first call; nothing is spawned inside a fork handler). It connects to the agent's Unix
//! stream socket ([`crate::socket_path`]), retrying every second while there is none; on
//! connecting it sends the hello, replays every definition, then sets `CONNECTED`, from which
//! point the application threads record events. Every 2 ms, or at once when a ring passes half
//! full (an eventfd the producers write on that transition only), it drains all rings into
//! frames and writes them; blocking here is fine, the application never waits on it. A failed
//! write clears `CONNECTED`, counts the records lost, and the connect loop resumes.
//!
//! Order on the wire: per tick the sender first reads every ring's head, then copies the new
//! definitions, then the rings up to those heads. A definition is in the registry before its
//! handle is returned, hence before any event using it is published, so it is always sent
//! before (or in the same frame as) the first event that refers to it.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::registry::{self, REGISTRY};
use crate::ring::Ring;
use crate::socket_path::{self, SocketEnv};
use crate::state::{self, CONNECTED, DROPPED, NEW_RINGS, NEW_RINGS_PENDING, WAKE_FD};
use crate::wire::{self, HEADER_LEN, Hello, MAX_FRAME, Record};

/// The sender thread exists (or is being made) in this process.
static STARTED: AtomicBool = AtomicBool::new(false);
/// The connected socket's fd (-1 when none), for the fork child handler to close.
static SOCKET_FD: AtomicI32 = AtomicI32::new(-1);
/// Flush requests (the exit handler bumps it) and the last one the sender completed.
static FLUSH_REQUESTED: AtomicU64 = AtomicU64::new(0);
static FLUSH_DONE: AtomicU64 = AtomicU64::new(0);
/// `exit` has begun: no new sender thread.
static EXITING: AtomicBool = AtomicBool::new(false);
/// The sender has made its first connection attempt (connected or not).
static FIRST_ATTEMPT: AtomicBool = AtomicBool::new(false);
/// How long initialization waits for that first attempt.
const FIRST_ATTEMPT_WAIT_NS: u64 = 50_000_000;

/// Drain period.
const TICK_MS: i32 = 2;
/// Reconnect period.
const RETRY_NS: u64 = 1_000_000_000;
/// How long the exit handler waits for the last flush.
const EXIT_FLUSH_NS: u64 = 100_000_000;

/// Starts the sender if this process has none; cheap when it has.
#[inline]
pub fn ensure_started() {
    if !STARTED.load(Ordering::Relaxed) {
        start();
    }
}

#[cold]
fn start() {
    if EXITING.load(Ordering::Relaxed) || STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let _errno = state::ErrnoGuard::new();
    let spawned = std::thread::Builder::new()
        .name("ingero-nvtx".into())
        .spawn(run);
    // Without a thread the library stays quiet (CONNECTED never becomes true); STARTED stays
    // set so that no later call retries on the application's time.
    drop(spawned);
}

/// Starts the sender and waits (at most [`FIRST_ATTEMPT_WAIT_NS`]) for its first connection
/// attempt, so that the program's first ranges find the agent connected rather than being
/// discarded. Called from `InitializeInjectionNvtx2`: once per linkage unit, before the
/// unit's first NVTX call proceeds, never on an event's path. Without an agent the attempt
/// fails at once (no socket), so the wait is a thread start and a failed `connect`.
pub fn start_and_wait_for_agent() {
    ensure_started();
    let deadline = state::now_ns() + FIRST_ATTEMPT_WAIT_NS;
    while !FIRST_ATTEMPT.load(Ordering::Acquire) && state::now_ns() < deadline {
        let nap = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000,
        };
        // SAFETY: `nap` is a valid timespec; the remainder pointer may be NULL.
        unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
    }
}

/// Installs the fork handlers and the exit flush, once per process.
pub fn install_process_hooks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _errno = state::ErrnoGuard::new();
        // SAFETY: the handlers are `extern "C" fn()` items that live as long as the process
        // (NVTX never unloads a tool that initialized).
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
            libc::atexit(at_exit);
        }
    });
}

/// Takes the locks so that no other thread holds them while the process is copied.
extern "C" fn fork_prepare() {
    REGISTRY.acquire_raw();
    NEW_RINGS.acquire_raw();
}

extern "C" fn fork_parent() {
    NEW_RINGS.release_raw();
    REGISTRY.release_raw();
}

/// The child starts clean: no sender, no connection, no rings; its definitions stay (the
/// handles are still valid in the child) and are replayed on its own connection. Only
/// async-signal-safe work: atomics and close(2).
extern "C" fn fork_child() {
    CONNECTED.store(false, Ordering::Relaxed);
    FIRST_ATTEMPT.store(false, Ordering::Relaxed);
    STARTED.store(false, Ordering::Relaxed);
    FLUSH_REQUESTED.store(0, Ordering::Relaxed);
    FLUSH_DONE.store(0, Ordering::Relaxed);
    state::FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    for fd in [
        SOCKET_FD.swap(-1, Ordering::Relaxed),
        WAKE_FD.swap(-1, Ordering::Relaxed),
    ] {
        if fd >= 0 {
            // SAFETY: the fd was the parent sender's; closing the child's copy leaves the
            // parent's connection alone.
            unsafe { libc::close(fd) };
        }
    }
    // SAFETY: fork_prepare took the lock in this (the forking) thread and no guard exists.
    let rings = unsafe { NEW_RINGS.get_held() };
    // The parent's rings are the parent's: leaked in the child, never freed twice.
    std::mem::forget(std::mem::take(rings));
    NEW_RINGS_PENDING.store(false, Ordering::Relaxed);
    NEW_RINGS.release_raw();
    REGISTRY.release_raw();
}

/// Flushes what is buffered, waiting at most 100 ms, when an agent is connected.
extern "C" fn at_exit() {
    EXITING.store(true, Ordering::Relaxed);
    if !CONNECTED.load(Ordering::Acquire) {
        return;
    }
    let _errno = state::ErrnoGuard::new();
    let seq = FLUSH_REQUESTED.fetch_add(1, Ordering::AcqRel) + 1;
    state::wake_sender();
    let deadline = state::now_ns() + EXIT_FLUSH_NS;
    while FLUSH_DONE.load(Ordering::Acquire) < seq
        && CONNECTED.load(Ordering::Acquire)
        && state::now_ns() < deadline
    {
        let nap = libc::timespec {
            tv_sec: 0,
            tv_nsec: 200_000,
        };
        // SAFETY: `nap` is a valid timespec; the remainder pointer may be NULL.
        unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
    }
}

/// The sender thread's state.
struct Sender {
    env: SocketEnv,
    stream: Option<UnixStream>,
    rings: Vec<Arc<Ring>>,
    /// Per ring, this tick: (head to drain to, closed before that head was read).
    heads: Vec<(usize, bool)>,
    frame: Vec<u8>,
    defs: Vec<u8>,
    /// Bytes of the registry already sent on this connection.
    defs_sent: usize,
    /// The drop total last reported on this connection.
    dropped_sent: u64,
    /// A write failed this tick: the rest is counted as lost.
    failed: bool,
    lost: u64,
    wake_fd: i32,
    next_connect_ns: u64,
}

fn run() {
    block_signals();
    // SAFETY: plain eventfd creation; the flags make it non-blocking and close-on-exec.
    let wake_fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    WAKE_FD.store(wake_fd, Ordering::Relaxed);
    let mut s = Sender {
        env: SocketEnv::from_process(),
        stream: None,
        rings: Vec::new(),
        heads: Vec::new(),
        frame: Vec::with_capacity(MAX_FRAME + 4),
        defs: Vec::new(),
        defs_sent: 0,
        dropped_sent: 0,
        failed: false,
        lost: 0,
        wake_fd,
        next_connect_ns: 0,
    };
    loop {
        s.adopt_rings();
        if s.stream.is_none() {
            s.discard_rings();
            if state::now_ns() >= s.next_connect_ns {
                s.connect();
                FIRST_ATTEMPT.store(true, Ordering::Release);
            }
            if s.stream.is_none() {
                // Nothing to flush without an agent.
                FLUSH_DONE.store(FLUSH_REQUESTED.load(Ordering::Acquire), Ordering::Release);
                s.wait(1000);
                continue;
            }
        }
        s.tick();
        s.wait(TICK_MS);
    }
}

/// The application's signals are never delivered to this thread.
fn block_signals() {
    // SAFETY: `set` is initialised by sigfillset before use; the old mask is not wanted.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

impl Sender {
    fn adopt_rings(&mut self) {
        if NEW_RINGS_PENDING.swap(false, Ordering::Acquire) {
            self.rings.append(&mut NEW_RINGS.lock());
        }
    }

    /// Sleeps up to `ms`, or until a producer or the exit handler writes the eventfd.
    fn wait(&mut self, ms: i32) {
        let mut pfd = libc::pollfd {
            fd: self.wake_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a negative fd is ignored by poll (then it just sleeps).
        unsafe { libc::poll(&mut pfd, 1, ms) };
        if pfd.revents & libc::POLLIN != 0 {
            let mut count = 0u64;
            // SAFETY: reads the 8-byte counter into `count` (non-blocking fd).
            let _ = unsafe { libc::read(self.wake_fd, (&raw mut count).cast(), 8) };
        }
    }

    fn connect(&mut self) {
        self.next_connect_ns = state::now_ns() + RETRY_NS;
        let path = socket_path::socket_path(&self.env, socket_path::is_socket);
        let Ok(stream) = UnixStream::connect(&path) else {
            return;
        };
        let hello = wire::encode_hello(&Hello {
            version: wire::VERSION,
            // SAFETY: getpid cannot fail.
            pid: unsafe { libc::getpid() } as u32,
            monotonic_ns: state::now_ns(),
        });
        // Threads record from here on: whoever has read the hello knows events are being
        // kept. They reach the socket only at the next tick, after the hello and after the
        // definitions that tick replays first.
        CONNECTED.store(true, Ordering::Release);
        if send_all(stream.as_raw_fd(), &hello).is_err() {
            CONNECTED.store(false, Ordering::Release);
            return;
        }
        SOCKET_FD.store(stream.as_raw_fd(), Ordering::Relaxed);
        self.stream = Some(stream);
        self.defs_sent = 0;
        self.dropped_sent = 0;
        self.failed = false;
        self.lost = 0;
    }

    fn disconnect(&mut self) {
        CONNECTED.store(false, Ordering::Release);
        SOCKET_FD.store(-1, Ordering::Relaxed);
        self.stream = None;
        self.next_connect_ns = state::now_ns();
    }

    /// Without an agent: what threads wrote just before the connection went is dropped (and
    /// counted), and exited threads' rings are freed.
    fn discard_rings(&mut self) {
        let mut n = 0;
        self.rings.retain(|r| {
            let closed = r.closed.load(Ordering::Acquire);
            n += r.drain(r.head(), |_| {});
            !closed
        });
        state::count_drop(n as u64);
    }

    fn tick(&mut self) {
        let flush = FLUSH_REQUESTED.load(Ordering::Acquire);
        self.heads.clear();
        for r in &self.rings {
            let closed = r.closed.load(Ordering::Acquire);
            self.heads.push((r.head(), closed));
        }
        self.frame.clear();
        self.frame.extend_from_slice(&[0; 4]);

        self.defs.clear();
        self.defs_sent = registry::copy_since(self.defs_sent, &mut self.defs);
        let defs = std::mem::take(&mut self.defs);
        let mut rest = &defs[..];
        while let Some(size) = rest
            .get(..2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        {
            let Some(rec) = rest.get(..size).filter(|_| size >= HEADER_LEN) else {
                break;
            };
            self.push_record(rec);
            rest = rest.get(size..).unwrap_or_default();
        }
        self.defs = defs;

        let dropped = DROPPED.load(Ordering::Relaxed) + registry::OVERFLOW.load(Ordering::Relaxed);
        if dropped != self.dropped_sent {
            let mut rec = Vec::with_capacity(24);
            wire::encode(
                &Record::Dropped {
                    ts_ns: state::now_ns(),
                    total: dropped,
                },
                &mut rec,
            );
            self.push_record(&rec);
            self.dropped_sent = dropped;
        }

        let rings = std::mem::take(&mut self.rings);
        let heads = std::mem::take(&mut self.heads);
        for (r, &(head, _)) in rings.iter().zip(&heads) {
            r.drain(head, |rec| self.push_record(rec));
        }
        self.send_frame();
        // A ring closed before its head was read has now been drained to its end.
        self.rings = rings
            .into_iter()
            .zip(
                heads
                    .iter()
                    .map(|&(_, closed)| closed)
                    .chain(std::iter::repeat(false)),
            )
            .filter_map(|(r, closed)| (!closed).then_some(r))
            .collect();
        self.heads = heads;

        if self.failed {
            state::count_drop(self.lost);
            self.failed = false;
            self.lost = 0;
            self.disconnect();
        } else {
            FLUSH_DONE.store(flush, Ordering::Release);
        }
    }

    /// Adds one record to the frame, writing the frame first when it would exceed MAX_FRAME.
    fn push_record(&mut self, rec: &[u8]) {
        if self.failed {
            self.lost += 1;
            return;
        }
        if self.frame.len() - 4 + rec.len() > MAX_FRAME {
            self.send_frame();
            if self.failed {
                self.lost += 1;
                return;
            }
        }
        self.frame.extend_from_slice(rec);
    }

    fn send_frame(&mut self) {
        let body = self.frame.len() - 4;
        if body == 0 || self.failed {
            return;
        }
        if let Some(len) = self.frame.get_mut(..4) {
            len.copy_from_slice(&(body as u32).to_le_bytes());
        }
        let ok = match &self.stream {
            Some(s) => send_all(s.as_raw_fd(), &self.frame).is_ok(),
            None => false,
        };
        if !ok {
            self.failed = true;
            self.lost += count_records(self.frame.get(4..).unwrap_or_default());
        }
        self.frame.truncate(4);
    }
}

fn count_records(mut body: &[u8]) -> u64 {
    let mut n = 0;
    while let Ok((_, rest)) = wire::split_record(body) {
        n += 1;
        body = rest;
    }
    n
}

/// Writes all of `buf`, without SIGPIPE if the agent went away (the application's process
/// must not die of it).
fn send_all(fd: i32, mut buf: &[u8]) -> Result<(), ()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for `buf.len()` bytes; MSG_NOSIGNAL turns EPIPE into an error.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            // SAFETY: this thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            return Err(());
        }
        buf = buf.get(n as usize..).unwrap_or_default();
    }
    Ok(())
}
