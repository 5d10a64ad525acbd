"""The writer's hot-path encoder (``encode_plain``) against the full one
(``encode_annotation``): whenever the fast path answers, it must produce the
same bytes, and it must only answer for annotations the full encoder
accepts."""

from __future__ import annotations

import random

import pytest

from ingero_annotate import PID_MAX, AnnotationError, encode_annotation
from ingero_annotate._contract import encode_plain


class Sub(str):
    def __str__(self) -> str:
        return "changed"


KEYS = ["step", "epoch", "a", "k.1-x_Y", "bad key", "", "é", "k" * 64, "k" * 65, 3, None, Sub("step")]
VALUES = [
    "42",
    "",
    "x" * 256,
    "x" * 257,
    "say \"hi\"",
    "back\\slash",
    "tab\there",
    "\x7f",
    "é",
    "🚀",
    "\u200b",
    "\ud800",
    " ~!#$%&'()*+,-./:;<=>?@[]^_`{|}",
    42,
    None,
    Sub("v"),
]
PIDS = [None, None, 1, 1234, PID_MAX, PID_MAX + 1, 0, -1, True, "5", 1.5]
TSS = [1_700_000_000_000_000_000, 0, -1, 1.5, True, 2**70]


def full(labels, pid, ts):
    try:
        return encode_annotation(labels, pid=pid, ts_ns=ts)
    except AnnotationError as e:
        return e
    except (TypeError, ValueError) as e:  # pragma: no cover - would be a bug either way
        return e


def test_fast_path_matches_the_full_encoder_on_generated_inputs():
    rng = random.Random(1234)
    answered = 0
    total = 20_000
    for _ in range(total):
        n = rng.choice([0, 1, 1, 2, 2, 3, 5, 32, 33])
        labels = {}
        for i in range(n):
            if n > 5:
                key = f"k{i}"
            else:
                key = rng.choice(KEYS) if rng.random() < 0.2 else rng.choice(["step", "epoch", "a"])
            labels[key] = rng.choice(VALUES) if rng.random() < 0.15 else str(rng.randrange(10**6))
        pid = rng.choice(PIDS) if rng.random() < 0.3 else 1234
        ts = rng.choice(TSS) if rng.random() < 0.2 else 1_700_000_000_000_000_000
        expected = full(labels, pid, ts)
        got = encode_plain(labels, pid, ts)
        if got is not None:
            answered += 1
            assert got == expected, (labels, pid, ts)
    assert total // 5 < answered < total * 9 // 10, answered


@pytest.mark.parametrize(
    "labels,pid",
    [
        ({"step": "42", "epoch": "3"}, 1234),
        ({"step": "42"}, None),
        ({"request_id": "abc-123", "model": "llama-3-8b"}, PID_MAX),
    ],
)
def test_common_annotations_take_the_fast_path(labels, pid):
    ts = 1_700_000_000_000_000_000
    expected = encode_annotation(labels, pid=pid, ts_ns=ts)  # validates and caches the keys
    assert encode_plain(labels, pid, ts) == expected


def test_the_fast_path_never_answers_for_what_must_be_escaped_or_refused():
    ts = 1
    encode_annotation({"k": "v"}, ts_ns=ts)
    for labels, pid in [
        ({"k": 'a"b'}, None),
        ({"k": "a\\b"}, None),
        ({"k": "é"}, None),
        ({"k": "\x00"}, None),
        ({"k": "x" * 257}, None),
        ({"k": Sub("v")}, None),
        ({"unseen-key": "v"}, None),
        ({}, None),
        ({"k": "v"}, 0),
        ({"k": "v"}, True),
    ]:
        assert encode_plain(labels, pid, ts) is None, (labels, pid)
