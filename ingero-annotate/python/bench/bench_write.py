"""Median cost of ``AnnotationWriter.write()`` against a socket being drained.

This package's writer and the published ``ingero-annotate==0.1.1`` run side
by side in one process, in alternating batches, against the same draining
peer (a forked child process, so the drain never competes for our GIL).
Usage::

    python3 bench_write.py --baseline-dir DIR [--drain poll|wake] [--batches 300] [--batch 1000] [--json]

``DIR`` holds 0.1.1 installed with ``pip install --target DIR
ingero-annotate==0.1.1``; it has the same import name as this package, so
it is loaded from its file under another name.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from types import ModuleType
from typing import Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))


def load_ours() -> ModuleType:
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
    import ingero_annotate

    return ingero_annotate


def load_baseline(directory: str) -> ModuleType:
    path = os.path.join(directory, "ingero_annotate.py")
    spec = importlib.util.spec_from_file_location("ingero_annotate_011", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no ingero_annotate.py in {directory}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_package_copy(src: str, name: str) -> ModuleType:
    """Another copy of this package (e.g. an earlier revision, for a
    before/after comparison) from ``src/ingero_annotate``, under ``name``."""
    init = os.path.join(src, "ingero_annotate", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[os.path.dirname(init)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"no package at {init}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def drain_forever(listener: socket.socket, mode: str) -> None:
    """In the child: accept every connection and read it until EOF.

    ``wake``: a thread per connection blocks in recv, so every send wakes a
    sleeping reader (what an idle agent looks like; the wakeup is charged
    partly to the sender). ``poll``: one thread reads whatever arrived every
    half millisecond, so sends find no sleeping reader (an agent busy with
    other lines); this isolates the client's own cost.
    """
    if mode == "wake":

        def read(conn: socket.socket) -> None:
            while conn.recv(1 << 20):
                pass

        while True:
            conn, _ = listener.accept()
            threading.Thread(target=read, args=(conn,), daemon=True).start()
    listener.setblocking(False)
    conns: List[socket.socket] = []
    while True:
        time.sleep(0.0005)
        try:
            conn, _ = listener.accept()
            conn.setblocking(False)
            conns.append(conn)
        except BlockingIOError:
            pass
        for conn in conns:
            try:
                while conn.recv(1 << 20):
                    pass
            except BlockingIOError:
                pass


def time_batches(write: Callable[..., bool], batch: List[Dict[str, str]], pid: int) -> float:
    """Seconds per call over one batch."""
    t0 = time.perf_counter_ns()
    for labels in batch:
        write(labels, pid=pid)
    return (time.perf_counter_ns() - t0) / len(batch) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-dir", required=True)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--drain", choices=["poll", "wake"], default="poll", help="how the peer reads (see drain_forever)")
    ap.add_argument("--compare-src", help="also time another copy of this package (its src/ dir)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args()

    ours = load_ours()
    base = load_baseline(args.baseline_dir)
    tmp = tempfile.mkdtemp(prefix="ia-bench-")
    path = os.path.join(tmp, "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    child = os.fork()
    if child == 0:
        try:
            drain_forever(listener, args.drain)
        finally:
            os._exit(0)
    listener.close()
    try:
        pid = os.getpid()
        # Realistic labels: a training step counter and an epoch, as the
        # framework hooks send them. Built up front so only write() is timed.
        batch = [{"step": str(i), "epoch": str(i // 500)} for i in range(args.batch)]
        writers = {
            "ours": ours.AnnotationWriter(socket_path=path),
            "0.1.1": base.AnnotationWriter(socket_path=path),
        }
        if args.compare_src:
            other = load_package_copy(args.compare_src, "ingero_annotate_compare")
            writers["compare"] = other.AnnotationWriter(socket_path=path)
        for name, w in writers.items():
            if not w.active:
                raise SystemExit(f"{name} writer did not connect")

        def noop(labels: Dict[str, str], pid: int | None = None) -> bool:
            return True

        # The syscall floor: one non-blocking send of a ready line on a
        # connection of its own, which no writer can go below.
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(path)
        raw.setblocking(False)
        ready = ours.encode_annotation(batch[0], pid=pid, ts_ns=time.time_ns())
        flags = getattr(socket, "MSG_NOSIGNAL", 0) | getattr(socket, "MSG_DONTWAIT", 0)

        def bare_send(labels: Dict[str, str], pid: int | None = None) -> bool:
            try:
                return raw.send(ready, flags) > 0
            except BlockingIOError:
                return False

        samples: Dict[str, List[float]] = {name: [] for name in writers}
        samples["send floor"] = []
        samples["call floor"] = []
        for name, w in writers.items():
            time_batches(w.write, batch, pid)  # warm up
        for _ in range(args.batches):
            # Alternate so drift (frequency, other load) hits both equally.
            for name, w in writers.items():
                samples[name].append(time_batches(w.write, batch, pid))
            samples["send floor"].append(time_batches(bare_send, batch, pid))
            samples["call floor"].append(time_batches(noop, batch, pid))
        med = {name: statistics.median(v) * 1e6 for name, v in samples.items()}
        p90 = {name: sorted(v)[int(len(v) * 0.9)] * 1e6 for name, v in samples.items()}
        sent = {name: getattr(w, "sent", None) for name, w in writers.items()}
        for w in writers.values():
            w.close()
        raw.close()
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        shutil.rmtree(tmp, ignore_errors=True)

    result = {
        "median_us": med,
        "p90_us": p90,
        "speedup_vs_0_1_1": med["0.1.1"] / med["ours"],
        "batches": args.batches,
        "batch": args.batch,
        "drain": args.drain,
        "ours_sent": sent["ours"],
        "python": sys.version.split()[0],
    }
    if args.json:
        print(json.dumps(result))
    else:
        for name in med:
            print(f"{name:>10}: median {med[name]:.2f} us/call, p90 {p90[name]:.2f}")
        print(f"speedup vs 0.1.1: {result['speedup_vs_0_1_1']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
