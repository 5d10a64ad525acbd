"""vLLM: ``RequestEmitter`` writes one span per finished request.

    emitter = RequestEmitter(model="llama-3-8b")

    # offline
    for out in llm.generate(prompts, params):
        emitter.record(out)

    # serving (AsyncLLM / AsyncLLMEngine)
    async for out in emitter.stream(engine.generate(prompt, params, request_id)):
        ...

For each finished ``RequestOutput`` it sends a span from the request's
arrival to its last token, labelled ``request_id``, ``model``,
``prompt_tokens`` and ``output_tokens``, and, when vLLM recorded the
timestamps (stats logging on, the default), separate spans with
``request_stage`` = ``queued``, ``prefill`` and ``decode``:

- V1 (``RequestOutput.metrics`` is a ``RequestStateStats``): ``arrival_time``
  is wall-clock; ``queued_ts``, ``scheduled_ts``, ``first_token_ts`` and
  ``last_token_ts`` are the engine core's CLOCK_MONOTONIC, which is one
  clock for the whole machine, so they are converted to wall-clock here.
- V0 (``RequestMetrics``): ``arrival_time``, ``first_scheduled_time``,
  ``first_token_time``, ``finished_time``, all wall-clock.
- Without metrics: the span runs from the first output this emitter saw
  for the request (``stream``) or from now, to now.

Scope: trace-wide by default. In vLLM V1 the GPU work of every request runs
in the engine-core process (and its workers under tensor parallelism),
not in the API server or ``LLM`` process where outputs arrive; a span
scoped to this process would label none of that GPU work, and requests are
batched together anyway, so an unscoped span (all processes, bounded in
time) is the honest label. Pass ``scope="process"`` only when generation
runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``).
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator, Dict, Iterable, Mapping, Optional

from ._common import (
    static_labels,
    KEY_OUTPUT_TOKENS,
    KEY_PROMPT_TOKENS,
    KEY_REQUEST_ID,
    KEY_REQUEST_STAGE,
    REQUEST_DECODE,
    REQUEST_PREFILL,
    REQUEST_QUEUED,
    SCOPE_TRACE,
    Emitter,
    _internal_error,
)

# Requests seen but not yet finished (stream fallback start times);
# bounded so abandoned streams cannot grow it without limit.
_MAX_PENDING = 65_536


def _ns(seconds: Any) -> Optional[int]:
    """Seconds (float) to integer ns; None for unset (vLLM uses 0.0)."""
    if not seconds:
        return None
    try:
        return int(float(seconds) * 1e9)
    except (TypeError, ValueError):
        return None


def _token_count(tokens: Any) -> Optional[int]:
    try:
        return len(tokens) if tokens is not None else None
    except TypeError:
        return None


class RequestEmitter:
    """``RequestEmitter(model=None, *, scope="trace", labels=None, writer=None, socket_path=None)``"""

    def __init__(
        self,
        model: Optional[str] = None,
        *,
        scope: str = SCOPE_TRACE,
        labels: Optional[Mapping[str, Any]] = None,
        writer: Any = None,
        socket_path: Optional[str] = None,
    ) -> None:
        static = static_labels(labels, model=model)
        self._emitter = Emitter(writer, socket_path=socket_path, scope=scope, static_labels=static)
        self._first_seen: Dict[str, int] = {}

    def record(self, output: Any) -> None:
        """Note one ``RequestOutput``; a finished one emits its spans."""
        try:
            rid = getattr(output, "request_id", None)
            if rid is None:
                return
            rid = str(rid)
            if not getattr(output, "finished", True):
                if rid not in self._first_seen and len(self._first_seen) < _MAX_PENDING:
                    self._first_seen[rid] = time.time_ns()
                return
            self._emit(rid, output, self._first_seen.pop(rid, None))
        except Exception as exc:
            _internal_error(exc)

    def record_all(self, outputs: Iterable[Any]) -> None:
        """``record`` each output (e.g. the list ``LLM.generate`` returns)."""
        for out in outputs:
            self.record(out)

    async def stream(self, outputs: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Pass an async stream of outputs through, recording each."""
        async for out in outputs:
            self.record(out)
            yield out

    def _emit(self, rid: str, output: Any, first_seen: Optional[int]) -> None:
        now = time.time_ns()
        labels: Dict[str, Any] = {KEY_REQUEST_ID: rid}
        prompt = _token_count(getattr(output, "prompt_token_ids", None))
        if prompt is not None:
            labels[KEY_PROMPT_TOKENS] = prompt
        outs = getattr(output, "outputs", None) or []
        counts = [_token_count(getattr(o, "token_ids", None)) for o in outs]
        if counts and all(c is not None for c in counts):
            labels[KEY_OUTPUT_TOKENS] = sum(counts)  # type: ignore[arg-type]

        bounds = self._bounds(getattr(output, "metrics", None))
        start = bounds.get("arrival") or first_seen or now
        end = bounds.get("end") or now
        self._emitter.emit_span(labels, start, max(end, start))

        for stage, a, b in ((REQUEST_QUEUED, "queued", "scheduled"),
                            (REQUEST_PREFILL, "scheduled", "first_token"),
                            (REQUEST_DECODE, "first_token", "end")):
            s, e = bounds.get(a), bounds.get(b)
            if s is not None and e is not None and e >= s:
                self._emitter.emit_span(dict(labels, **{KEY_REQUEST_STAGE: stage}), s, e)

    @staticmethod
    def _bounds(metrics: Any) -> Dict[str, Optional[int]]:
        """Request lifecycle times in unix ns from V1 or V0 metrics."""
        if metrics is None:
            return {}
        if hasattr(metrics, "scheduled_ts") or hasattr(metrics, "first_token_ts"):
            # V1: engine-core monotonic timestamps; one offset converts them.
            offset = time.time_ns() - time.monotonic_ns()

            def mono(name: str) -> Optional[int]:
                v = _ns(getattr(metrics, name, None))
                return v + offset if v is not None else None

            queued = mono("queued_ts")
            return {
                "arrival": _ns(getattr(metrics, "arrival_time", None)) or queued,
                "queued": queued,
                "scheduled": mono("scheduled_ts"),
                "first_token": mono("first_token_ts"),
                "end": mono("last_token_ts"),
            }
        arrival = _ns(getattr(metrics, "arrival_time", None))
        return {
            "arrival": arrival,
            "queued": arrival,
            "scheduled": _ns(getattr(metrics, "first_scheduled_time", None)),
            "first_token": _ns(getattr(metrics, "first_token_time", None)),
            "end": _ns(getattr(metrics, "finished_time", None)) or _ns(getattr(metrics, "last_token_time", None)),
        }


__all__ = ["RequestEmitter"]
