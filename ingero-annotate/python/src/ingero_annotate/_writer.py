"""The non-blocking annotation writer.

Never blocks and never fails the caller because of the agent: sends are
non-blocking and a line that does not fit in the socket buffer is dropped
and counted; without an agent the writer is a no-op that retries the
connection with backoff, so an agent started later is picked up. It is
thread-safe, and fork-safe: a child process never shares its parent's
connection (their lines would interleave) but opens its own.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref

from ._contract import encode_annotation, encode_plain
from ._paths import default_socket_path
from ._span import Span

logger = logging.getLogger("ingero.annotate")

# First wait after a failed connection attempt, doubling up to the maximum,
# so a late agent is found within seconds without a retry storm.
_BACKOFF_INITIAL = 0.1
_BACKOFF_MAX = 5.0
# The socket is non-blocking already; MSG_DONTWAIT also makes each send
# non-blocking on its own, so no fcntl or poll is ever needed per call.
_SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0) | getattr(socket, "MSG_DONTWAIT", 0)
# Bound once: write() is the hot path and a module attribute lookup per
# call is measurable there.
_time_ns = time.time_ns

# Every live writer, so the fork handler can reset them in the child.
_WRITERS: "weakref.WeakSet[AnnotationWriter]" = weakref.WeakSet()


def now_ns() -> int:
    """Current time in unix nanoseconds, for an explicit annotation ts."""
    return time.time_ns()


class AnnotationWriter:
    """A reusable, thread-safe, non-blocking connection to the agent.

    Typical use from a framework hook::

        w = AnnotationWriter()        # connects, or becomes a no-op
        w.write({"step": "10"}, pid=os.getpid())
        ...
        w.close()

    ``sent`` and ``dropped`` count lines handed to the socket and valid
    lines not delivered (no agent, full buffer, lost connection).
    """

    def __init__(self, socket_path: str | None = None, connect_timeout: float = 2.0):
        # An explicit path is kept; the default is re-resolved on each
        # reconnect so an agent that starts later, elsewhere, is found.
        self._explicit = socket_path
        self._path = socket_path or default_socket_path()
        self._timeout = connect_timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._pending = b""
        self._next_attempt = 0.0
        self._backoff = _BACKOFF_INITIAL
        self._warned = False
        self._closed = False
        self.sent = 0
        self.dropped = 0
        _WRITERS.add(self)
        with self._lock:
            self._connect_locked(blocking=True)

    @property
    def active(self) -> bool:
        """True when connected and annotations are being sent."""
        return self._sock is not None

    @property
    def socket_path(self) -> str:
        return self._path

    def write(self, labels, pid: int | None = None, ts_ns: int | None = None) -> bool:
        """Send one annotation; True if it was handed to the socket.

        ``ts_ns`` defaults to now (unix ns). Invalid labels raise
        AnnotationError (a caller bug); nothing else ever raises: when the
        agent is absent or slow the line is dropped, counted, and False is
        returned.
        """
        if ts_ns is None:
            ts_ns = _time_ns()
        line = encode_plain(labels, pid, ts_ns)
        if line is None:
            line = encode_annotation(labels, pid=pid, ts_ns=ts_ns)
        # The common case inline: connected, nothing left over from a
        # partial send. One lock, one send syscall, nothing else.
        with self._lock:
            sock = self._sock
            if sock is None or self._pending:
                ok = self._send_locked(line)
            else:
                try:
                    n = sock.send(line, _SEND_FLAGS)
                except (BlockingIOError, InterruptedError):
                    ok = False
                except OSError as exc:
                    ok = self._reconnect_and_send_locked(line, exc)
                else:
                    if n < len(line):
                        self._pending = line[n:]
                    self.sent += 1
                    return True
            if ok:
                self.sent += 1
            else:
                self.dropped += 1
            return ok

    def span(self, labels, pid: int | None = None) -> Span:
        """A span: ``with writer.span({...}):`` sends one line with
        ``span_start``/``span_end`` on exit; ``@writer.span({...})`` does so
        around every call of the decorated function."""
        return Span(self, labels, pid)

    def _send(self, line: bytes) -> bool:
        with self._lock:
            ok = self._send_locked(line)
            if ok:
                self.sent += 1
            else:
                self.dropped += 1
            return ok

    def _send_locked(self, line: bytes) -> bool:
        if self._closed:
            return False
        if self._sock is None and not self._connect_locked(blocking=False):
            return False
        try:
            return self._try_send_locked(line)
        except OSError as exc:
            return self._reconnect_and_send_locked(line, exc)

    def _reconnect_and_send_locked(self, line: bytes, exc: OSError) -> bool:
        # The agent went away (restart, idle timeout): reconnect once right
        # away, then fall back to backoff.
        logger.debug("ingero annotation send failed (%s); reconnecting", exc)
        self._close_locked()
        self._next_attempt = 0.0
        if not self._connect_locked(blocking=False):
            return False
        try:
            return self._try_send_locked(line)
        except OSError:
            self._close_locked()
            return False

    def _try_send_locked(self, line: bytes) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            if self._pending:
                # Finish a line the socket took only part of, first, so
                # lines never interleave.
                n = sock.send(self._pending, _SEND_FLAGS)
                self._pending = self._pending[n:]
                if self._pending:
                    return False
            n = sock.send(line, _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            return False
        if n < len(line):
            self._pending = line[n:]
        return True

    def _connect_locked(self, blocking: bool) -> bool:
        now = time.monotonic()
        if now < self._next_attempt:
            return False
        if self._explicit is None:
            self._path = default_socket_path()
        s = None
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if blocking:
                s.settimeout(self._timeout)
            else:
                s.setblocking(False)
            s.connect(self._path)
            s.setblocking(False)
        except OSError as exc:
            if s is not None:
                s.close()
            self._next_attempt = now + self._backoff
            self._backoff = min(self._backoff * 2, _BACKOFF_MAX)
            if not self._warned:
                self._warned = True
                logger.warning(
                    "ingero annotation socket unavailable at %s (%s); annotations are dropped "
                    "until an agent listens there. Start one with 'sudo ingero trace --annotate' "
                    "(add '--annotate-group GROUP' to let this user write), or set "
                    "INGERO_ANNOTATE_SOCKET to its socket.",
                    self._path,
                    exc,
                )
            return False
        self._sock = s
        self._pending = b""
        self._backoff = _BACKOFF_INITIAL
        logger.debug("ingero annotation socket connected at %s", self._path)
        return True

    def _close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._pending = b""

    def _reset_after_fork(self) -> None:
        # The parent's lock may have been held by another thread at fork
        # time, and its connection belongs to the parent: start afresh.
        self._lock = threading.Lock()
        self._close_locked()
        self._next_attempt = 0.0
        self._backoff = _BACKOFF_INITIAL
        self.sent = 0
        self.dropped = 0

    def close(self) -> None:
        """Close the socket. Safe to call more than once; later writes are
        dropped."""
        with self._lock:
            self._closed = True
            self._close_locked()

    def __enter__(self) -> "AnnotationWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _after_fork_in_child() -> None:
    for w in list(_WRITERS):
        w._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
