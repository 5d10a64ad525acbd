"""HuggingFace ``Trainer``: ``IngeroTrainerCallback`` labels optimizer steps.

    from ingero_annotate.integrations.hf import IngeroTrainerCallback
    trainer = Trainer(..., callbacks=[IngeroTrainerCallback(run_id="exp-7")])

Spans (scoped to the process running the loop, pid read at emit time):

- one per optimizer step, ``on_step_begin`` to ``on_step_end``:
  ``phase=train``, ``step`` (``state.global_step`` after the step, the number
  the Trainer logs it under, so the first step is 1), ``epoch``;
- with gradient accumulation (``gradient_accumulation_steps > 1``), one per
  micro-batch inside it, with ``micro_step`` (0-based);
- ``stage=optimizer_step``: ``on_pre_optimizer_step`` to ``on_optimizer_step``;
- one per training epoch: ``phase=train``, ``epoch``;
- evaluation and prediction: one span per batch (``batch_idx``) and one over
  the whole loop, with ``phase`` ``val`` (``evaluate``; ``test`` when its
  metrics use the ``test_`` prefix) or ``predict`` (``predict``), and
  ``step`` = the global step they ran at. The Trainer has no "evaluation
  begins" event, so batch spans are bounded by consecutive
  ``on_prediction_step`` events and are sent when the loop ends (only then
  does the Trainer say which loop it was); the first batch is bounded only
  when the loop runs inside training (it starts at the preceding
  ``on_step_end``), otherwise the loop span starts at its first batch's end.

Without ``transformers`` the class is a plain object that does nothing.
"""

from __future__ import annotations

import time
from typing import Any, List, Mapping, Optional, Tuple

from ._common import (
    static_labels,
    KEY_BATCH_IDX,
    KEY_EPOCH,
    KEY_MICRO_STEP,
    KEY_PHASE,
    KEY_STAGE,
    KEY_STEP,
    PHASE_PREDICT,
    PHASE_TEST,
    PHASE_TRAIN,
    PHASE_VAL,
    STAGE_OPTIMIZER_STEP,
    Emitter,
    _internal_error,
)

# Evaluation batches buffered until the loop ends; bounded so that a
# never-ending prediction loop cannot grow memory without limit.
_MAX_EVAL_BATCHES = 100_000


def _trainer_callback_base() -> type:
    try:
        from transformers import TrainerCallback
    except Exception:  # transformers missing or broken: a no-op object
        return object
    return TrainerCallback


class IngeroTrainerCallback(_trainer_callback_base()):  # type: ignore[misc]
    """``IngeroTrainerCallback(run_id=None, *, labels=None, writer=None, socket_path=None)``"""

    def __init__(
        self,
        run_id: Optional[str] = None,
        *,
        labels: Optional[Mapping[str, Any]] = None,
        writer: Any = None,
        socket_path: Optional[str] = None,
    ) -> None:
        static = static_labels(labels, run_id=run_id)
        self._emitter = Emitter(writer, socket_path=socket_path, static_labels=static)
        self._epoch = 0
        self._micro = 0
        self._accumulating = False
        self._in_train = False
        # Evaluation bookkeeping: end of the previous boundary, batch bounds.
        self._eval_anchor: Optional[int] = None
        self._eval_batches: List[Tuple[Optional[int], int]] = []

    # ------------------------------------------------------------- train
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._in_train = True
        self._accumulating = (getattr(args, "gradient_accumulation_steps", 1) or 1) > 1

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._in_train = False
        self._eval_anchor = None
        self._emitter.end_all()

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            # state.epoch is fractional progress; at an epoch's start it is
            # the epoch index up to float error.
            self._epoch = int(round(getattr(state, "epoch", 0) or 0))
            self._emitter.begin("epoch", {KEY_PHASE: PHASE_TRAIN, KEY_EPOCH: self._epoch})
        except Exception as exc:
            _internal_error(exc)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._emitter.end("epoch")

    def _step_labels(self, state: Any) -> dict:
        return {KEY_PHASE: PHASE_TRAIN, KEY_STEP: (getattr(state, "global_step", 0) or 0) + 1,
                KEY_EPOCH: self._epoch}

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            labels = self._step_labels(state)
            self._emitter.begin("step", labels)
            self._micro = 0
            if self._accumulating:
                self._emitter.begin("micro", dict(labels, **{KEY_MICRO_STEP: 0}))
        except Exception as exc:
            _internal_error(exc)

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            self._emitter.end("micro")
            self._micro += 1
            labels = self._emitter.open_labels("step")
            if labels is not None and self._accumulating:
                labels[KEY_MICRO_STEP] = self._micro
                self._emitter.begin("micro", labels)
        except Exception as exc:
            _internal_error(exc)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            self._emitter.end("micro")
            labels = self._emitter.open_labels("step") or self._step_labels(state)
            labels[KEY_STAGE] = STAGE_OPTIMIZER_STEP
            self._emitter.begin("optimizer_step", labels)
        except Exception as exc:
            _internal_error(exc)

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._emitter.end("optimizer_step")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._emitter.end("micro")
        self._emitter.end("step")
        # Evaluation, when due, starts right after this (log/save aside).
        self._eval_anchor = time.time_ns()

    # -------------------------------------------------------- evaluation
    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            now = time.time_ns()
            if len(self._eval_batches) < _MAX_EVAL_BATCHES:
                self._eval_batches.append((self._eval_anchor, now))
            self._eval_anchor = now
        except Exception as exc:
            _internal_error(exc)

    def _flush_eval(self, state: Any, phase: str) -> None:
        try:
            batches, self._eval_batches = self._eval_batches, []
            # The next loop's first batch has no known start unless training
            # resumes (on_step_end sets the anchor again).
            self._eval_anchor = None
            if not batches:
                return
            step = getattr(state, "global_step", 0) or 0
            base = {KEY_PHASE: phase, KEY_STEP: step, KEY_EPOCH: self._epoch}
            for idx, (start, end) in enumerate(batches):
                if start is not None:
                    self._emitter.emit_span(dict(base, **{KEY_BATCH_IDX: idx}), start, end)
            loop_start = batches[0][0] if batches[0][0] is not None else batches[0][1]
            self._emitter.emit_span(base, loop_start, time.time_ns())
        except Exception as exc:
            _internal_error(exc)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        phase = PHASE_VAL
        try:
            if metrics and all(str(k).startswith("test_") for k in metrics):
                phase = PHASE_TEST
        except Exception:
            pass
        self._flush_eval(state, phase)

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        self._flush_eval(state, PHASE_PREDICT)


__all__ = ["IngeroTrainerCallback"]
