//! A non-blocking client for the agent's annotation socket.
//!
//! It never blocks and never fails the caller because of the agent: without
//! an agent it is a silent no-op that retries the connection with backoff;
//! when the socket buffer is full the line is dropped and counted; a
//! connection lost mid-run is re-established lazily. Only invalid labels are
//! reported, as a [`Rejection`] from the same contract the agent enforces.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::encode::{EncodeOptions, encode_into};
use crate::reason::Rejection;
use crate::socket_path::client_socket_path;
use crate::sys::{connect_nonblocking, send_nonblocking};
use crate::validate::validate_labels;

/// First wait after a failed connection attempt.
const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// Longest wait between attempts, so an agent started later is found within
/// a few seconds.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Current CLOCK_REALTIME in unix nanoseconds (0 if the clock is before
/// 1970, which the agent then refuses as out of range).
pub fn now_realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A thread-safe, fork-aware, non-blocking annotation writer.
#[derive(Debug)]
pub struct AnnotationWriter {
    /// `None`: re-resolve the default path on every connection attempt.
    explicit_path: Option<PathBuf>,
    state: Mutex<State>,
    sent: AtomicU64,
    dropped: AtomicU64,
}

#[derive(Debug)]
struct State {
    conn: Option<Conn>,
    path: PathBuf,
    /// Earliest time of the next connection attempt.
    next_attempt: Instant,
    backoff: Duration,
    /// The process that opened `conn`; a forked child must not share the
    /// parent's stream (their bytes would interleave), so it reconnects.
    owner_pid: u32,
    scratch: Vec<u8>,
}

#[derive(Debug)]
struct Conn {
    fd: OwnedFd,
    /// The unsent tail of a line the socket took only part of. It goes
    /// out before anything else so lines never interleave.
    pending: Vec<u8>,
}

impl Default for AnnotationWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl AnnotationWriter {
    /// A writer for the default socket path (see [`crate::socket_path`]).
    /// Tries to connect once now; never fails.
    pub fn new() -> AnnotationWriter {
        Self::build(None)
    }

    /// A writer for an explicit socket path.
    pub fn with_path(path: impl Into<PathBuf>) -> AnnotationWriter {
        Self::build(Some(path.into()))
    }

    fn build(explicit_path: Option<PathBuf>) -> AnnotationWriter {
        let path = explicit_path.clone().unwrap_or_else(client_socket_path);
        let w = AnnotationWriter {
            explicit_path,
            state: Mutex::new(State {
                conn: None,
                path,
                next_attempt: Instant::now(),
                backoff: BACKOFF_INITIAL,
                owner_pid: std::process::id(),
                scratch: Vec::with_capacity(256),
            }),
            sent: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        };
        {
            let mut st = w.lock();
            w.ensure_connected(&mut st);
        }
        w
    }

    /// Send an instant annotation stamped now. `Ok(true)` when the line was
    /// handed to the socket, `Ok(false)` when it was dropped (no agent, or
    /// the socket buffer is full); `Err` only for labels the contract
    /// refuses.
    pub fn write<K: AsRef<str>, V: AsRef<str>>(
        &self,
        labels: &[(K, V)],
        pid: Option<u32>,
    ) -> Result<bool, Rejection> {
        let opts = EncodeOptions {
            pid,
            ts: Some(now_realtime_ns()),
            ..EncodeOptions::default()
        };
        self.write_with(labels, &opts)
    }

    /// Send an annotation with every optional field under the caller's
    /// control (explicit `ts`, a span, `start_time`).
    pub fn write_with<K: AsRef<str>, V: AsRef<str>>(
        &self,
        labels: &[(K, V)],
        opts: &EncodeOptions,
    ) -> Result<bool, Rejection> {
        let mut st = self.lock();
        let st = &mut *st;
        st.scratch.clear();
        encode_into(labels, opts, &mut st.scratch)?;
        let line = std::mem::take(&mut st.scratch);
        let ok = self.send_line(st, &line);
        st.scratch = line;
        if ok {
            self.sent.fetch_add(1, Ordering::Relaxed);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(ok)
    }

    /// Start a span; the span line (`span_start`, `span_end`) is sent when
    /// the guard is dropped. Labels are checked now.
    pub fn span<K: AsRef<str>, V: AsRef<str>>(
        &self,
        labels: &[(K, V)],
        pid: Option<u32>,
    ) -> Result<SpanGuard<'_>, Rejection> {
        validate_labels(labels)?;
        Ok(SpanGuard {
            writer: self,
            labels: labels
                .iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
                .collect(),
            pid,
            start: now_realtime_ns(),
        })
    }

