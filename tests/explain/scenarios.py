"""Scenarios of the explain corpus: a simulated training or serving loop with one known cause.

    python3 scenarios.py NAME --mock LIB [--cudart REAL] --socket SOCK

Calls the test-only runtime `tests/fixtures/mock_scenario.c` (built as LIB) through ctypes, its
costs set per scenario so that the cause injected into the loop has a known size, and labels the
work with the repo's `ingero_annotate` client: one `step` span per training step (scoped to this
process, with `phase=train`, as the Lightning and HF adapters do), or `request_id` spans from
several threads. `--cudart` names the real libcudart, whose calls fail without a GPU
(`error_storm` wants those errors).

Protocol, for the test that records it: prints `{"pid", "tid", "cpu"}` (one JSON line), waits for
a line on stdin (the agent is attached by then), runs, prints `{"done": true, ...facts}`.

`python3 scenarios.py _hog --cpu N --seconds S [--fifo]` is the competing process (comm
`cpu_hog`): pinned to CPU N, it prints `ready`, waits for a line on stdin and spins for S seconds
(at SCHED_FIFO with `--fifo`, else at nice -5).

The magnitudes each scenario injects are in `SCENARIOS` (docstrings) and in the constants below;
`test_explain_corpus.py` holds what the recording and `ingero explain` must show.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ingero-annotate/python/src"))
from ingero_annotate import AnnotationWriter  # noqa: E402

SPIN, SLEEP = 0, 1
US = 1_000
MS = 1_000_000
MIB = 1 << 20

# The normal step: host work (Python spin), a pinned H2D copy, launches, a GPU wait.
STEPS = 30
SLOW_STEP = 7
HOST_NS = 4 * MS  # CPU work of a step outside CUDA calls (spin)
SYNC_NS = 20 * MS  # the step's GPU wait (sleep in cudaStreamSynchronize)
LAUNCHES = 5
LAUNCH_NS = 20 * US  # spin per launch
NOISE = 0.10  # every host spin and GPU wait is scaled by uniform(1 - NOISE, 1 + NOISE)

# Injected causes.
STALL_NS = 200 * MS  # blocked_step: data-loader stall (time.sleep outside CUDA)
HOG_NS = 200 * MS  # preempted_step: cpu_hog at SCHED_FIFO on the training CPU
CHURN_PAIRS = 40  # alloc_churn: cudaMalloc+cudaFree pairs per step
CHURN_NS = 150 * US  # spin per cudaMalloc and per cudaFree
STORM_SYNCS = 100  # sync_storm: cudaStreamSynchronize calls per step, instead of one
STORM_SYNC_NS = 100 * US  # sleep per sync (timer slack makes it ~150 us)
SYNC_MEMCPY_BYTES = 8 * MIB  # sync_memcpy: a cudaMemcpy D2H per step
SYNC_MEMCPY_NS = 5 * MS  # sleep
PAGEABLE_BYTES = 16 * MIB  # pageable_memcpy / pinned_memcpy: a cudaMemcpyAsync H2D per step
PAGEABLE_NS_PER_MIB = 250 * US  # spin: 16 MiB costs 4 ms from pageable memory
ASYNC_COPY_NS = 5 * US  # spin: any cudaMemcpyAsync, the whole cost from pinned memory
LEAK_BYTES = 64 * MIB  # leak: cudaMalloc per step, never freed
COLD_NS = 80 * MS  # cold_start: extra spin of the first cudaMalloc and the first launch
REQUESTS = 24  # slow_request: requests served by REQUEST_THREADS threads
REQUEST_THREADS = 4
REQUEST_SYNC_NS = 25 * MS
SLOW_REQUEST = "r-13"
SLOW_REQUEST_EXTRA_NS = 150 * MS  # one sync of r-13 sleeps this much longer
HOST_BOUND_LAUNCHES = 200  # host_bound: launches per step, CPU spin between them
HOST_BOUND_GAP_NS = 60 * US


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def spin(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def tid() -> int:
    return threading.get_native_id()


class Runtime:
    """The CUDA runtime calls the scenarios make, on one library (the mock or the real one)."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        vp, sz, ci = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        sigs: Dict[str, List[Any]] = {
            "cudaMalloc": [ctypes.POINTER(vp), sz],
            "cudaFree": [vp],
            "cudaMallocHost": [ctypes.POINTER(vp), sz],
            "cudaFreeHost": [vp],
            "cudaHostAlloc": [ctypes.POINTER(vp), sz, ctypes.c_uint],
            "cudaHostRegister": [vp, sz, ctypes.c_uint],
            "cudaHostUnregister": [vp],
            "cudaLaunchKernel": [vp, Dim3, Dim3, ctypes.POINTER(vp), sz, vp],
            "cudaMemcpy": [vp, vp, sz, ci],
            "cudaMemcpyAsync": [vp, vp, sz, ci, vp],
            "cudaMemset": [vp, ci, sz],
            "cudaStreamSynchronize": [vp],
            "cudaDeviceSynchronize": [],
            "cudaEventSynchronize": [vp],
        }
        for name, args in sigs.items():
            fn = getattr(self.lib, name)
            fn.argtypes = args
            fn.restype = ci
        if hasattr(self.lib, "mock_set_cost"):
            self.lib.mock_set_cost.argtypes = [ctypes.c_char_p, ctypes.c_long, ci]
            self.lib.mock_set_cost.restype = ci
            self.lib.mock_next_extra.argtypes = [ctypes.c_long, ci]
            self.lib.mock_next_extra.restype = None

    def set_cost(self, what: str, ns: int, mode: int = SPIN) -> None:
        assert self.lib.mock_set_cost(what.encode(), int(ns), mode) == 0, what

    def next_extra(self, ns: int, mode: int) -> None:
        self.lib.mock_next_extra(int(ns), mode)

    def malloc(self, size: int) -> tuple[int, int]:
        p = ctypes.c_void_p()
        ret = self.lib.cudaMalloc(ctypes.byref(p), size)
        return ret, p.value or 0

    def free(self, ptr: int) -> int:
        return self.lib.cudaFree(ptr)

    def malloc_host(self, size: int) -> int:
        p = ctypes.c_void_p()
        assert self.lib.cudaMallocHost(ctypes.byref(p), size) == 0
        return p.value or 0

    def launch(self, func: int = 0x1234, stream: int = 0) -> int:
        return self.lib.cudaLaunchKernel(func, Dim3(64, 1, 1), Dim3(256, 1, 1), None, 0, stream or None)

    def memcpy(self, dst: int, src: int, size: int, kind: int) -> int:
        return self.lib.cudaMemcpy(dst, src, size, kind)

    def memcpy_async(self, dst: int, src: int, size: int, kind: int, stream: int = 0) -> int:
        return self.lib.cudaMemcpyAsync(dst, src, size, kind, stream or None)

    def stream_sync(self, stream: int = 0) -> int:
        return self.lib.cudaStreamSynchronize(stream or None)


