"""The Python contract on its own: label rules, encoding, and the 0.1.1
API surface."""

from __future__ import annotations

import inspect
import json
import random

import pytest

import ingero_annotate as ia
from ingero_annotate import AnnotationError, encode_annotation, is_valid_label_key, validate_labels


def test_published_api_surface_is_preserved():
    for name in [
        "ANNOTATION_PROTOCOL_VERSION", "ANNOTATION_SOCKET_NAME", "ANNOTATION_SOCKET_DIR",
        "MAX_LABEL_KEY_LEN", "MAX_LABEL_VALUE_LEN", "MAX_LABELS_PER_ANNOTATION", "MAX_LINE_BYTES",
        "KEY_STEP", "KEY_EPOCH", "KEY_TASK_ID", "KEY_PHASE", "KEY_RUN_ID", "KEY_REQUEST_ID", "KEY_MODEL",
        "AnnotationError", "AnnotationWriter", "validate_labels", "is_valid_label_key",
        "encode_annotation", "default_socket_path", "now_ns", "logger", "_KEY_CHARS", "_is_socket",
    ]:
        assert hasattr(ia, name), name
    assert issubclass(AnnotationError, ValueError)
    assert ia.ANNOTATION_PROTOCOL_VERSION == 1
    assert (ia.ANNOTATION_SOCKET_NAME, ia.ANNOTATION_SOCKET_DIR) == ("annotate.sock", "/run/ingero")
    assert (ia.KEY_STEP, ia.KEY_EPOCH, ia.KEY_TASK_ID, ia.KEY_PHASE, ia.KEY_RUN_ID) == (
        "step", "epoch", "task_id", "phase", "run_id")
    assert (ia.KEY_REQUEST_ID, ia.KEY_MODEL) == ("request_id", "model")
    assert ia.logger.name == "ingero.annotate"
    params = inspect.signature(ia.AnnotationWriter.__init__).parameters
    assert list(params)[1:] == ["socket_path", "connect_timeout"]
    assert params["socket_path"].default is None and params["connect_timeout"].default == 2.0
    assert list(inspect.signature(ia.AnnotationWriter.write).parameters) == ["self", "labels", "pid", "ts_ns"]
    assert list(inspect.signature(encode_annotation).parameters)[:3] == ["labels", "pid", "ts_ns"]


def test_line_shape_matches_the_published_client():
    line = encode_annotation({"step": "42"}, pid=1234, ts_ns=1700000000000000000)
    assert line == b'{"labels":{"step":"42"},"pid":1234,"ts":1700000000000000000}\n'
    assert json.loads(line) == {"labels": {"step": "42"}, "pid": 1234, "ts": 1700000000000000000}


def test_key_rules():
    assert is_valid_label_key("step") and is_valid_label_key("a.b-c_D9")
    assert is_valid_label_key("k" * 64)
    for bad in ["", "k" * 65, "a b", "a/b", "é", "ключ", "a\n", 5, None]:
        assert not is_valid_label_key(bad), bad


@pytest.mark.parametrize(
    "labels",
    [
        {},
        {f"k{i}": "v" for i in range(33)},
        {"a b": "1"},
        {"k": "x" * 257},
        {"k": "é" * 129},
        {"k": 42},
        {5: "v"},
        {"k": "tab\there"},
        {"k": "nl\n"},
        {"k": "\x85"},
        {"k": "zero\u200bwidth"},
        {"k": "bidi\u202eoverride"},
        {"k": "bom\ufeff"},
        {"k": "line\u2028sep"},
        {"k": "tag\U000e0041"},
        {"k": "lone\ud800"},
    ],
)
def test_invalid_labels_raise(labels):
    with pytest.raises(AnnotationError):
        validate_labels(labels)
    with pytest.raises(AnnotationError):
        encode_annotation(labels)


def test_valid_edge_cases():
    validate_labels({f"k{i}": "v" for i in range(32)})
    validate_labels({"k": "x" * 256})
    validate_labels({"k": "é" * 128})
    validate_labels({"k": ""})
    validate_labels({"k": "日本語 🚀 \u00a0 quote\" back\\slash"})


def test_optional_fields_and_their_rules():
    line = json.loads(encode_annotation({"a": "b"}, pid=7, span_start=5, span_end=9, start_time=3))
    assert line == {"labels": {"a": "b"}, "pid": 7, "start_time": 3, "span_start": 5, "span_end": 9}
    for kwargs in [
        {"pid": 0}, {"pid": -1}, {"pid": ia.PID_MAX + 1}, {"pid": True}, {"pid": "x"},
        {"span_start": 5}, {"span_end": 5}, {"span_start": 6, "span_end": 5},
        {"start_time": 1}, {"ts_ns": -1}, {"ts_ns": "soon"},
    ]:
        with pytest.raises(AnnotationError):
            encode_annotation({"a": "b"}, **kwargs)


def test_escaping_round_trips_through_json():
    rng = random.Random(1234)
    pool = "aZ0 \"\\/{}:,éß日本🚀\u00a0\u2010"
    for _ in range(2000):
        labels = {
            f"k{i}": "".join(rng.choice(pool) for _ in range(rng.randrange(0, 40)))
            for i in range(rng.randrange(1, 6))
        }
        line = encode_annotation(labels, ts_ns=1)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line)["labels"] == labels


def test_worst_case_line_fits_the_cap():
    labels = {f"{i:0>64}": '"' * 256 for i in range(32)}
    line = encode_annotation(labels, pid=ia.PID_MAX, ts_ns=2**63, span_start=1, span_end=2, start_time=2**64 - 1)
    assert len(line) <= ia.MAX_LINE_BYTES
    # The published client's ensure_ascii escaping of 2-byte characters
    # (about 27 KB) fits too.
    escaped = json.dumps({"labels": {f"{i:0>64}": "é" * 128 for i in range(32)}}).encode()
    assert 26_000 < len(escaped) < ia.MAX_LINE_BYTES


def test_forbidden_char_table_matches_unicodedata_where_it_can():
    import unicodedata

    for cp in range(0x110000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Zl", "Zp"):
            # Every character this Python knows in those categories is in
            # the table (the table may know newer ones).
            assert ia.is_forbidden_char(ch), hex(cp)
        elif ia.is_forbidden_char(ch):
            # Newer than this Python's Unicode: must be unassigned here.
            assert cat == "Cn", (hex(cp), cat)