    /// Whether a connection to the agent is open now.
    pub fn is_active(&self) -> bool {
        self.lock().conn.is_some()
    }

    /// The socket path in use (for the default path, the latest resolution).
    pub fn socket_path(&self) -> PathBuf {
        self.lock().path.clone()
    }

    /// Lines handed to the socket so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Valid lines not delivered (no agent, buffer full, connection lost).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Close the connection. A later write reconnects.
    pub fn close(&self) {
        self.lock().conn = None;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent in
        // a way that matters (worst case a half-sent line), so recover.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deliver one encoded line; false if it was dropped.
    fn send_line(&self, st: &mut State, line: &[u8]) -> bool {
        if st.owner_pid != std::process::id() {
            st.owner_pid = std::process::id();
            st.conn = None;
            st.next_attempt = Instant::now();
            st.backoff = BACKOFF_INITIAL;
        }
        if !self.ensure_connected(st) {
            return false;
        }
        match try_send(st, line) {
            Ok(delivered) => delivered,
            Err(_) => {
                // The agent went away (restart, idle timeout). Reconnect
                // once right away, as an agent restart is the common case,
                // then fall back to backoff.
                st.conn = None;
                st.next_attempt = Instant::now();
                self.ensure_connected(st) && try_send(st, line).unwrap_or(false)
            }
        }
    }

    fn ensure_connected(&self, st: &mut State) -> bool {
        if st.conn.is_some() {
            return true;
        }
        let now = Instant::now();
        if now < st.next_attempt {
            return false;
        }
        if self.explicit_path.is_none() {
            st.path = client_socket_path();
        }
        match connect_nonblocking(&st.path) {
            Ok(fd) => {
                st.conn = Some(Conn {
                    fd,
                    pending: Vec::new(),
                });
                st.backoff = BACKOFF_INITIAL;
                true
            }
            Err(_) => {
                st.next_attempt = now + st.backoff;
                st.backoff = (st.backoff * 2).min(BACKOFF_MAX);
                false
            }
        }
    }
}

/// Flush any pending tail, then send `line`. `Ok(false)`: dropped because
/// the buffer is full; `Err`: the connection is broken.
fn try_send(st: &mut State, line: &[u8]) -> io::Result<bool> {
    let Some(conn) = st.conn.as_mut() else {
        return Ok(false);
    };
    if !conn.pending.is_empty() {
        match send_nonblocking(conn.fd.as_fd(), &conn.pending) {
            Ok(n) => {
                conn.pending.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if !conn.pending.is_empty() {
            return Ok(false);
        }
    }
    match send_nonblocking(conn.fd.as_fd(), line) {
        Ok(n) => {
            if n < line.len() {
                conn.pending.extend_from_slice(&line[n..]);
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// An open span; sends one span line when dropped.
#[derive(Debug)]
pub struct SpanGuard<'w> {
    writer: &'w AnnotationWriter,
    labels: Vec<(String, String)>,
    pid: Option<u32>,
    start: u64,
}

impl SpanGuard<'_> {
    /// When the span started (unix ns).
    pub fn start_ns(&self) -> u64 {
        self.start
    }
}

impl Drop for SpanGuard<'_> {
    fn drop(&mut self) {
        let end = now_realtime_ns().max(self.start);
        let opts = EncodeOptions {
            pid: self.pid,
            span: Some((self.start, end)),
            ..EncodeOptions::default()
        };
        // Labels were validated when the span started; nothing to report
        // from a destructor anyway.
        let _ = self.writer.write_with(&self.labels, &opts);
    }
}

/// Path helper for tests and tools: whether `path` currently accepts
/// connections (a quick probe, non-blocking).
pub fn socket_answers(path: &Path) -> bool {
    connect_nonblocking(path).is_ok()
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
