"""IngeroCallback against a fake of Lightning 2.6's callback surface.

The fake mirrors lightning==2.6.6 / pytorch_lightning==2.6.6: a ``Callback``
base with no-op hooks, and a trainer that calls them in the order the real
automatic-optimisation loop does (batch start, training_step inside the
optimizer closure, on_before_backward, on_after_backward,
on_before_optimizer_step, optimizer step, batch end).
"""

from __future__ import annotations

import importlib
import sys

import pytest

from .conftest import install_fake_module, labels_of, spans


MODULE = "ingero_annotate.integrations.lightning"


class FakeCallback:
    """lightning.pytorch.Callback (2.6): every hook a no-op."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx): ...


class FakePLCallback:
    """pytorch_lightning.Callback (2.6), a distinct class."""


class FakeTrainer:
    def __init__(self, callbacks, accumulate=1):
        self.callbacks = callbacks
        self.global_step = 0
        self.current_epoch = 0
        self.sanity_checking = False
        self.world_size = 1
        self.global_rank = 0
        self.accumulate = accumulate

    def _call(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, None, *args)

    def fit(self, batches, val_batches=1):
        self._call("on_train_epoch_start")
        for idx in range(batches):
            self._call("on_train_batch_start", "batch", idx)
            self._call("on_before_backward", "loss")
            self._call("on_after_backward")
            if (idx + 1) % self.accumulate == 0:
                self._call("on_before_optimizer_step", "opt")
                self.global_step += 1
            self._call("on_train_batch_end", "out", "batch", idx)
        self._call("on_validation_epoch_start")
        for idx in range(val_batches):
            self._call("on_validation_batch_start", "batch", idx, 0)
            self._call("on_validation_batch_end", "out", "batch", idx, 0)
        self._call("on_validation_epoch_end")
        self._call("on_train_epoch_end")


@pytest.fixture
def lightning_adapter(monkeypatch):
    install_fake_module(monkeypatch, "lightning.pytorch", Callback=FakeCallback)
    install_fake_module(monkeypatch, "pytorch_lightning", Callback=FakePLCallback)
    # A fresh import resolves the fakes; monkeypatch puts back whatever
    # module object was there before (without importing real Lightning).
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield importlib.import_module(MODULE)


def test_accepted_by_both_flavours(lightning_adapter):
    cb = lightning_adapter.IngeroCallback()
    assert isinstance(cb, FakeCallback) and isinstance(cb, FakePLCallback)


def test_batches_epochs_and_stages(lightning_adapter, server, writer):
    cb = lightning_adapter.IngeroCallback(run_id="r1", writer=writer)
    FakeTrainer([cb]).fit(2)
    got = labels_of(spans(server, 11))
    train = [l for l in got if l.get("phase") == "train" and "batch_idx" in l and "stage" not in l]
    assert [(l["step"], l["batch_idx"], l["epoch"]) for l in train] == [("0", "0", "0"), ("1", "1", "0")]
    assert all(l["run_id"] == "r1" for l in got)
    stages = [(l["step"], l["stage"]) for l in got if "stage" in l]
    assert stages == [("0", "forward"), ("0", "backward"), ("0", "optimizer_step"),
                      ("1", "forward"), ("1", "backward"), ("1", "optimizer_step")]
    val = [l for l in got if l.get("phase") == "val"]
    assert {"phase": "val", "step": "2", "epoch": "0", "batch_idx": "0", "run_id": "r1"} in val
    assert {"phase": "val", "epoch": "0", "run_id": "r1"} in val
    assert got[-1] == {"phase": "train", "epoch": "0", "run_id": "r1"}


def test_accumulation_has_no_optimizer_span_on_micro_batches(lightning_adapter, server, writer):
    cb = lightning_adapter.IngeroCallback(writer=writer, stages=True)
    FakeTrainer([cb], accumulate=2).fit(2, val_batches=0)
    got = labels_of(spans(server, 7))
    assert [l["step"] for l in got if l.get("stage") == "optimizer_step"] == ["0"]


def test_exception_closes_open_spans(lightning_adapter, server, writer):
    cb = lightning_adapter.IngeroCallback(writer=writer, stages=False)
    t = FakeTrainer([cb])
    cb.on_train_epoch_start(t, None)
    cb.on_train_batch_start(t, None, "b", 0)
    cb.on_exception(t, None, RuntimeError("oom"))
    got = labels_of(spans(server, 2))
    assert {"phase": "train", "step": "0", "epoch": "0", "batch_idx": "0"} in got


def test_test_and_predict_phases(lightning_adapter, server, writer):
    cb = lightning_adapter.IngeroCallback(writer=writer)
    t = FakeTrainer([cb])
    t.sanity_checking = True
    cb.on_validation_batch_start(t, None, "b", 0, 1)
    cb.on_validation_batch_end(t, None, "o", "b", 0, 1)
    t.sanity_checking = False
    cb.on_test_batch_start(t, None, "b", 3)
    cb.on_test_batch_end(t, None, "o", "b", 3)
    cb.on_predict_batch_start(t, None, "b", 4)
    cb.on_predict_batch_end(t, None, "o", "b", 4)
    got = labels_of(spans(server, 3))
    assert got[0]["sanity_check"] == "true" and got[0]["dataloader_idx"] == "1"
    assert [l["phase"] for l in got] == ["val", "test", "predict"]


def test_without_lightning_is_a_plain_noop(monkeypatch, sock_dir):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    cb = importlib.import_module(MODULE).IngeroCallback(socket_path=sock_dir + "/absent.sock")
    assert len(type(cb).__mro__) == 3  # IngeroCallback, the hooks, object
    cb.on_train_batch_start(None, None, None, 0)  # no trainer attributes: still silent
