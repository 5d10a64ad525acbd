"""End to end, as root: NVTX ranges from a program that knows nothing of ingero.

A Python program uses PyPI `nvtx==0.2.16` (ranges, a domain, colors, payloads, a mark, a
start/end range ended on another thread) around calls to the real libcudart (every call returns
35 here without a driver: still a CUDA call the uprobes see). It is started with `ingero run --`
beside `ingero trace --record --annotate`; the recording must hold exactly its ranges, nested
on its thread's NVTX track in Perfetto, and `ingero query --group-by nvtx` must count exactly
the CUDA calls inside each. Without a tool the same program runs unchanged and nothing of it
reaches the agent (negative test).

Needs INGERO_BIN and INGERO_CUDART (set by `cargo xtask test`), libingero_nvtx.so beside the
binary (`cargo build --release`), and the `nvtx` package (scripts/install-prerequisites.sh).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from test_e2e_recording import BIN, CUDART, Agent
from trace_checks import (
    check_every_event_refers_to_a_defined_track,
    check_slices_nest_on_every_track,
    load_packets,
    slices,
    track_names,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loads eBPF programs: needs root")

STEPS = 3
MALLOCS_PER_FORWARD = 2
FREES_PER_BACKWARD = 3

# The job: it imports nvtx and ctypes only.
PROGRAM = f"""
import ctypes, json, os, sys, threading, nvtx
rt = ctypes.CDLL(sys.argv[1])
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
p = ctypes.c_void_p()
for step in range({STEPS}):
    nvtx.push_range("step", color="blue", payload=step)
    nvtx.push_range("forward", color=0xFF00FF00)
    for _ in range({MALLOCS_PER_FORWARD}):
        rt.cudaMalloc(ctypes.byref(p), 1024)
    nvtx.pop_range()
    with nvtx.annotate("backward", domain="ingero-test", payload=2.5):
        for _ in range({FREES_PER_BACKWARD}):
            rt.cudaFree(None)
    nvtx.pop_range()
