"""Running an example workload under the real ``ingero`` agent, for the e2e
tests: start the agent on a private socket, run the example with
``INGERO_ANNOTATE_SOCKET`` pointing at it, stop the agent, and return what
it printed (``--json``) or recorded (``--record -o``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional

# Computed here, not imported from tests/conftest.py: CI collects several
# suites whose conftest modules are all named `conftest`.
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
BIN = os.environ.get("INGERO_BIN") or os.path.join(REPO_ROOT, "target", "release", "ingero")
SRC = os.path.join(REPO_ROOT, "ingero-annotate", "python", "src")
EXAMPLES = os.path.join(REPO_ROOT, "examples")
READY_TIMEOUT = 120.0
WORKLOAD_TIMEOUT = 600.0


def _help(*args: str) -> str:
    try:
        out = subprocess.run([BIN, *args, "--help"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout + out.stderr).decode(errors="replace")


def agent_skip_reason() -> Optional[str]:
    """Why the agent cannot run here, or None."""
    if not os.access(BIN, os.X_OK):
        return "agent binary %s not built (set INGERO_BIN or build --release)" % BIN
    if os.geteuid() != 0:
        return "ingero trace needs root"
    if "--annotate" not in _help("trace"):
        return "%s has no 'trace --annotate'" % BIN
    return None


def recording_skip_reason() -> Optional[str]:
    """Why `trace --record -o` plus `query --group-by --json` is unavailable."""
    reason = agent_skip_reason()
    if reason:
        return reason
    trace = _help("trace")
    if "--record" not in trace:
        return "%s: 'ingero trace' has no --record flag yet (issue 4)" % BIN
    if "-o" not in trace.replace("--", " "):
        return "%s: 'ingero trace' has no -o flag yet (issue 4)" % BIN
    query = _help("query")
    if "--group-by" not in query:
        return "%s: 'ingero query' has no --group-by flag yet (issue 5)" % BIN
    if "--trace" not in query:
        return "%s: 'ingero query' has no --trace flag yet (issue 5)" % BIN
    return None


def module_skip_reason(*modules: str) -> Optional[str]:
    import importlib.util

    for m in modules:
        if importlib.util.find_spec(m) is None:
            return "%s is not installed (scripts/install-framework-deps.sh)" % m
    return None


class AgentRun:
    """One agent process on a private 0700 socket directory."""

    def __init__(self, *extra: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="ia-e2e-")
        os.chmod(self.dir, 0o700)
        self.socket = os.path.join(self.dir, "a.sock")
        self.trace_file = os.path.join(self.dir, "run.pftrace")
        self.stdout: List[bytes] = []
        self.stderr: List[str] = []
        self._ready = threading.Event()
        cmd = [BIN, "trace", "--annotate", "--annotate-socket", self.socket]
        cmd += [a.replace("{trace}", self.trace_file) for a in extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        if not self._ready.wait(READY_TIMEOUT) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("agent did not become ready:\n" + "".join(self.stderr[-40:]))

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.stdout.append(raw)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.stderr.append(line)
            if "attached" in line:
                self._ready.set()
        self._ready.set()

    def run_example(self, rel: str, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env["INGERO_ANNOTATE_SOCKET"] = self.socket
        env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
        # CPU runs: no accidental GPU, and quiet, small thread pools on a
        # shared 2-core machine.
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.setdefault("OMP_NUM_THREADS", "1")
        env["RAY_DISABLE_USAGE_STATS"] = "1"
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        return subprocess.run([sys.executable, os.path.join(EXAMPLES, rel), *args], env=env,
                              capture_output=True, timeout=WORKLOAD_TIMEOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def annotations(self) -> List[Dict]:
        """The annotations the agent printed with ``--json``."""
        out = []
        for raw in self.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("type") == "annotation":
                out.append(obj)
        return out

    def query_group_by_step(self, keys: str = "step") -> List[Dict]:
        """``ingero query --trace FILE --group-by KEYS --json`` as a list of groups."""
        res = subprocess.run([BIN, "query", "--trace", self.trace_file, "--group-by", keys, "--json"],
                             capture_output=True, timeout=300)
        assert res.returncode == 0, res.stderr.decode(errors="replace")
        return parse_groups(res.stdout.decode())

    def cleanup(self) -> None:
        import shutil

        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def parse_groups(text: str) -> List[Dict]:
    """The documented output is one JSON object per step; accept it as
    NDJSON, as one JSON array, or as an object holding the array."""
    text = text.strip()
    if not text:
        return []
    try:
        whole = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(whole, list):
        return whole
    if isinstance(whole, dict):
        for key in ("groups", "rows", "steps"):
            if isinstance(whole.get(key), list):
                return whole[key]
        return [whole]
    return []


def describe(proc: subprocess.CompletedProcess) -> str:
    return "rc=%s\nstdout:\n%s\nstderr:\n%s" % (
        proc.returncode, proc.stdout.decode(errors="replace")[-3000:], proc.stderr.decode(errors="replace")[-5000:])
