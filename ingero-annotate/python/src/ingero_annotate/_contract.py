"""The annotation wire contract: constants, label rules and line encoding.

This mirrors the Rust crate ``ingero-annotate`` (the single definition the
agent enforces); ``tests/test_rust_contract.py`` checks that they agree.
One annotation is one NDJSON line::

    {"labels": {"step": "42"}, "pid": 1234, "ts": 1700000000000000000}
"""

from __future__ import annotations

import json
import re

from ._charclass import CC_ZL_ZP_RANGES, CF_RANGES, FORBIDDEN_RE, SURROGATE_RE, char_class

ANNOTATION_PROTOCOL_VERSION = 1
ANNOTATION_SOCKET_NAME = "annotate.sock"
ANNOTATION_SOCKET_DIR = "/run/ingero"
ANNOTATION_HOME_SOCKET_DIR = ".ingero/annotate"
ANNOTATION_SOCKET_ENV = "INGERO_ANNOTATE_SOCKET"

MAX_LABEL_KEY_LEN = 64
MAX_LABEL_VALUE_LEN = 256
MAX_LABELS_PER_ANNOTATION = 32
# Large enough for every valid annotation however it is escaped:
# 32 * (6 * (64 + 256) + 6) + 4096 (see ingero-annotate/src/limits.rs).
MAX_LINE_BYTES = 65_728
# ts and spans must be within this distance of the agent's clock.
MAX_CLOCK_SKEW_NS = 24 * 60 * 60 * 1_000_000_000
# Linux PID_MAX_LIMIT: no pid is larger.
PID_MAX = 4_194_304

# Well-known label keys the integrations standardise on.
KEY_STEP = "step"
KEY_EPOCH = "epoch"
KEY_TASK_ID = "task_id"
KEY_PHASE = "phase"
KEY_RUN_ID = "run_id"
KEY_REQUEST_ID = "request_id"
KEY_MODEL = "model"
WELL_KNOWN_KEYS = (KEY_STEP, KEY_EPOCH, KEY_TASK_ID, KEY_PHASE, KEY_RUN_ID, KEY_REQUEST_ID, KEY_MODEL)

# Allowed label-key characters: ASCII letters, digits, underscore, dot, hyphen.
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_LABEL_KEY_LEN, re.ASCII)
# Validated values hold no control characters, so only these need escaping.
_NEEDS_ESCAPE_RE = re.compile(r'["\\]')
# Anything that makes a value need a closer look: a forbidden character, a
# lone surrogate, or a character to escape. One search covers the common
# case (nothing found) of the hot path.
_SPECIAL_RE = re.compile("[" + char_class(CC_ZL_ZP_RANGES + CF_RANGES) + "\ud800-\udfff" + '"\\\\' + "]")
# Keys already validated, with their encoded prefix: keys repeat (step,
# epoch...), and a dict lookup is cheaper than a regex. Bounded so that
# ever-new keys cannot grow it without limit.
_KEY_PREFIX: dict = {}
_KEY_CACHE_MAX = 4096


class AnnotationError(ValueError):
    """Raised when an annotation violates the agent's contract limits."""


def is_valid_label_key(key: str) -> bool:
    """Whether ``key`` is 1 to 64 bytes of ``[A-Za-z0-9_.-]``."""
    return isinstance(key, str) and _KEY_RE.fullmatch(key) is not None


def _check_value(key: str, value: str) -> bool:
    """Raise AnnotationError for an invalid value; return whether it needs
    JSON escaping."""
    # Up to 64 characters cannot exceed 256 bytes (4 bytes per character at
    # most), so the common short value skips the encode.
    if len(value) > MAX_LABEL_VALUE_LEN // 4:
        try:
            n = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise AnnotationError(f"label {key!r} value is not valid Unicode (lone surrogate)") from None
        if n > MAX_LABEL_VALUE_LEN:
            raise AnnotationError(f"label {key!r} value is {n} bytes, max {MAX_LABEL_VALUE_LEN}")
    if _SPECIAL_RE.search(value) is None:
        return False
    bad = FORBIDDEN_RE.search(value)
    if bad is not None:
        raise AnnotationError(
            f"label {key!r} value contains a control or invisible format character "
            f"(U+{ord(bad.group()):04X})"
        )
    if SURROGATE_RE.search(value) is not None:
        raise AnnotationError(f"label {key!r} value is not valid Unicode (lone surrogate)")
    return _NEEDS_ESCAPE_RE.search(value) is not None


def _key_prefix(key) -> str:
    """The encoded ``"key":`` for a valid key; raises for an invalid one."""
    prefix = _KEY_PREFIX.get(key)
    if prefix is not None:
        return prefix
    if not isinstance(key, str):
        raise AnnotationError("label keys and values must be strings")
    if _KEY_RE.fullmatch(key) is None:
        raise AnnotationError(f"invalid label key {key!r} (charset A-Za-z0-9_.-, max {MAX_LABEL_KEY_LEN} bytes)")
    prefix = '"' + key + '":'
    if len(_KEY_PREFIX) < _KEY_CACHE_MAX:
        _KEY_PREFIX[key] = prefix
    return prefix


