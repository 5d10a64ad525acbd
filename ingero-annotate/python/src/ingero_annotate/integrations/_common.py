"""What every framework adapter shares: the label vocabulary, label
sanitising, and ``Emitter``, a never-raising sender with span bookkeeping.

The rules it enforces for all adapters (docs/integrations.md):

- Nothing raises into the user's loop. Labels a framework or user supplies
  (a run name with a newline, a 300-byte task name) are repaired or dropped,
  with ONE warning per process; an adapter bug is logged once and swallowed.
- Sends go through the core non-blocking ``AnnotationWriter``.
- The scope pid is read when a line is emitted, never cached, so it is right
  after fork or spawn.
- Without an agent everything is a silent no-op (the writer keeps retrying
  in the background, so an agent started later is picked up).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Hashable, Iterator, Mapping, Optional, Tuple

from .._charclass import is_forbidden_char
from .._contract import (
    KEY_EPOCH,
    KEY_MODEL,
    KEY_PHASE,
    KEY_REQUEST_ID,
    KEY_RUN_ID,
    KEY_STEP,
    KEY_TASK_ID,
    MAX_LABEL_KEY_LEN,
    MAX_LABEL_VALUE_LEN,
    MAX_LABELS_PER_ANNOTATION,
    WELL_KNOWN_KEYS,
    AnnotationError,
    encode_annotation,
)

logger = logging.getLogger("ingero.annotate.integrations")

# ---------------------------------------------------------------- vocabulary
# The core's well-known keys (KEY_STEP, KEY_EPOCH, KEY_PHASE, KEY_RUN_ID,
# KEY_TASK_ID, KEY_REQUEST_ID, KEY_MODEL) are imported above so that adapters
# take the whole vocabulary from this one module.
# The part of a step a span covers.
KEY_STAGE = "stage"
# Adapter-specific keys, documented once in docs/integrations.md.
KEY_BATCH_IDX = "batch_idx"
KEY_MICRO_STEP = "micro_step"
KEY_TASK_NAME = "task_name"
KEY_ACTOR_ID = "actor_id"
KEY_RANK = "rank"
KEY_PROMPT_TOKENS = "prompt_tokens"
KEY_OUTPUT_TOKENS = "output_tokens"
KEY_REQUEST_STAGE = "request_stage"

# `phase` names the loop a step belongs to.
PHASE_TRAIN = "train"
PHASE_VAL = "val"
PHASE_TEST = "test"
PHASE_PREDICT = "predict"
PHASES = (PHASE_TRAIN, PHASE_VAL, PHASE_TEST, PHASE_PREDICT)

# `stage` names the part of a training step.
STAGE_FORWARD = "forward"
STAGE_BACKWARD = "backward"
STAGE_OPTIMIZER_STEP = "optimizer_step"
STAGES = (STAGE_FORWARD, STAGE_BACKWARD, STAGE_OPTIMIZER_STEP)

# `request_stage` names the part of an inference request's life (vLLM).
REQUEST_QUEUED = "queued"
REQUEST_PREFILL = "prefill"
REQUEST_DECODE = "decode"
REQUEST_STAGES = (REQUEST_QUEUED, REQUEST_PREFILL, REQUEST_DECODE)

# `scope` values of an Emitter.
SCOPE_PROCESS = "process"
SCOPE_TRACE = "trace"

# ---------------------------------------------------------------- sanitising
_KEY_OK = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_warn_lock = threading.Lock()
_label_warning_issued = False
_internal_warning_issued = False


def label_value(value: Any) -> Optional[str]:
    """The label string for a framework value; None means "leave it out".

    Integers stay exact; floats drop a useless ``.0`` (an HF epoch of 2.0
    is ``"2"``) and are otherwise printed briefly (``0.25``).
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return "%.6g" % value
    return str(value)


def _sanitize_key(key: Any) -> Optional[str]:
    key = label_value(key)
    if not key:
        return None
    fixed = "".join(c if c in _KEY_OK else "_" for c in key)
    # Keys are ASCII after the replacement, so characters are bytes here.
    return fixed[:MAX_LABEL_KEY_LEN]