H2D, D2H = 1, 2


class Scenario:
    """One run: the mock, the annotation writer, the noise, and the normal step."""

    def __init__(self, mock: str, cudart: Optional[str], socket_path: str, seed: int = 7):
        self.cuda = Runtime(mock)
        self.real = Runtime(cudart) if cudart else None
        self.socket_path = socket_path
        self.writer: Optional[AnnotationWriter] = None  # connected once the agent listens
        self.pid = os.getpid()
        self.rng = random.Random(seed)
        self.facts: Dict[str, Any] = {}
        self.cuda.set_cost("launch", LAUNCH_NS, SPIN)
        self.cuda.set_cost("malloc", 20 * US, SPIN)
        self.cuda.set_cost("free", 10 * US, SPIN)
        self.cuda.set_cost("malloc_host", 50 * US, SPIN)
        self.cuda.set_cost("memcpy_async", ASYNC_COPY_NS, SPIN)
        self.cuda.set_cost("pageable_ns_per_mib", PAGEABLE_NS_PER_MIB, SPIN)
        self.cuda.set_cost("memcpy", 50 * US, SLEEP)
        self.pinned = 0
        self.device = 0

    def connect(self) -> None:
        self.writer = AnnotationWriter(socket_path=self.socket_path)
        assert self.writer.active, f"no agent listens on {self.socket_path}"

    def noisy(self, ns: int) -> int:
        return int(ns * self.rng.uniform(1 - NOISE, 1 + NOISE))

    @contextmanager
    def step(self, i: int) -> Iterator[None]:
        assert self.writer is not None
        with self.writer.span({"phase": "train", "step": str(i)}, pid=self.pid):
            yield

    def setup(self) -> None:
        """Weights and buffers, allocated once (a model load, not a leak)."""
        _, self.device = self.cuda.malloc(256 * MIB)
        self.pinned = self.cuda.malloc_host(PAGEABLE_BYTES)

    def normal_work(self, sync_ns: Optional[int] = None) -> None:
        spin(self.noisy(HOST_NS))
        self.cuda.memcpy_async(self.device, self.pinned, MIB, H2D)
        for k in range(LAUNCHES):
            self.cuda.launch(0x1000 + k)
        self.cuda.set_cost("stream_sync", self.noisy(SYNC_NS if sync_ns is None else sync_ns), SLEEP)
        self.cuda.stream_sync()

    def train(self, extra: Callable[[int], None] = lambda i: None, setup_in_first_step: bool = False) -> None:
        if not setup_in_first_step:
            self.setup()
        for i in range(STEPS):
            with self.step(i):
                if i == 0 and setup_in_first_step:
                    self.setup()
                self.normal_work()
                extra(i)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def hog_command(cpu: int, seconds: float, fifo: bool) -> List[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "_hog", "--cpu", str(cpu), "--seconds", str(seconds)]
    return cmd + (["--fifo"] if fifo else [])