nvtx.mark("checkpoint")
r = nvtx.start_range("prefetch")
t = threading.Thread(target=lambda: nvtx.end_range(r))
t.start(); t.join()
print(json.dumps({{"pid": os.getpid(), "tool": os.environ.get("NVTX_INJECTION64_PATH")}}))
"""


def _require_inputs():
    pytest.importorskip("nvtx")
    for path, how in [(BIN, "cargo build --release"), (CUDART, "cargo xtask test")]:
        assert Path(path).exists(), f"{path} is missing: run {how} first"
    lib = Path(BIN).parent / "libingero_nvtx.so"
    assert lib.exists(), f"{lib} is missing: run cargo build --release"


def _ingero_json(*args: str):
    done = subprocess.run([BIN, *args, "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _record(tmp: Path, with_tool: bool):
    out, sock = tmp / "nvtx.pftrace", tmp / "annotate.sock"
    agent = Agent("--record", "-o", str(out), "--annotate", "--annotate-socket", str(sock), "--cuda-lib", CUDART)
    nvtx_sock = tmp / "nvtx.sock"
    assert nvtx_sock.exists(), "the NVTX socket is opened beside the annotation socket:\n" + "".join(agent.stderr)
    assert (tmp / "libingero_nvtx.so").exists(), "the library is published beside it"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "INGERO_NVTX_LIBRARY")}
    env["INGERO_NVTX_SOCKET"] = str(nvtx_sock)
    cmd = [sys.executable, "-c", PROGRAM, CUDART]
    if with_tool:
        cmd = [BIN, "run", "--", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout.strip().splitlines()[-1])
    time.sleep(0.5)  # past the reorder window
    assert agent.stop() == 0, "".join(agent.stderr)
    return out, job, "".join(agent.stderr)


def test_ingero_run_records_the_programs_nvtx_ranges():
    _require_inputs()
    tmp = Path(tempfile.mkdtemp())
    out, job, stderr = _record(tmp, with_tool=True)
    assert job["tool"] == str(tmp / "libingero_nvtx.so"), "ingero run loads the published library"

    # The recording: every range, nested on the thread's NVTX tracks.
    packets = load_packets(out)
    check_every_event_refers_to_a_defined_track(packets)
    check_slices_nest_on_every_track(packets)
    names = track_names(packets)
    parents = {p.track_descriptor.uuid: p.track_descriptor.parent_uuid for p in packets if p.HasField("track_descriptor")}
    threads = {
        p.track_descriptor.uuid: p.track_descriptor.thread.tid
        for p in packets
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("thread")
    }
    nvtx_slices = [s for s in slices(packets) if "nvtx" in s[2]]
    by_name = {}
    for s in nvtx_slices:
        by_name.setdefault(s[1], []).append(s)
    assert {k: len(v) for k, v in by_name.items()} == {"step": 3, "forward": 3, "backward": 3, "prefetch": 1}, by_name
    for s in by_name["step"] + by_name["forward"]:
        assert names[s[0]] == "NVTX", names[s[0]]
        assert threads.get(parents[s[0]]) == job["pid"], "a push/pop range is under its thread's track"
    assert all(names[s[0]] == "NVTX: ingero-test" for s in by_name["backward"]), "a domain has its own track"
    assert names[by_name["prefetch"][0][0]].startswith("NVTX ranges"), "start/end ranges go on process lanes"
    for step in by_name["step"]:
        inner = [f for f in by_name["forward"] if step[4] <= f[4] and f[5] <= step[5]]
        assert len(inner) == 1, "each forward nests in its step"
        assert inner[0][3]["nvtx.depth"] == 1 and step[3]["nvtx.depth"] == 0
    assert sorted(s[3]["nvtx.payload"] for s in by_name["step"]) == [0, 1, 2]
    assert all(s[3]["nvtx.payload"] == 2.5 for s in by_name["backward"])
    assert all(s[3]["nvtx.color"] == 0xFF00FF00 for s in by_name["forward"])
    assert "nvtx.end_tid" in by_name["prefetch"][0][3], "ended on another thread"

    # query: a row per range name with exactly the CUDA calls inside it.
    rows = _ingero_json("query", "--trace", str(out), "--group-by", "nvtx")
    row = {r["labels"]["nvtx"]: r for r in rows}
    assert row["forward"]["cuda_calls"] == STEPS * MALLOCS_PER_FORWARD, row["forward"]
    assert row["backward"]["cuda_calls"] == STEPS * FREES_PER_BACKWARD, row["backward"]
    assert row["step"]["cuda_calls"] == STEPS * (MALLOCS_PER_FORWARD + FREES_PER_BACKWARD), "nested calls count for every level"
    assert row["step"]["ranges"]["count"] == STEPS
    assert "checkpoint" not in row, "marks are instants"
    domains = {r["labels"]["nvtx.domain"]: r for r in _ingero_json("query", "--trace", str(out), "--group-by", "nvtx.domain")}
    assert domains["ingero-test"]["cuda_calls"] == STEPS * FREES_PER_BACKWARD

    # The recorded events: NVTX lines have their own type.
    events = subprocess.run([BIN, "query", "--trace", str(out), "--events", "--json"], capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in events.stdout.splitlines() if line.strip()]
    marks = [e for e in lines if e.get("type") == "nvtx" and e["kind"] == "mark"]
    assert [m["message"] for m in marks] == ["checkpoint"], marks


def test_without_a_tool_the_program_runs_unchanged_and_sends_nothing():
    _require_inputs()
    tmp = Path(tempfile.mkdtemp())
    out, job, _ = _record(tmp, with_tool=False)
    assert job["tool"] is None
    packets = load_packets(out)
    assert not [s for s in slices(packets) if "nvtx" in s[2]], "no NVTX range without the tool"
    calls = [s for s in slices(packets) if s[1] in ("cudaMalloc", "cudaFree")]
    assert len(calls) == STEPS * (MALLOCS_PER_FORWARD + FREES_PER_BACKWARD), "the CUDA calls are still traced"


def test_trace_with_a_command_captures_its_ranges_without_any_other_setup():
    """`ingero trace --record -o F -- CMD`: no `--annotate`, no variables set by hand."""
    _require_inputs()
    tmp = Path(tempfile.mkdtemp())
    out = tmp / "cmd.pftrace"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NVTX_INJECTION64_PATH", "INGERO_NVTX_LIBRARY", "INGERO_NVTX_SOCKET", "SUDO_USER", "SUDO_UID", "SUDO_GID")
    }
    # The session's own sockets, away from a system agent's.
    env["INGERO_ANNOTATE_SOCKET"] = str(tmp / "annotate.sock")
    done = subprocess.run(
        [BIN, "trace", "--record", "-o", str(out), "--cuda-lib", CUDART, "--", sys.executable, "-c", PROGRAM, CUDART],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    # The job's line, among the session summary ingero prints to stdout at the end.
    job = next(json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"pid"'))
    assert job["tool"] == str(tmp / "libingero_nvtx.so"), "the session's published copy"
    rows = _ingero_json("query", "--trace", str(out), "--group-by", "nvtx")
    row = {r["labels"]["nvtx"]: r for r in rows}
    assert row["forward"]["cuda_calls"] == STEPS * MALLOCS_PER_FORWARD, (rows, done.stderr)
    assert row["step"]["ranges"]["count"] == STEPS
