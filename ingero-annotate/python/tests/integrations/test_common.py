"""The shared adapter machinery: sanitising with one warning, never raising,
silent without an agent, pid read at emit time, span bookkeeping."""

from __future__ import annotations

import logging
import os
import pickle

from ingero_annotate import AnnotationWriter
from ingero_annotate.integrations import _common
from ingero_annotate.integrations._common import Emitter, sanitize_labels

from .conftest import spans


def test_invalid_labels_repaired_with_one_warning(server, writer, caplog):
    e = Emitter(writer)
    with caplog.at_level(logging.WARNING, logger="ingero.annotate.integrations"):
        e.emit_span({"run_id": "bad\nname", "task_name": "x" * 300}, 1, 2)
        e.emit_span({"bad key!": "v", "zw": "a\u200bb"}, 3, 4)
        e.instant({"step": 1})
    got = server.wait_for(3)
    assert got[0]["labels"] == {"run_id": "bad?name", "task_name": "x" * 256}
    assert got[1]["labels"] == {"bad_key_": "v", "zw": "a?b"}
    assert got[2]["labels"] == {"step": "1"} and "ts" in got[2]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


def test_sanitize_limits():
    labels = {"k%d" % i: "v" for i in range(40)}
    labels["step"] = 3
    fixed, problems = sanitize_labels(labels)
    assert len(fixed) == 32 and fixed["step"] == "3" and problems
    fixed, problems = sanitize_labels({"é" * 10: "ü" * 200, "none": None})
    assert fixed == {"_" * 10: "ü" * 128} and problems
    assert sanitize_labels({"epoch": 2.0, "lr": 0.25, "ok": True}) == ({"epoch": "2", "lr": "0.25", "ok": "true"}, [])


def test_no_agent_is_silent_noop(sock_dir, caplog, monkeypatch):
    monkeypatch.setattr(_common, "_shared_writers", {})
    with caplog.at_level(logging.DEBUG):
        e = Emitter(socket_path=os.path.join(sock_dir, "absent.sock"))
        assert e.emit_span({"step": "1"}, 1, 2) is False
        e.begin("s", {"step": "1"})
        assert e.end("s") is False
        e.instant({"step": "2"})
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_pid_read_at_emit_time(server, writer, monkeypatch):
    e = Emitter(writer)
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    e.emit_span({"step": "1"}, 1, 2)
    monkeypatch.setattr(os, "getpid", lambda: 4343)
    e.emit_span({"step": "2"}, 1, 2)
    assert [a["pid"] for a in server.wait_for(2)] == [4242, 4343]
    Emitter(writer, scope="trace").emit_span({"step": "3"}, 1, 2)
    assert "pid" not in server.wait_for(3)[2]


def test_begin_end_and_end_all(server, writer):
    e = Emitter(writer, static_labels={"run_id": "r"})
    e.begin("a", {"step": 1})
    e.begin("b", {"step": 2})
    assert e.end("a", extra={"x": "y"})
    assert not e.end("missing")
    e.end_all()
    got = spans(server, 2)
    assert got[0]["labels"] == {"run_id": "r", "step": "1", "x": "y"}
    assert got[1]["labels"] == {"run_id": "r", "step": "2"}


def test_bounded_open_spans_and_reopen(server, writer):
    e = Emitter(writer, max_open=2)
    e.begin(1, {"step": "1"})
    e.begin(2, {"step": "2"})
    e.begin(3, {"step": "3"})  # evicts the oldest without sending it
    e.begin(3, {"step": "3b"})  # re-open closes the stale one
    assert spans(server, 1)[0]["labels"] == {"step": "3"}
    assert not e.is_open(1) and e.is_open(2)


def test_span_context_manager_propagates_exceptions(server, writer):
    e = Emitter(writer)
    try:
        with e.span({"step": "9"}):
            raise KeyError("user error")
    except KeyError:
        pass
    assert spans(server, 1)[0]["labels"] == {"step": "9"}


def test_adapter_bug_never_raises(server, writer, caplog):
    class Broken:
        def __str__(self):
            raise RuntimeError("boom")

    e = Emitter(writer)
    with caplog.at_level(logging.WARNING):
        assert e.emit_span({"step": Broken()}, 1, 2) is False
        assert e.emit_span({"step": Broken()}, 1, 2) is False
    assert len([r for r in caplog.records if "adapter error" in r.getMessage()]) == 1


def test_emitter_pickles_without_its_writer(writer):
    e = Emitter(writer, scope="trace", static_labels={"model": "m"})
    e.begin("x", {"step": "1"})
    copy = pickle.loads(pickle.dumps(e))
    assert copy.scope == "trace" and copy._static == {"model": "m"}
    assert not copy.is_open("x") and copy._writer is None


def test_shared_writer_is_reused(sock_dir, monkeypatch):
    monkeypatch.setattr(_common, "_shared_writers", {})
    path = os.path.join(sock_dir, "none.sock")
    w = _common.shared_writer(path)
    assert isinstance(w, AnnotationWriter) and _common.shared_writer(path) is w
