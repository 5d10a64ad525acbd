"""Shared fixtures: a small Unix socket server that records what writers
send (with each connection's SO_PEERCRED), and short temp socket paths."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# Test against the working tree even when the package is not installed.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


class LineServer:
    """Accepts connections on ``path`` and collects complete lines."""

    def __init__(self, path: str):
        self.path = path
        self.lines: list[bytes] = []
        self.peers: list[tuple[int, int, int]] = []
        self.reading = threading.Event()
        self.reading.set()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._closing = False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(128)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, uid, gid = struct.unpack("3i", cred)
            with self._lock:
                self.peers.append((pid, uid, gid))
                self._conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buf = b""
        while True:
            self.reading.wait()
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            *complete, buf = buf.split(b"\n")
            with self._lock:
                self.lines.extend(complete)

    def annotations(self) -> list[dict]:
        with self._lock:
            return [json.loads(l) for l in self.lines]

    def wait_for(self, n: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.lines) >= n:
                    break
            time.sleep(0.01)
        got = self.annotations()
        assert len(got) >= n, f"expected {n} lines, got {len(got)}"
        return got

    def close(self) -> None:
        self._closing = True
        self.reading.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            for c in self._conns:
                # shutdown first: a plain close does not end a recv blocked
                # in another thread, and the connection would live on.
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


@pytest.fixture
def sock_dir():
    # Short paths: AF_UNIX paths are limited to 107 bytes.
    d = tempfile.mkdtemp(prefix="ia-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sock_path(sock_dir):
    return os.path.join(sock_dir, "a.sock")


@pytest.fixture
def server(sock_path):
    s = LineServer(sock_path)
    yield s
    s.close()
