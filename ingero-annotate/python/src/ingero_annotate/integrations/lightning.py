"""PyTorch Lightning: ``IngeroCallback`` labels batches and epochs.

    from ingero_annotate.integrations.lightning import IngeroCallback
    trainer = L.Trainer(callbacks=[IngeroCallback(run_id="exp-7")])

Spans (all scoped to the process running the loop, pid read at emit time):

- one per batch of every loop: ``phase`` (train/val/test/predict), ``step``
  (``trainer.global_step`` when the batch starts: Lightning's own logging
  step), ``epoch``, ``batch_idx`` (and ``dataloader_idx`` when not 0);
- one per epoch of every loop: ``phase``, ``epoch``;
- with ``stages=True`` (default), inside a training batch: ``stage=forward``
  (batch start to ``on_before_backward``), ``stage=backward`` (exact, the
  backward hooks) and ``stage=optimizer_step`` (``on_before_optimizer_step``
  to batch end: Lightning has no after-optimizer-step callback hook).

Works with both ``lightning.pytorch`` and ``pytorch_lightning``: the class
derives from the ``Callback`` of every flavour installed, so either
Trainer accepts it. Without Lightning it is a plain object that does nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Mapping, Optional, Tuple

from ._common import (
    static_labels,
    KEY_BATCH_IDX,
    KEY_EPOCH,
    KEY_PHASE,
    KEY_RANK,
    KEY_STAGE,
    KEY_STEP,
    PHASE_PREDICT,
    PHASE_TEST,
    PHASE_TRAIN,
    PHASE_VAL,
    STAGE_BACKWARD,
    STAGE_FORWARD,
    STAGE_OPTIMIZER_STEP,
    Emitter,
    _internal_error,
)

_FLAVOURS = ("lightning.pytorch", "pytorch_lightning")


def _callback_bases() -> Tuple[type, ...]:
    """The ``Callback`` class of each Lightning flavour that imports."""
    bases = []
    for name in _FLAVOURS:
        try:
            # find_spec first: a missing flavour costs no import attempt.
            if importlib.util.find_spec(name.split(".")[0]) is None:
                continue
            mod = importlib.import_module(name)
            base = getattr(mod, "Callback", None)
        except Exception:  # a broken install must not break the user's import
            continue
        if isinstance(base, type) and base not in bases:
            bases.append(base)
    return tuple(bases) or (object,)


class _IngeroCallbackImpl:
    """The hooks; mixed into the Lightning ``Callback`` base(s) below."""

    def __init__(
        self,
        run_id: Optional[str] = None,
        *,
        stages: bool = True,
        labels: Optional[Mapping[str, Any]] = None,
        writer: Any = None,
        socket_path: Optional[str] = None,
    ) -> None:
        static = static_labels(labels, run_id=run_id)
        self._emitter = Emitter(writer, socket_path=socket_path, static_labels=static)
        self._stages = stages

    # ---------------------------------------------------------- helpers
    def _base(self, trainer: Any, phase: str) -> dict:
        labels = {KEY_PHASE: phase, KEY_STEP: getattr(trainer, "global_step", None),
                  KEY_EPOCH: getattr(trainer, "current_epoch", None)}
        if (getattr(trainer, "world_size", 1) or 1) > 1:
            labels[KEY_RANK] = getattr(trainer, "global_rank", None)
        if getattr(trainer, "sanity_checking", False):
            labels["sanity_check"] = "true"
        return labels

    def _batch_start(self, trainer: Any, phase: str, batch_idx: int, dataloader_idx: int = 0) -> None:
        try:
            labels = self._base(trainer, phase)
            labels[KEY_BATCH_IDX] = batch_idx
            if dataloader_idx:
                labels["dataloader_idx"] = dataloader_idx
            self._emitter.begin(("batch", phase), labels)
            if phase == PHASE_TRAIN and self._stages:
                stage = dict(labels)
                stage[KEY_STAGE] = STAGE_FORWARD
                self._emitter.begin(("stage", STAGE_FORWARD), stage)
        except Exception as exc:
            _internal_error(exc)

    def _batch_end(self, phase: str) -> None:
        if phase == PHASE_TRAIN:
            # A batch without backward (manual optimisation, skipped step)
            # ends its forward here; the optimizer step ends with the batch.
            self._emitter.end(("stage", STAGE_FORWARD))
            self._emitter.end(("stage", STAGE_OPTIMIZER_STEP))
        self._emitter.end(("batch", phase))

    def _stage(self, name: str) -> None:
        """Start stage ``name`` of the current training batch."""
        if not self._stages:
            return
        try:
            self._emitter.end(("stage", STAGE_FORWARD))
            # Reuse the batch's labels so the stage carries step/epoch/batch_idx.
            labels = self._emitter.open_labels(("batch", PHASE_TRAIN))
            if labels is None:
                return
            labels[KEY_STAGE] = name
            self._emitter.begin(("stage", name), labels)
        except Exception as exc:
            _internal_error(exc)

    def _epoch_start(self, trainer: Any, phase: str) -> None:
        labels = {KEY_PHASE: phase, KEY_EPOCH: getattr(trainer, "current_epoch", None)}
        if getattr(trainer, "sanity_checking", False):
            labels["sanity_check"] = "true"
        self._emitter.begin(("epoch", phase), labels)

    # ---------------------------------------------------------- train
    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._epoch_start(trainer, PHASE_TRAIN)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._emitter.end(("epoch", PHASE_TRAIN))

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._batch_start(trainer, PHASE_TRAIN, batch_idx)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._batch_end(PHASE_TRAIN)

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        self._stage(STAGE_BACKWARD)

    def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
        self._emitter.end(("stage", STAGE_BACKWARD))

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self._stage(STAGE_OPTIMIZER_STEP)

    # ---------------------------------------------------------- validation
    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._epoch_start(trainer, PHASE_VAL)

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._emitter.end(("epoch", PHASE_VAL))

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        self._batch_start(trainer, PHASE_VAL, batch_idx, dataloader_idx)

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        self._batch_end(PHASE_VAL)

    # ---------------------------------------------------------- test
    def on_test_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._epoch_start(trainer, PHASE_TEST)

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._emitter.end(("epoch", PHASE_TEST))

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self._batch_start(trainer, PHASE_TEST, batch_idx, dataloader_idx)

    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                          dataloader_idx: int = 0) -> None:
        self._batch_end(PHASE_TEST)

    # ---------------------------------------------------------- predict
    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._epoch_start(trainer, PHASE_PREDICT)

    def on_predict_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._emitter.end(("epoch", PHASE_PREDICT))

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self._batch_start(trainer, PHASE_PREDICT, batch_idx, dataloader_idx)

    def on_predict_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                             dataloader_idx: int = 0) -> None:
        self._batch_end(PHASE_PREDICT)

    # ---------------------------------------------------------- failure
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # The end hooks will not run: close what is open so the failing
        # step is still bounded on the trace.
        self._emitter.end_all()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._emitter.end_all()


def _make_class() -> type:
    bases = _callback_bases()
    # The implementation comes first in the MRO so its hooks override the
    # no-op hooks of the Lightning base(s).
    return type("IngeroCallback", (_IngeroCallbackImpl,) + tuple(b for b in bases if b is not object), {
        "__doc__": "Lightning callback labelling batches, epochs and training stages on the Ingero trace.\n\n"
        "``IngeroCallback(run_id=None, *, stages=True, labels=None, writer=None, socket_path=None)``",
        "__module__": __name__,
    })


IngeroCallback = _make_class()

__all__ = ["IngeroCallback"]
