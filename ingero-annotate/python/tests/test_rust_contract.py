"""The Python package and the Rust contract (the one the agent enforces)
agree: constants, key charset, forbidden characters, and verdicts on many
generated label sets."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

import pytest

import ingero_annotate as ia
from conftest import REPO_ROOT

pytestmark = pytest.mark.rust


def _cargo(*args: str, stdin: bytes | None = None) -> bytes:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    cmd = ["cargo", "run", "--quiet", "-p", "ingero-annotate", "--example", "contract-json", "--", *args]
    out = subprocess.run(cmd, cwd=REPO_ROOT, input=stdin, capture_output=True, timeout=900)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out.stdout


@pytest.fixture(scope="module")
def contract() -> dict:
    return json.loads(_cargo())


def test_constants_agree(contract):
    assert contract["protocol_version"] == ia.ANNOTATION_PROTOCOL_VERSION
    assert contract["max_labels"] == ia.MAX_LABELS_PER_ANNOTATION
    assert contract["max_key_bytes"] == ia.MAX_LABEL_KEY_LEN
    assert contract["max_value_bytes"] == ia.MAX_LABEL_VALUE_LEN
    assert contract["max_line_bytes"] == ia.MAX_LINE_BYTES
    assert contract["max_clock_skew_ns"] == ia.MAX_CLOCK_SKEW_NS
    assert contract["pid_max"] == ia.PID_MAX
    assert contract["well_known_keys"] == list(ia.WELL_KNOWN_KEYS)
    assert contract["socket"] == {
        "env": ia.ANNOTATION_SOCKET_ENV,
        "name": ia.ANNOTATION_SOCKET_NAME,
        "run_dir": ia.ANNOTATION_SOCKET_DIR,
        "home_dir": ia.ANNOTATION_HOME_SOCKET_DIR,
    }
    assert contract["nvtx"] == {
        "socket_env": ia.NVTX_SOCKET_ENV,
        "socket_name": ia.NVTX_SOCKET_NAME,
        "library_env": ia.NVTX_LIBRARY_ENV,
        "library_name": ia.NVTX_LIBRARY_NAME,
        "injection_env": ia.NVTX_INJECTION_ENV,
    }


def test_key_charset_agrees(contract):
    assert set(contract["key_bytes"]) == set(ia._KEY_CHARS)
    for b in range(128):
        assert ia.is_valid_label_key(chr(b)) == (chr(b) in contract["key_bytes"]), b


def test_forbidden_characters_agree(contract):
    assert [tuple(r) for r in contract["cf_ranges"]] == list(ia.CF_RANGES)
    assert [tuple(r) for r in contract["cc_zl_zp_ranges"]] == list(ia.CC_ZL_ZP_RANGES)


def test_verdicts_agree_on_generated_annotations():
    rng = random.Random(20240601)
    pool = list("aZ0 \"\\/{}:,éß日🚀\u00a0\u2010") + ["\n", "\x00", "\x7f", "\x85", "\u200b", "\u202e", "\u2028", "\ufeff"]
    key_pool = "abcXYZ019_.-"
    cases = []
    for _ in range(3000):
        n = rng.choice([0, 1, 2, 3, 5, 32, 33])
        labels = {}
        for _ in range(n):
            klen = rng.choice([1, 3, 8, 64, 65])
            key = "".join(rng.choice(key_pool) for _ in range(klen))
            if rng.random() < 0.02:
                key += "!"
            vlen = rng.choice([0, 3, 20, 64, 85, 86, 128, 129, 256, 257])
            value = "".join(rng.choice(pool[:15]) for _ in range(vlen))
            if rng.random() < 0.03:
                value += rng.choice(pool[15:])
            labels[key] = value
        cases.append(labels)
    py_verdicts = []
    lines = []
    for labels in cases:
        try:
            ia.validate_labels(labels)
            py_verdicts.append(True)
        except ia.AnnotationError:
            py_verdicts.append(False)
        # Hand-built with json.dumps (the published client's escaping), so
        # the Rust side judges the labels, not this package's encoder.
        lines.append(json.dumps({"labels": labels}))
    out = _cargo("--check", stdin=("\n".join(lines) + "\n").encode()).decode().splitlines()
    assert len(out) == len(cases)
    mismatches = [(c, v, o) for c, v, o in zip(cases, py_verdicts, out) if v != (o == "ok")]
    assert not mismatches, mismatches[:3]
    assert 0.1 < sum(py_verdicts) / len(cases) < 0.9, "the generator covers both outcomes"


def test_our_encoder_output_is_accepted_by_rust():
    rng = random.Random(7)
    lines = []
    for i in range(500):
        labels = {f"k{j}": "".join(rng.choice("aé日🚀\"\\ ") for _ in range(rng.randrange(0, 60))) for j in range(rng.randrange(1, 8))}
        lines.append(ia.encode_annotation(labels, pid=os.getpid(), ts_ns=ia.now_ns(), span_start=ia.now_ns() - 5, span_end=ia.now_ns()))
    out = _cargo("--check", stdin=b"".join(lines)).decode().splitlines()
    assert out == ["ok"] * len(lines)
