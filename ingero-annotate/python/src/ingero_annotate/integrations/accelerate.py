"""HuggingFace Accelerate: ``annotate_accelerator`` labels a custom loop.

Accelerate has no callback system: the user writes the loop. So the hook is
one line after ``prepare`` plus one ``with`` around the step::

    accelerator = Accelerator()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    ingero = annotate_accelerator(accelerator, run_id="exp-7")
    for epoch in range(epochs):
        for batch in loader:
            with ingero.step(epoch=epoch):            # phase=train, step, epoch
                with accelerator.accumulate(model):
                    loss = model(batch)               # or: with ingero.stage("forward"):
                    accelerator.backward(loss)        # stage=backward, automatically
                    optimizer.step()                  # stage=optimizer_step, automatically
                    optimizer.zero_grad()

What it hooks, and why this way:

- ``accelerator.backward`` is wrapped on that instance only (Accelerate's
  backward applies loss scaling and DeepSpeed/FSDP logic, so it is the one
  call every Accelerate user makes); ``detach()`` restores it.
- Optimizer steps are timed with torch's per-optimizer step hooks on the
  optimizers the accelerator prepared (found again at each ``step()``, so
  the order of ``prepare`` and ``annotate_accelerator`` does not matter).
  They fire only when torch really steps, so a micro-batch under gradient
  accumulation (where Accelerate skips the step) gets no optimizer span.
- ``step`` counts optimizer steps completed before the span starts (the
  global step, 0-based as in Lightning); micro-batches of one accumulation
  window share it and get ``micro_step``. Without a hooked optimizer it
  counts ``step()`` blocks instead. Pass ``step=`` to use your own number.

All spans are scoped to the calling process, read at emit time.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional

from ._common import (
    static_labels,
    KEY_EPOCH,
    KEY_MICRO_STEP,
    KEY_PHASE,
    KEY_STAGE,
    KEY_STEP,
    PHASE_TRAIN,
    STAGE_BACKWARD,
    STAGE_OPTIMIZER_STEP,
    Emitter,
    _internal_error,
)


class AcceleratorAnnotator:
    """Made by ``annotate_accelerator``; see the module docstring."""

    def __init__(self, accelerator: Any, emitter: Emitter) -> None:
        self._accelerator = accelerator
        self._emitter = emitter
        self._hooked = {}  # id(torch optimizer) -> hook handles
        self.optimizer_steps = 0
        self._blocks = 0
        self._micro = 0
        self._orig_backward = None
        self._wrap_backward()
        self._hook_optimizers()

    # -------------------------------------------------------- hooks
    def _wrap_backward(self) -> None:
        acc = self._accelerator
        orig = getattr(acc, "backward", None)
        if orig is None or getattr(orig, "_ingero_wrapped", False):
            return
        annotator = self

        @functools.wraps(orig)
        def backward(*args: Any, **kwargs: Any) -> Any:
            annotator._stage_begin(STAGE_BACKWARD)
            try:
                return orig(*args, **kwargs)
            finally:
                annotator._emitter.end(("stage", STAGE_BACKWARD))

        backward._ingero_wrapped = True  # type: ignore[attr-defined]
        try:
            acc.backward = backward
            self._orig_backward = orig
        except Exception as exc:  # a read-only object: stages stay unlabelled
            _internal_error(exc)

    def _hook_optimizers(self) -> None:
        try:
            for acc_opt in list(getattr(self._accelerator, "_optimizers", None) or []):
                opt = getattr(acc_opt, "optimizer", acc_opt)
                if id(opt) in self._hooked or not hasattr(opt, "register_step_pre_hook"):
                    continue
                pre = opt.register_step_pre_hook(self._on_opt_pre)
                post = opt.register_step_post_hook(self._on_opt_post)
                self._hooked[id(opt)] = (pre, post)
        except Exception as exc:
            _internal_error(exc)

    def _on_opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stage_begin(STAGE_OPTIMIZER_STEP)

    def _on_opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._emitter.end(("stage", STAGE_OPTIMIZER_STEP))
        self.optimizer_steps += 1

    def _stage_begin(self, name: str) -> None:
        try:
            labels = self._emitter.open_labels(("step", threading.get_ident()))
            if labels is None:
                labels = {KEY_PHASE: PHASE_TRAIN, KEY_STEP: self._current_step()}
            labels.pop(KEY_MICRO_STEP, None)
            labels[KEY_STAGE] = name
            self._emitter.begin(("stage", name), labels)
        except Exception as exc:
            _internal_error(exc)

    def _current_step(self) -> int:
        return self.optimizer_steps if self._hooked else self._blocks

    # -------------------------------------------------------- public
    @contextmanager
    def step(self, step: Optional[int] = None, epoch: Optional[int] = None, phase: str = PHASE_TRAIN,
             labels: Optional[Mapping[str, Any]] = None) -> Iterator[None]:
        """A span over one training (or ``phase``) step."""
        key = ("step", threading.get_ident())
        steps_before = self.optimizer_steps
        try:
            self._hook_optimizers()
            span = dict(labels or {})
            span[KEY_PHASE] = phase
            span[KEY_STEP] = self._current_step() if step is None else step
            if epoch is not None:
                span[KEY_EPOCH] = epoch
            accumulation = getattr(self._accelerator, "gradient_accumulation_steps", 1) or 1
            if phase == PHASE_TRAIN and self._hooked and accumulation > 1:
                span[KEY_MICRO_STEP] = self._micro
            self._emitter.begin(key, span)
        except Exception as exc:
            _internal_error(exc)
        try:
            yield
        finally:
            self._emitter.end(key)
            if phase == PHASE_TRAIN:
                self._blocks += 1
                # The window closes with a real optimizer step.
                self._micro = 0 if self.optimizer_steps != steps_before else self._micro + 1

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """A ``stage`` span of your own, e.g. ``with ingero.stage("forward"):``."""
        self._stage_begin(name)
        try:
            yield
        finally:
            self._emitter.end(("stage", name))

    def detach(self) -> None:
        """Restore ``accelerator.backward`` and remove the optimizer hooks."""
        try:
            if self._orig_backward is not None:
                try:
                    del self._accelerator.backward  # the class method shows again
                except AttributeError:
                    self._accelerator.backward = self._orig_backward
                self._orig_backward = None
            for pre, post in self._hooked.values():
                pre.remove()
                post.remove()
            self._hooked.clear()
        except Exception as exc:
            _internal_error(exc)


def annotate_accelerator(
    accelerator: Any,
    run_id: Optional[str] = None,
    *,
    labels: Optional[Mapping[str, Any]] = None,
    writer: Any = None,
    socket_path: Optional[str] = None,
) -> AcceleratorAnnotator:
    """Hook ``accelerator`` and return the annotator (see module docstring)."""
    static = static_labels(labels, run_id=run_id)
    return AcceleratorAnnotator(accelerator, Emitter(writer, socket_path=socket_path, static_labels=static))


__all__ = ["AcceleratorAnnotator", "annotate_accelerator"]
