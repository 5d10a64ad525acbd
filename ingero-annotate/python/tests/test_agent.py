"""Against the real agent binary: `ingero trace --annotate --json`.

Uses ``$INGERO_BIN`` or ``target/release/ingero``; skipped (with the
reason) when the binary is absent, lacks ``trace --annotate``, or we are
not root (tracing needs it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO_ROOT
from ingero_annotate import AnnotationWriter

pytestmark = pytest.mark.agent

BIN = os.environ.get("INGERO_BIN") or os.path.join(REPO_ROOT, "target", "release", "ingero")
READY_TIMEOUT = 120.0
PUBLISHED_DIR = os.path.join(REPO_ROOT, "tests", ".cache", "ingero-annotate-0.1.1")


def _help(*args: str) -> str:
    try:
        out = subprocess.run([BIN, *args, "--help"], capture_output=True, timeout=30)
    except OSError:
        return ""
    return (out.stdout + out.stderr).decode(errors="replace")


def _skip_reason() -> str | None:
    if not os.access(BIN, os.X_OK):
        return f"agent binary {BIN} not built (set INGERO_BIN or build --release)"
    if "--annotate" not in _help("trace"):
        return f"{BIN} has no 'trace --annotate'"
    if os.geteuid() != 0:
        return "ingero trace needs root"
    return None


_REASON = _skip_reason()
if _REASON:
    pytestmark = [pytest.mark.agent, pytest.mark.skip(reason=_REASON)]


class Agent:
    """`ingero trace --annotate --json` on a private socket."""

    def __init__(self, socket_path: str, *extra: str):
        self.socket_path = socket_path
        self.annotations: list[dict] = []
        self.stderr: list[str] = []
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [BIN, "trace", "--annotate", "--annotate-socket", socket_path, "--json", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        if not self._ready.wait(READY_TIMEOUT) or self.proc.poll() is not None:
            self.stop()
            pytest.fail("agent did not become ready:\n" + "".join(self.stderr[-40:]))

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("type") == "annotation":
                with self._lock:
                    self.annotations.append(obj)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.stderr.append(line)
            if "attached" in line:
                self._ready.set()
        self._ready.set()

    def wait_annotation(self, pred, timeout: float = 15.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for a in self.annotations:
                    if pred(a):
                        return a
            time.sleep(0.02)
        with self._lock:
            seen = list(self.annotations)
        pytest.fail(f"annotation not seen; got {seen[-5:]}\nstderr:\n" + "".join(self.stderr[-20:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def agent(sock_path):
    a = Agent(sock_path)
    yield a
    if a.proc.poll() is None:
        os.kill(a.proc.pid, signal.SIGCONT)
    a.stop()


def _published_client_dir() -> str:
    """ingero-annotate 0.1.1 from PyPI, unchanged, in a private folder."""
    marker = os.path.join(PUBLISHED_DIR, "ingero_annotate.py")
    if not os.path.exists(marker):
        out = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", PUBLISHED_DIR,
             "ingero-annotate==0.1.1"],
            capture_output=True,
            timeout=300,
        )
        if out.returncode != 0 or not os.path.exists(marker):
            pytest.skip("could not install ingero-annotate==0.1.1: " + out.stderr.decode(errors="replace")[-300:])
    return PUBLISHED_DIR


def test_published_client_annotation_shows_up_with_provenance(agent, sock_path):
    client_dir = _published_client_dir()
    script = (
        "import os, sys\n"
        f"sys.path.insert(0, {client_dir!r})\n"
        "import ingero_annotate\n"
        f"assert ingero_annotate.__file__.startswith({client_dir!r}), ingero_annotate.__file__\n"
        f"w = ingero_annotate.AnnotationWriter(socket_path={sock_path!r})\n"
        "ok = w.write({'step': '42'}, pid=os.getpid())\n"
        "print(os.getpid(), ok, flush=True)\n"
        # Stay alive until told: the agent checks /proc/<pid> to authorise.
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        pid_s, ok = child.stdout.readline().split()
        pid = int(pid_s)
        assert ok == "True"
        a = agent.wait_annotation(lambda a: a.get("labels") == {"step": "42"} and a.get("pid") == pid)
        assert a["provenance"]["pid"] == pid
        assert a["provenance"]["uid"] == os.geteuid()
        assert a["provenance"]["gid"] == os.getegid()
        assert isinstance(a["ts_ns"], int)
    finally:
        if child.stdin:
            child.stdin.close()
        child.wait(timeout=10)


def test_this_package_instant_and_span(agent, sock_path):
    w = AnnotationWriter(socket_path=sock_path)
    assert w.active
    assert w.write({"step": "7", "phase": "backward"}, pid=os.getpid())
    with w.span({"request_id": "abc-123", "model": "llama-3-8b"}, pid=os.getpid()):
        time.sleep(0.05)
    inst = agent.wait_annotation(lambda a: a.get("labels", {}).get("step") == "7")
    assert inst["labels"] == {"step": "7", "phase": "backward"}
    assert inst["pid"] == os.getpid() and inst["provenance"]["pid"] == os.getpid()
    assert inst.get("ts_source") == "client"
    span = agent.wait_annotation(lambda a: a.get("labels", {}).get("request_id") == "abc-123")
    assert span["span_end_ns"] - span["span_start_ns"] >= 50_000_000
    assert span["span_end_realtime_ns"] - span["span_start_realtime_ns"] == span["span_end_ns"] - span["span_start_ns"]
    w.close()


def test_writer_never_blocks_when_the_agent_stops_reading(agent, sock_path):
    w = AnnotationWriter(socket_path=sock_path)
    assert w.write({"phase": "before-stop"})
    agent.wait_annotation(lambda a: a.get("labels", {}).get("phase") == "before-stop")
    os.kill(agent.proc.pid, signal.SIGSTOP)
    try:
        pad = "x" * 200
        start = time.monotonic()
        for i in range(50_000):
            w.write({"i": str(i), "pad": pad})
        elapsed = time.monotonic() - start
    finally:
        os.kill(agent.proc.pid, signal.SIGCONT)
    assert elapsed < 10.0, f"writes blocked for {elapsed:.1f}s"
    assert w.dropped > 0, "a stalled agent means dropped lines, not a stalled writer"
    # The agent recovers, and a new connection is served.
    fresh = AnnotationWriter(socket_path=sock_path)
    deadline = time.monotonic() + 10
    while not fresh.write({"phase": "after-resume"}):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    agent.wait_annotation(lambda a: a.get("labels", {}).get("phase") == "after-resume")


def test_annotate_command_reports_accepted_and_rejected(agent, sock_path):
    if "--label" not in _help("annotate"):
        pytest.skip(f"{BIN} has no 'annotate' command")
    ok = subprocess.run([BIN, "annotate", "--socket", sock_path, "--label", "step=99"], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "accepted 1 of 1" in ok.stdout
    agent.wait_annotation(lambda a: a.get("labels") == {"step": "99"})
    lines = '{"labels":{"a":"1"}}\n{"labels":{}}\nnot json\n{"labels":{"b":"2"}}\n'
    bad = subprocess.run([BIN, "annotate", "--socket", sock_path], input=lines, capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0
    assert "accepted 2 of 4" in bad.stdout
    assert "empty_labels" in bad.stdout and "malformed_json" in bad.stdout