def _sanitize_value(value: str) -> str:
    # Lone surrogates cannot be encoded; forbidden characters (controls,
    # invisible formats, line/paragraph separators) would be rejected.
    fixed = "".join("?" if is_forbidden_char(c) or 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    data = fixed.encode("utf-8")
    if len(data) > MAX_LABEL_VALUE_LEN:
        # Cut on a character boundary: `ignore` drops a split final character.
        fixed = data[:MAX_LABEL_VALUE_LEN].decode("utf-8", errors="ignore")
    return fixed


def sanitize_labels(labels: Mapping[Any, Any]) -> Tuple[Dict[str, str], list]:
    """Repair ``labels`` so the agent accepts them.

    Returns the repaired mapping and a list of what was changed (empty when
    nothing was). Bad key characters become ``_``; keys and values are cut
    to the contract's limits; forbidden characters in values become ``?``;
    ``None`` values are left out; beyond 32 labels the well-known keys are
    kept first and the rest dropped.
    """
    out: Dict[str, str] = {}
    problems = []
    for raw_key, raw_value in labels.items():
        value = label_value(raw_value)
        if value is None:
            continue
        key = _sanitize_key(raw_key)
        if key is None:
            problems.append("empty key dropped")
            continue
        if key != raw_key:
            problems.append("key %r became %r" % (raw_key, key))
        fixed = _sanitize_value(value)
        if fixed != value:
            problems.append("value of %r repaired (control/invisible characters or over %d bytes)" % (key, MAX_LABEL_VALUE_LEN))
        out[key] = fixed
    if len(out) > MAX_LABELS_PER_ANNOTATION:
        ordered = [k for k in out if k in WELL_KNOWN_KEYS] + [k for k in out if k not in WELL_KNOWN_KEYS]
        kept = ordered[:MAX_LABELS_PER_ANNOTATION]
        problems.append("%d labels over the limit of %d dropped" % (len(out) - len(kept), MAX_LABELS_PER_ANNOTATION))
        out = {k: out[k] for k in kept}
    return out, problems


def _warn_labels_once(problems: list) -> None:
    global _label_warning_issued
    with _warn_lock:
        if _label_warning_issued:
            return
        _label_warning_issued = True
    logger.warning(
        "ingero: invalid annotation labels were repaired (%s); later repairs in this process are silent",
        "; ".join(problems[:3]) or "dropped",
    )


def _internal_error(exc: BaseException) -> None:
    """An adapter bug must not break training: log the first one, swallow all."""
    global _internal_warning_issued
    with _warn_lock:
        first = not _internal_warning_issued
        _internal_warning_issued = True
    if first:
        logger.warning("ingero: annotation adapter error ignored (%s: %s); annotations may be incomplete",
                       type(exc).__name__, exc, exc_info=True)
    else:
        logger.debug("ingero: annotation adapter error ignored", exc_info=True)


def _reset_warnings_for_tests() -> None:
    global _label_warning_issued, _internal_warning_issued
    with _warn_lock:
        _label_warning_issued = False
        _internal_warning_issued = False


# ------------------------------------------------------------------- writer
_shared_lock = threading.Lock()
_shared_writers: Dict[Optional[str], Any] = {}


class _QuietFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def shared_writer(socket_path: Optional[str] = None) -> Any:
    """One ``AnnotationWriter`` per socket path for all adapters of a process.

    Created on first use. Its "no agent" warning is silenced here: an
    adapter without an agent is a silent no-op by design (it is logged at
    DEBUG instead), and the writer still reconnects when an agent starts.
    The writer resets its own connection in a forked child.
    """
    with _shared_lock:
        w = _shared_writers.get(socket_path)
        if w is not None:
            return w
        from .._writer import AnnotationWriter, logger as core_logger

        quiet = _QuietFilter()
        core_logger.addFilter(quiet)
        try:
            w = AnnotationWriter(socket_path)
        finally:
            core_logger.removeFilter(quiet)
        if not w.active:
            logger.debug("ingero: no agent at %s; adapters are a no-op until one listens there", w.socket_path)
        _shared_writers[socket_path] = w
        return w


def _send_line(writer: Any, line: bytes) -> bool:
    # The core writer's public API sends instants and spans it times itself;
    # adapters need spans with given bounds (hook boundaries, vLLM's own
    # timestamps), so they hand a ready line to the writer's send path. A
    # writer with a public `send_line` (planned) is preferred.
    send = getattr(writer, "send_line", None) or getattr(writer, "_send", None)
    if send is None:
        return False
    return bool(send(line))


# ------------------------------------------------------------------ emitter
def _as_str_labels(labels: Mapping[Any, Any]) -> Dict[Any, str]:
    out = {}
    for k, v in labels.items():
        s = label_value(v)
        if s is not None:
            out[k] = s
    return out


def static_labels(labels: Optional[Mapping[str, Any]], **extra: Any) -> Dict[str, Any]:
    """An adapter's fixed labels: the user's ``labels`` plus each keyword that is not None
    (``run_id=...``, ``model=...``; the keyword is the label key)."""
    merged = dict(labels or {})
    merged.update({key: value for key, value in extra.items() if value is not None})
    return merged


class Emitter:
    """Sends an adapter's annotations; no method ever raises.

    ``writer``: an ``AnnotationWriter`` (default: the process-wide shared
    one, created on first emit). ``scope``: ``"process"`` scopes every line
    to ``os.getpid()`` read at emit time; ``"trace"`` leaves lines unscoped.
    ``static_labels`` (for example ``{"run_id": ...}``) are added to every
    line. ``max_open`` bounds the spans begun but not ended (a framework
    that skips an end hook must not grow memory without limit).
    """

    def __init__(
        self,
        writer: Any = None,
        *,
        socket_path: Optional[str] = None,
        scope: str = SCOPE_PROCESS,
        static_labels: Optional[Mapping[str, Any]] = None,
        max_open: int = 4096,
    ) -> None:
        if scope not in (SCOPE_PROCESS, SCOPE_TRACE):
            logger.warning("ingero: unknown scope %r, using %r", scope, SCOPE_PROCESS)
            scope = SCOPE_PROCESS
        self._writer = writer
        self._socket_path = socket_path
        self.scope = scope
        self._static = _as_str_labels(static_labels or {})
        self._max_open = max_open
        self._open: Dict[Hashable, Tuple[int, Dict[Any, str]]] = {}
        self._lock = threading.Lock()

    # Lines must not carry a writer, a lock or open spans across pickling
    # (Ray ships decorated functions to workers); a copy starts empty.
    def __getstate__(self) -> dict:
        return {"scope": self.scope, "static": self._static, "socket_path": self._socket_path,
                "max_open": self._max_open}

    def __setstate__(self, state: dict) -> None:
        self.__init__(None, socket_path=state["socket_path"], scope=state["scope"],
                      static_labels=state["static"], max_open=state["max_open"])

    @property
    def writer(self) -> Any:
        if self._writer is None:
            self._writer = shared_writer(self._socket_path)
        return self._writer

    def pid(self) -> Optional[int]:
        """The scope pid, read now (never cached: fork and spawn change it)."""
        return os.getpid() if self.scope == SCOPE_PROCESS else None

    def _line(self, labels: Mapping[Any, str], pid: Optional[int], **times: Optional[int]) -> Optional[bytes]:
        merged = dict(self._static)
        merged.update(labels)
        try:
            return encode_annotation(merged, pid=pid, **times)
        except AnnotationError:
            fixed, problems = sanitize_labels(merged)
            _warn_labels_once(problems)
            if not fixed:
                return None
            try:
                return encode_annotation(fixed, pid=pid, **times)
            except AnnotationError as exc:
                logger.debug("ingero: annotation dropped: %s", exc)
                return None

    def instant(self, labels: Mapping[Any, Any], ts_ns: Optional[int] = None) -> bool:
        """An instant annotation at ``ts_ns`` (default now)."""
        try:
            line = self._line(_as_str_labels(labels), self.pid(), ts_ns=ts_ns or time.time_ns())
            return line is not None and _send_line(self.writer, line)
        except Exception as exc:  # never into the user's loop
            _internal_error(exc)
            return False

    def emit_span(self, labels: Mapping[Any, Any], start_ns: int, end_ns: int) -> bool:
        """A span with explicit bounds (unix ns); a reversed span is clamped."""
        try:
            start_ns = int(start_ns)
            end_ns = max(int(end_ns), start_ns)
            line = self._line(_as_str_labels(labels), self.pid(), span_start=start_ns, span_end=end_ns)
            return line is not None and _send_line(self.writer, line)
        except Exception as exc:
            _internal_error(exc)
            return False

    def begin(self, key: Hashable, labels: Mapping[Any, Any], start_ns: Optional[int] = None) -> None:
        """Open span ``key`` now; it is sent by ``end(key)``. Re-opening an
        open key first closes the old span (a framework skipped its end)."""
        try:
            now = start_ns or time.time_ns()
            with self._lock:
                stale = self._open.pop(key, None)
                if len(self._open) >= self._max_open:
                    self._open.pop(next(iter(self._open)))
                self._open[key] = (now, _as_str_labels(labels))
            if stale is not None:
                self.emit_span(stale[1], stale[0], now)
        except Exception as exc:
            _internal_error(exc)

    def end(self, key: Hashable, extra: Optional[Mapping[Any, Any]] = None,
            end_ns: Optional[int] = None) -> bool:
        """Close span ``key`` and send it (with ``extra`` labels added);
        False when it was not open."""
        try:
            with self._lock:
                item = self._open.pop(key, None)
            if item is None:
                return False
            start, labels = item
            if extra:
                labels = dict(labels)
                labels.update(_as_str_labels(extra))
            return self.emit_span(labels, start, end_ns or time.time_ns())
        except Exception as exc:
            _internal_error(exc)
            return False

    def is_open(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._open

    def open_labels(self, key: Hashable) -> Optional[Dict[Any, str]]:
        """A copy of the labels of open span ``key``, or None."""
        with self._lock:
            item = self._open.get(key)
        return dict(item[1]) if item is not None else None

    def end_all(self) -> None:
        """Close every open span now (an exception ended the loop)."""
        try:
            with self._lock:
                items = list(self._open.values())
                self._open.clear()
            now = time.time_ns()
            for start, labels in items:
                self.emit_span(labels, start, now)
        except Exception as exc:
            _internal_error(exc)

    @contextmanager
    def span(self, labels: Mapping[Any, Any]) -> Iterator[None]:
        """``with emitter.span({...}):`` sends one span when the block ends,
        also when it raises (the exception propagates unchanged)."""
        start = time.time_ns()
        try:
            yield
        finally:
            self.emit_span(labels, start, time.time_ns())