def start_hog(cpu: int, seconds: float, fifo: bool) -> subprocess.Popen[str]:
    hog = subprocess.Popen(hog_command(cpu, seconds, fifo), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
    return hog


def go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


# --- the scenarios ------------------------------------------------------------------------


def healthy(s: Scenario) -> None:
    """Identical work every step (4 ms host spin, 1 MiB pinned copy, 5 launches, 20 ms GPU
    wait), noise only (±10 %)."""
    s.train()


def blocked_step(s: Scenario) -> None:
    """Step 7 also sleeps 200 ms outside any CUDA call (a data-loader stall)."""
    s.train(lambda i: time.sleep(STALL_NS / 1e9) if i == SLOW_STEP else None)


def preempted_step(s: Scenario) -> None:
    """During step 7, cpu_hog (SCHED_FIFO, pinned to the training thread's CPU) spins 200 ms
    while the training thread has CPU work to do: it is preempted for ~200 ms."""
    hog = start_hog(s.facts["cpu"], HOG_NS / 1e9, fifo=True)
    s.facts["hog_pid"] = hog.pid

    def extra(i: int) -> None:
        if i != SLOW_STEP:
            return
        go(hog)  # the hog wakes on our CPU and takes it; we stay runnable
        deadline = time.monotonic() + 5
        while hog.poll() is None and time.monotonic() < deadline:
            pass

    s.train(extra)
    hog.wait(timeout=10)


def cpu_contention(s: Scenario) -> None:
    """cpu_hog (nice -5, pinned to the training thread's CPU) spins for the whole run: the
    step's 4 ms of host work is stretched by ~12 ms of preemption."""
    hog = start_hog(s.facts["cpu"], 30.0, fifo=False)
    s.facts["hog_pid"] = hog.pid
    go(hog)
    try:
        s.train()
    finally:
        hog.kill()
        hog.wait(timeout=10)


def alloc_churn(s: Scenario) -> None:
    """Every step also makes 40 cudaMalloc+cudaFree pairs of 4 MiB (150 us spin each call:
    12 ms a step)."""
    s.cuda.set_cost("malloc", CHURN_NS, SPIN)
    s.cuda.set_cost("free", CHURN_NS, SPIN)

    def extra(i: int) -> None:
        for _ in range(CHURN_PAIRS):
            _, p = s.cuda.malloc(4 * MIB)
            s.cuda.free(p)

    s.train(extra)


def sync_storm(s: Scenario) -> None:
    """Every step synchronises 100 times (100 us sleep each) instead of once (20 ms)."""
    s.setup()
    for i in range(STEPS):
        with s.step(i):
            spin(s.noisy(HOST_NS))
            s.cuda.memcpy_async(s.device, s.pinned, MIB, H2D)
            s.cuda.set_cost("stream_sync", STORM_SYNC_NS, SLEEP)
            for k in range(STORM_SYNCS):
                if k < LAUNCHES:
                    s.cuda.launch(0x1000 + k)
                s.cuda.stream_sync()


def sync_memcpy(s: Scenario) -> None:
    """Every step also copies 8 MiB D2H with a synchronous cudaMemcpy (5 ms sleep)."""
    s.cuda.set_cost("memcpy", SYNC_MEMCPY_NS, SLEEP)
    s.train(lambda i: s.cuda.memcpy(s.pinned, s.device, SYNC_MEMCPY_BYTES, D2H))


def pageable_memcpy(s: Scenario) -> None:
    """Every step also copies 16 MiB H2D with cudaMemcpyAsync from pageable (ctypes) memory:
    4 ms spin (250 us/MiB)."""
    buf = ctypes.create_string_buffer(PAGEABLE_BYTES)
    s.facts["host_ptr"] = ctypes.addressof(buf)
    s.train(lambda i: s.cuda.memcpy_async(s.device, ctypes.addressof(buf), PAGEABLE_BYTES, H2D))


def pinned_memcpy(s: Scenario) -> None:
    """The same copy as pageable_memcpy from cudaMallocHost memory: 5 us (negative case)."""
    s.train(lambda i: s.cuda.memcpy_async(s.device, s.pinned, PAGEABLE_BYTES, H2D))


def leak(s: Scenario) -> None:
    """Every step also allocates 64 MiB with cudaMalloc and never frees it (1.9 GiB in all)."""
    s.train(lambda i: s.cuda.malloc(LEAK_BYTES))


def cold_start(s: Scenario) -> None:
    """The first cudaMalloc and the first launch cost 80 ms spin more (both in step 0); every
    step also allocates and frees 1 MiB, so cudaMalloc has >= 20 calls."""
    s.cuda.set_cost("first:malloc", COLD_NS, SPIN)
    s.cuda.set_cost("first:launch", COLD_NS, SPIN)

    def extra(i: int) -> None:
        _, p = s.cuda.malloc(MIB)
        s.cuda.free(p)

    s.train(extra, setup_in_first_step=True)


def error_storm(s: Scenario) -> None:
    """Every step also calls the real libcudart: 2 cudaMalloc, 2 cudaLaunchKernel, 1 cudaMemcpy,
    each failing with 35 (cudaErrorInsufficientDriver) without a GPU."""
    real = s.real
    assert real is not None, "error_storm needs --cudart"
    codes: Dict[int, int] = {}

    def extra(i: int) -> None:
        rets = [real.malloc(MIB)[0], real.malloc(MIB)[0], real.launch(), real.launch(),
                real.memcpy(0x7000, 0x8000, 4096, D2H)]
        for r in rets:
            codes[r] = codes.get(r, 0) + 1

    s.train(extra)
    s.facts["codes"] = {str(k): v for k, v in codes.items()}


def slow_request(s: Scenario) -> None:
    """4 threads serve 24 overlapping requests (`request_id` spans: 1 ms host spin, 3
    launches, a 25 ms sync); r-13's sync sleeps 150 ms more."""
    s.setup()
    work: "queue.Queue[str]" = queue.Queue()
    for n in range(REQUESTS):
        work.put(f"r-{n}")
    s.cuda.set_cost("stream_sync", REQUEST_SYNC_NS, SLEEP)
    threads_of: Dict[str, int] = {}

    def serve(k: int) -> None:
        time.sleep(k * 0.007)  # staggered: requests overlap without lining up
        while True:
            try:
                rid = work.get_nowait()
            except queue.Empty:
                return
            threads_of[rid] = tid()
            assert s.writer is not None
            with s.writer.span({"request_id": rid, "model": "tiny"}, pid=s.pid):
                spin(s.noisy(1 * MS))
                for j in range(3):
                    s.cuda.launch(0x2000 + j)
                if rid == SLOW_REQUEST:
                    s.cuda.next_extra(SLOW_REQUEST_EXTRA_NS, SLEEP)
                s.cuda.stream_sync()

    threads = [threading.Thread(target=serve, args=(k,)) for k in range(REQUEST_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.facts["slow_request_tid"] = threads_of[SLOW_REQUEST]


def host_bound(s: Scenario) -> None:
    """Every step launches 200 kernels with 60 us of Python CPU spin between them, and its
    sync returns at once."""
    s.setup()
    s.cuda.set_cost("launch", 0, SPIN)
    s.cuda.set_cost("stream_sync", 0, SLEEP)
    for i in range(STEPS):
        with s.step(i):
            for k in range(HOST_BOUND_LAUNCHES):
                spin(s.noisy(HOST_BOUND_GAP_NS))
                s.cuda.launch(0x3000 + k % 8)
            s.cuda.stream_sync()


def two_causes(s: Scenario) -> None:
    """Two causes of different sizes: step 7 sleeps 200 ms outside CUDA (one step), and every
    step copies 8 MiB D2H synchronously (5 ms each, 150 ms over the run)."""
    s.cuda.set_cost("memcpy", SYNC_MEMCPY_NS, SLEEP)

    def extra(i: int) -> None:
        s.cuda.memcpy(s.pinned, s.device, SYNC_MEMCPY_BYTES, D2H)
        if i == SLOW_STEP:
            time.sleep(STALL_NS / 1e9)

    s.train(extra)


SCENARIOS: Dict[str, Callable[[Scenario], None]] = {
    f.__name__: f
    for f in (healthy, blocked_step, preempted_step, cpu_contention, alloc_churn, sync_storm,
              sync_memcpy, pageable_memcpy, pinned_memcpy, leak, cold_start, error_storm,
              slow_request, host_bound, two_causes)
}


# Where preemption is the point, the training thread and the hog share one CPU.
PINNED = ("preempted_step", "cpu_contention")


def training_cpu() -> int:
    """The CPU the training thread (and any hog) is pinned to: the last one allowed."""
    return max(os.sched_getaffinity(0))


# The nice of the loop in scenarios where preemption is not the point.
QUIET_NICE = -10

# cpu_contention's hog runs at nice -5 (3x the training thread's CFS weight): the scheduler
# then takes about three quarters of the training thread's CPU time whenever both want it,
# rather than whatever the wake-up placement of the moment gives at equal weight.
HOG_NICE = -5


def run_hog(cpu: int, seconds: float, fifo: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(15, b"cpu_hog", 0, 0, 0)  # PR_SET_NAME
    os.sched_setaffinity(0, {cpu})
    if fifo:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except OSError:  # no realtime budget here: the highest CFS weight instead
            os.setpriority(os.PRIO_PROCESS, 0, -20)
    else:
        os.setpriority(os.PRIO_PROCESS, 0, HOG_NICE)
    print("ready", flush=True)
    if not sys.stdin.readline():
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=[*SCENARIOS, "_hog"])
    parser.add_argument("--mock")
    parser.add_argument("--cudart")
    parser.add_argument("--socket")
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--fifo", action="store_true")
    args = parser.parse_args()
    if args.name == "_hog":
        run_hog(args.cpu, args.seconds, args.fifo)
        return
    if not (args.mock and args.socket):
        parser.error("--mock and --socket are required")
    cpu = training_cpu()
    if args.name in PINNED:
        os.sched_setaffinity(0, {cpu})  # this (the training) thread only
    else:
        # Elsewhere the loop should not compete with whatever else the machine runs (a loaded
        # CI VM): a dedicated trainer's steps are not stretched by someone else's build.
        # Threads started later inherit it.
        os.setpriority(os.PRIO_PROCESS, 0, QUIET_NICE)
    s = Scenario(args.mock, args.cudart, args.socket)
    s.facts["cpu"] = cpu
    print(json.dumps({"pid": s.pid, "tid": tid(), "cpu": cpu}), flush=True)
    if not sys.stdin.readline():
        sys.exit(4)
    s.connect()
    t0 = time.monotonic()
    SCENARIOS[args.name](s)
    s.facts["seconds"] = round(time.monotonic() - t0, 3)
    s.facts["annotations_dropped"] = s.writer.dropped if s.writer else 0
    s.close()
    print(json.dumps({"done": True, **s.facts}), flush=True)


if __name__ == "__main__":
    main()
