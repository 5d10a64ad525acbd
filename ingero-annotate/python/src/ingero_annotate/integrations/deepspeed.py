"""DeepSpeed: ``annotate_engine`` wraps an engine to label its stages.

    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=cfg, ...)
    engine = annotate_engine(engine, run_id="exp-7")
    for batch in loader:
        loss = engine(batch)        # stage=forward
        engine.backward(loss)       # stage=backward
        engine.step()               # stage=optimizer_step (at accumulation boundaries)

Each span carries ``step`` = ``engine.global_steps`` when the call starts
(DeepSpeed's own count of optimizer steps), ``micro_step`` =
``engine.micro_steps``, ``phase`` (``train`` while the module is in training
mode, else ``val``; set ``wrapper.phase`` to override) and ``stage``.
``engine.step()`` runs the optimizer only at a gradient-accumulation
boundary; other calls just advance the micro-step and get no span.

The wrapper forwards every other attribute to the engine (``wrapper.engine``
is the engine itself, for ``isinstance`` checks). Spans are scoped to the
calling process (each DeepSpeed rank is its own process), read at emit time.
Nothing here imports DeepSpeed: the wrapper only calls the engine's methods.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ._common import (
    static_labels,
    KEY_MICRO_STEP,
    KEY_PHASE,
    KEY_STAGE,
    KEY_STEP,
    PHASE_TRAIN,
    PHASE_VAL,
    STAGE_BACKWARD,
    STAGE_FORWARD,
    STAGE_OPTIMIZER_STEP,
    Emitter,
    _internal_error,
)

_OWN = frozenset({"engine", "phase", "_emitter"})


class AnnotatedEngine:
    """A transparent wrapper of a DeepSpeed engine; see the module docstring."""

    def __init__(self, engine: Any, emitter: Emitter) -> None:
        object.__setattr__(self, "engine", engine)
        object.__setattr__(self, "phase", None)
        object.__setattr__(self, "_emitter", emitter)

    def _labels(self, stage: str) -> dict:
        eng = self.engine
        labels = {KEY_STAGE: stage}
        try:
            phase = self.phase
            if phase is None:
                phase = PHASE_TRAIN if getattr(eng, "training", True) else PHASE_VAL
            labels[KEY_PHASE] = phase
            labels[KEY_STEP] = getattr(eng, "global_steps", None)
            labels[KEY_MICRO_STEP] = getattr(eng, "micro_steps", None)
        except Exception as exc:
            _internal_error(exc)
        return labels

    def _timed(self, stage: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        labels = self._labels(stage)
        with self._emitter.span(labels):
            return fn(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(STAGE_FORWARD, self.engine, *args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(STAGE_FORWARD, self.engine.forward, *args, **kwargs)

    def backward(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(STAGE_BACKWARD, self.engine.backward, *args, **kwargs)

    def step(self, *args: Any, **kwargs: Any) -> Any:
        try:
            boundary = bool(self.engine.is_gradient_accumulation_boundary())
        except Exception:
            boundary = True  # an engine without the query: label every step
        if not boundary:
            return self.engine.step(*args, **kwargs)
        return self._timed(STAGE_OPTIMIZER_STEP, self.engine.step, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found on the wrapper: the engine's.
        return getattr(object.__getattribute__(self, "engine"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.engine, name, value)

    def __repr__(self) -> str:
        return "AnnotatedEngine(%r)" % (self.engine,)


def annotate_engine(
    engine: Any,
    run_id: Optional[str] = None,
    *,
    labels: Optional[Mapping[str, Any]] = None,
    writer: Any = None,
    socket_path: Optional[str] = None,
) -> AnnotatedEngine:
    """Wrap a DeepSpeed engine (see module docstring)."""
    static = static_labels(labels, run_id=run_id)
    return AnnotatedEngine(engine, Emitter(writer, socket_path=socket_path, static_labels=static))


__all__ = ["AnnotatedEngine", "annotate_engine"]
