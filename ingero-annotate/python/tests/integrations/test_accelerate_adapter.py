"""annotate_accelerator against a fake of accelerate 1.15's Accelerator.

The fake mirrors accelerate==1.15.0: ``Accelerator.backward(loss)``, the
prepared optimizers in ``Accelerator._optimizers`` (``AcceleratedOptimizer``
wrapping a torch optimizer in ``.optimizer``), ``gradient_accumulation_steps``,
and ``AcceleratedOptimizer.step`` calling the torch step only when gradients
sync; the torch optimizer mirrors torch 2.x's ``register_step_pre_hook`` /
``register_step_post_hook`` (hooks run only on a real step).
"""

from __future__ import annotations

from ingero_annotate.integrations.accelerate import annotate_accelerator

from .conftest import labels_of, spans


class Handle:
    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self):
        self.hooks.remove(self.fn)


class FakeTorchOptimizer:
    def __init__(self):
        self.pre, self.post = [], []

    def register_step_pre_hook(self, fn):
        self.pre.append(fn)
        return Handle(self.pre, fn)

    def register_step_post_hook(self, fn):
        self.post.append(fn)
        return Handle(self.post, fn)

    def step(self):
        for fn in self.pre:
            fn(self, (), {})
        for fn in self.post:
            fn(self, (), {})


class FakeAcceleratedOptimizer:
    def __init__(self, accelerator):
        self.optimizer = FakeTorchOptimizer()
        self.accelerator = accelerator

    def step(self):
        if self.accelerator.sync_gradients:
            self.optimizer.step()


class FakeAccelerator:
    def __init__(self, accumulation=1):
        self.gradient_accumulation_steps = accumulation
        self._optimizers = []
        self.sync_gradients = True
        self.backward_calls = 0

    def prepare(self, optimizer):
        opt = FakeAcceleratedOptimizer(self)
        self._optimizers.append(opt)
        return opt

    def backward(self, loss):
        self.backward_calls += 1


def test_step_backward_and_optimizer_spans(server, writer):
    acc = FakeAccelerator()
    ingero = annotate_accelerator(acc, run_id="r", writer=writer)
    opt = acc.prepare(None)  # prepared after hooking: found at step()
    for _ in range(2):
        with ingero.step(epoch=0):
            with ingero.stage("forward"):
                pass
            acc.backward("loss")
            opt.step()
    got = labels_of(spans(server, 8))
    assert acc.backward_calls == 2 and ingero.optimizer_steps == 2
    assert [(l["step"], l.get("stage")) for l in got] == [
        ("0", "forward"), ("0", "backward"), ("0", "optimizer_step"), ("0", None),
        ("1", "forward"), ("1", "backward"), ("1", "optimizer_step"), ("1", None)]
    assert all(l["phase"] == "train" and l["run_id"] == "r" for l in got)


def test_accumulation_micro_steps(server, writer):
    acc = FakeAccelerator(accumulation=2)
    opt = acc.prepare(None)
    ingero = annotate_accelerator(acc, writer=writer)
    for i in range(4):
        acc.sync_gradients = i % 2 == 1
        with ingero.step():
            acc.backward("loss")
            opt.step()
    got = labels_of(spans(server, 10))
    blocks = [(l["step"], l["micro_step"]) for l in got if "stage" not in l]
    assert blocks == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
    assert [l["step"] for l in got if l.get("stage") == "optimizer_step"] == ["0", "1"]


def test_detach_restores(server, writer):
    acc = FakeAccelerator()
    opt = acc.prepare(None)
    ingero = annotate_accelerator(acc, writer=writer)
    ingero.detach()
    assert acc.backward.__func__ is FakeAccelerator.backward
    assert not opt.optimizer.pre and not opt.optimizer.post


def test_user_exception_propagates_and_span_is_sent(server, writer):
    acc = FakeAccelerator()
    ingero = annotate_accelerator(acc, writer=writer)
    try:
        with ingero.step(step=41, phase="val"):
            raise ValueError("user")
    except ValueError:
        pass
    assert labels_of(spans(server, 1)) == [{"phase": "val", "step": "41"}]


def test_object_without_hooks_is_harmless(server, writer):
    ingero = annotate_accelerator(object(), writer=writer)
    with ingero.step():
        pass
    assert labels_of(spans(server, 1)) == [{"phase": "train", "step": "0"}]
