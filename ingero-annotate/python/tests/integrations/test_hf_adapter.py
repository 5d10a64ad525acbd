"""IngeroTrainerCallback against a fake of transformers 5.24's Trainer loop.

The fake mirrors transformers==5.24.0 ``Trainer._inner_training_loop``: per
optimizer step, ``on_step_begin`` once, ``on_substep_end`` after each
non-final micro-batch, ``on_pre_optimizer_step``/``on_optimizer_step``
around ``optimizer.step()``, ``global_step += 1``, ``on_step_end``; and the
evaluation loop's ``on_prediction_step`` per batch then ``on_evaluate`` /
``on_predict`` with the metrics.
"""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from .conftest import install_fake_module, labels_of, spans

MODULE = "ingero_annotate.integrations.hf"


class FakeTrainerCallback:
    """transformers.TrainerCallback (5.24): every event a no-op returning None."""


@pytest.fixture(autouse=True)
def hf(monkeypatch):
    # The fake keeps these tests fast and independent of an installed
    # transformers; monkeypatch restores the real module objects afterwards.
    install_fake_module(monkeypatch, "transformers", TrainerCallback=FakeTrainerCallback)
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    global IngeroTrainerCallback
    IngeroTrainerCallback = importlib.import_module(MODULE).IngeroTrainerCallback
    yield


def _loop(cb, steps, accumulation=1, eval_batches=0):
    args = types.SimpleNamespace(gradient_accumulation_steps=accumulation)
    state = types.SimpleNamespace(global_step=0, epoch=0.0)
    cb.on_train_begin(args, state, None)
    cb.on_epoch_begin(args, state, None)
    for _ in range(steps):
        cb.on_step_begin(args, state, None)
        for micro in range(accumulation):
            if micro < accumulation - 1:
                cb.on_substep_end(args, state, None)
        cb.on_pre_optimizer_step(args, state, None)
        cb.on_optimizer_step(args, state, None)
        state.global_step += 1
        state.epoch = state.global_step / steps
        cb.on_step_end(args, state, None)
    if eval_batches:
        for _ in range(eval_batches):
            cb.on_prediction_step(args, state, None)
        cb.on_evaluate(args, state, None, metrics={"eval_loss": 0.5})
    cb.on_epoch_end(args, state, None)
    cb.on_train_end(args, state, None)
    return args, state


def test_optimizer_steps(server, writer):
    cb = IngeroTrainerCallback(run_id="r", writer=writer)
    _loop(cb, 2)
    got = labels_of(spans(server, 5))
    steps = [l for l in got if "step" in l and "stage" not in l]
    assert [(l["phase"], l["step"], l["epoch"]) for l in steps] == [("train", "1", "0"), ("train", "2", "0")]
    assert [l["step"] for l in got if l.get("stage") == "optimizer_step"] == ["1", "2"]
    assert got[-1] == {"phase": "train", "epoch": "0", "run_id": "r"}


def test_gradient_accumulation_micro_steps(server, writer):
    cb = IngeroTrainerCallback(writer=writer)
    _loop(cb, 1, accumulation=3)
    got = labels_of(spans(server, 6))
    assert [l["micro_step"] for l in got if "micro_step" in l] == ["0", "1", "2"]


def test_evaluation_inside_training(server, writer):
    cb = IngeroTrainerCallback(writer=writer)
    _loop(cb, 1, eval_batches=2)
    got = labels_of(spans(server, 6))
    val = [l for l in got if l.get("phase") == "val"]
    assert [l.get("batch_idx") for l in val] == ["0", "1", None]
    assert all(l["step"] == "1" for l in val)


def test_standalone_predict_and_test_prefix(server, writer):
    cb = IngeroTrainerCallback(writer=writer)
    args = types.SimpleNamespace(gradient_accumulation_steps=1)
    state = types.SimpleNamespace(global_step=7, epoch=1.0)
    for _ in range(3):
        cb.on_prediction_step(args, state, None)
    cb.on_predict(args, state, None, metrics={"test_loss": 1.0})
    for _ in range(2):
        cb.on_prediction_step(args, state, None)
    cb.on_evaluate(args, state, None, metrics={"test_loss": 1.0})
    got = labels_of(spans(server, 5))
    # Without a preceding training step the first batch has no start.
    assert [(l["phase"], l.get("batch_idx")) for l in got] == [
        ("predict", "1"), ("predict", "2"), ("predict", None), ("test", "1"), ("test", None)]


def test_base_class_is_transformers_callback():
    assert issubclass(IngeroTrainerCallback, FakeTrainerCallback)


def test_without_transformers_is_a_plain_object(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    cls = importlib.import_module(MODULE).IngeroTrainerCallback
    assert cls.__mro__[1:] == (object,)
