"""The writer against a small in-test socket server: delivery, no
blocking, drop counting, reconnects, threads, fork, spans."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

import pytest

from conftest import LineServer
from ingero_annotate import AnnotationError, AnnotationWriter


def test_lines_arrive_with_own_timestamp(server, sock_path):
    w = AnnotationWriter(socket_path=sock_path)
    assert w.active and w.socket_path == sock_path
    before = time.time_ns()
    assert w.write({"step": "42"}, pid=os.getpid()) is True
    assert w.write({"step": "43"}, ts_ns=123) is True
    got = server.wait_for(2)
    assert got[0]["labels"] == {"step": "42"} and got[0]["pid"] == os.getpid()
    assert before <= got[0]["ts"] <= time.time_ns()
    assert got[1]["ts"] == 123
    assert (w.sent, w.dropped) == (2, 0)
    w.close()


def test_without_an_agent_it_is_a_quiet_no_op(sock_path, caplog):
    caplog.set_level(logging.WARNING, logger="ingero.annotate")
    w = AnnotationWriter(socket_path=sock_path)
    assert not w.active
    start = time.monotonic()
    for i in range(10_000):
        assert w.write({"step": str(i)}) is False
    assert time.monotonic() - start < 2.0
    assert w.dropped == 10_000
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "ingero trace --annotate" in warnings[0].getMessage()
    with pytest.raises(AnnotationError):
        w.write({"bad key": "1"})


def test_an_agent_started_later_is_picked_up(sock_path):
    w = AnnotationWriter(socket_path=sock_path)
    assert w.write({"a": "1"}) is False
    server = LineServer(sock_path)
    try:
        deadline = time.monotonic() + 5
        while not w.write({"a": "2"}):
            assert time.monotonic() < deadline, "never reconnected"
            time.sleep(0.02)
        assert server.wait_for(1)[0]["labels"] == {"a": "2"}
    finally:
        server.close()


def test_an_agent_restart_is_survived(sock_path):
    server = LineServer(sock_path)
    w = AnnotationWriter(socket_path=sock_path)
    assert w.write({"a": "before"})
    server.wait_for(1)
    server.close()
    server = LineServer(sock_path)
    try:
        deadline = time.monotonic() + 5
        while not w.write({"a": "after"}):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert server.wait_for(1)[-1]["labels"] == {"a": "after"}
    finally:
        server.close()


def test_a_stalled_agent_never_blocks_and_lines_stay_whole(server, sock_path):
    server.reading.clear()
    w = AnnotationWriter(socket_path=sock_path)
    pad = "v" * 200
    start = time.monotonic()
    for i in range(50_000):
        w.write({"i": str(i), "pad": pad})
    elapsed = time.monotonic() - start
    assert elapsed < 10, elapsed
    assert w.dropped > 0 and w.sent > 0
    assert w.sent + w.dropped == 50_000
    server.reading.set()
    # One more write flushes a partially sent line, if any.
    deadline = time.monotonic() + 5
    while not w.write({"i": "last", "pad": pad}):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    got = server.wait_for(w.sent)
    assert len(got) == w.sent, "every line reported sent arrives, each whole"
    assert got[-1]["labels"]["i"] == "last"


def test_threads_never_interleave(server, sock_path):
    w = AnnotationWriter(socket_path=sock_path)

    def work(t):
        for i in range(500):
            w.write({"thread": str(t), "i": str(i)})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = server.wait_for(w.sent)
    assert len(got) == w.sent == 4000 - w.dropped
    assert len({(a["labels"]["thread"], a["labels"]["i"]) for a in got}) == len(got)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(server, sock_path):
    w = AnnotationWriter(socket_path=sock_path)
    assert w.write({"who": "parent-before"})
    server.wait_for(1)
    pid = os.fork()
    if pid == 0:
        ok = w.write({"who": "child"}, pid=os.getpid())
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert w.write({"who": "parent-after"})
    got = server.wait_for(3)
    assert sorted(a["labels"]["who"] for a in got) == ["child", "parent-after", "parent-before"]
    peer_pids = {p[0] for p in server.peers}
    assert peer_pids == {os.getpid(), pid}, "the child connected itself"


def test_span_as_context_manager_and_decorator(server, sock_path):
    w = AnnotationWriter(socket_path=sock_path)
    with w.span({"request_id": "abc-123"}, pid=os.getpid()):
        time.sleep(0.01)

    @w.span({"phase": "eval"})
    def evaluate(x):
        return x * 2

    assert evaluate(21) == 42 and evaluate.__name__ == "evaluate"

    @w.span({"phase": "async"})
    async def serve():
        await asyncio.sleep(0.001)
        return "done"

    assert asyncio.run(serve()) == "done"
    with pytest.raises(RuntimeError):
        with w.span({"phase": "boom"}):
            raise RuntimeError("propagates")
    got = server.wait_for(4)
    first = got[0]
    assert first["labels"] == {"request_id": "abc-123"} and first["pid"] == os.getpid()
    assert first["span_end"] - first["span_start"] >= 10_000_000
    assert "ts" not in first
    assert [a["labels"]["phase"] for a in got[1:]] == ["eval", "async", "boom"]
    with pytest.raises(AnnotationError):
        w.span({"bad key": "x"})


def test_env_var_overrides_the_default_path(server, sock_path, monkeypatch):
    monkeypatch.setenv("INGERO_ANNOTATE_SOCKET", sock_path)
    w = AnnotationWriter()
    assert w.socket_path == sock_path and w.active
    assert w.write({"via": "env"})
    assert server.wait_for(1)[0]["labels"] == {"via": "env"}


def test_close_and_context_manager(server, sock_path):
    with AnnotationWriter(socket_path=sock_path) as w:
        assert w.write({"a": "b"})
    assert not w.active
    assert w.write({"a": "c"}) is False
    w.close()