def _labels_json(labels) -> str:
    """Validate ``labels`` and encode them as the start of a line."""
    if not labels:
        raise AnnotationError("annotation has no labels")
    if len(labels) > MAX_LABELS_PER_ANNOTATION:
        raise AnnotationError(f"annotation has {len(labels)} labels, max {MAX_LABELS_PER_ANNOTATION}")
    parts = []
    for key, value in labels.items():
        prefix = _key_prefix(key)
        if type(value) is not str and not isinstance(value, str):
            raise AnnotationError("label keys and values must be strings")
        if _check_value(key, value):
            parts.append(prefix + json.dumps(value, ensure_ascii=False))
        else:
            parts.append(prefix + '"' + value + '"')
    return '{"labels":{' + ",".join(parts) + "}"


def encode_plain(labels, pid, ts_ns: int) -> "bytes | None":
    """The hot path of ``AnnotationWriter.write``: encode the common
    annotation (a dict of known keys to short printable-ASCII values without
    quotes or backslashes, an optional int pid, an int ts) or return None so
    that ``encode_annotation`` handles it, raising exactly as it would.

    Everything it accepts passes ``encode_annotation``'s checks and encodes
    to the same bytes; a test checks this on many generated inputs.
    """
    if type(labels) is not dict or not 0 < len(labels) <= MAX_LABELS_PER_ANNOTATION:
        return None
    parts = []
    for key, value in labels.items():
        prefix = _KEY_PREFIX.get(key)
        # A key not cached yet has not been validated: the slow path does
        # that (and caches it).
        if prefix is None or type(value) is not str:
            return None
        parts.append(prefix + '"' + value + '"')
    body = ",".join(parts)
    # One pass over all labels at C speed: printable ASCII means no
    # forbidden character, no surrogate and one byte per character; the
    # only quotes are the 4 per label that were just added, and there is no
    # backslash, so nothing needs escaping.
    if not (body.isascii() and body.isprintable()) or "\\" in body or body.count('"') != 4 * len(parts):
        return None
    if len(body) > MAX_LABEL_VALUE_LEN and any(len(v) > MAX_LABEL_VALUE_LEN for v in labels.values()):
        return None
    if type(ts_ns) is not int or ts_ns < 0:
        return None
    if pid is None:
        return f'{{"labels":{{{body}}},"ts":{ts_ns}}}\n'.encode()
    if type(pid) is not int or not 0 < pid <= PID_MAX:
        return None
    # At most 32 * (64 + 256 + 6) bytes of labels: far below MAX_LINE_BYTES.
    return f'{{"labels":{{{body}}},"pid":{pid},"ts":{ts_ns}}}\n'.encode()


def validate_labels(labels) -> None:
    """Validate a label mapping against the contract.

    Raises AnnotationError on the first violation: no labels, more than 32,
    a non-string key or value, a bad key, a value over 256 UTF-8 bytes, or
    a value with a control or invisible-format character.
    """
    _labels_json(labels)


def _int_field(name: str, value) -> int:
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, bool):
        raise AnnotationError(f"{name} must be an integer, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise AnnotationError(f"{name} must be an integer, got {value!r}") from None
    if n < 0:
        raise AnnotationError(f"{name} must not be negative, got {n}")
    return n


def encode_annotation(
    labels,
    pid: int | None = None,
    ts_ns: int | None = None,
    *,
    span_start: int | None = None,
    span_end: int | None = None,
    start_time: int | None = None,
) -> bytes:
    """Encode one annotation as a single NDJSON line (terminated by ``\\n``).

    ``pid`` scopes it to a process (``start_time``, field 22 of
    /proc/<pid>/stat, pins the incarnation); ``ts_ns`` is unix ns;
    ``span_start``/``span_end`` (together) make it a span. Raises
    AnnotationError on any contract violation.
    """
    line = _labels_json(labels)
    if pid is not None:
        pid = _int_field("pid", pid)
        if not 1 <= pid <= PID_MAX:
            raise AnnotationError(f"pid {pid} is outside 1..{PID_MAX}")
        line += ',"pid":' + str(pid)
    if start_time is not None:
        if pid is None:
            raise AnnotationError("start_time is only meaningful with pid")
        line += ',"start_time":' + str(_int_field("start_time", start_time))
    if ts_ns is not None:
        line += ',"ts":' + str(_int_field("ts_ns", ts_ns))
    if (span_start is None) != (span_end is None):
        raise AnnotationError("span_start and span_end must be given together")
    if span_start is not None:
        s = _int_field("span_start", span_start)
        e = _int_field("span_end", span_end)
        if e < s:
            raise AnnotationError(f"span_end {e} is before span_start {s}")
        line += ',"span_start":' + str(s) + ',"span_end":' + str(e)
    data = (line + "}\n").encode("utf-8")
    if len(data) > MAX_LINE_BYTES:
        raise AnnotationError(f"encoded annotation is {len(data)} bytes, max {MAX_LINE_BYTES}")
    return data
