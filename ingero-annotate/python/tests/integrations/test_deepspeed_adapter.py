"""annotate_engine against a fake of DeepSpeed 0.19's engine surface.

The fake mirrors deepspeed==0.19.8 ``DeepSpeedEngine``: calling the engine
runs ``forward``; ``backward(loss)``; ``step()`` advances ``micro_steps`` and,
at a gradient-accumulation boundary (``is_gradient_accumulation_boundary()``),
steps the optimizer and ``global_steps``; ``training`` from ``nn.Module``.
"""

from __future__ import annotations

from ingero_annotate.integrations.deepspeed import AnnotatedEngine, annotate_engine

from .conftest import labels_of, spans


class FakeEngine:
    def __init__(self, gas=1):
        self.gas = gas
        self.global_steps = 0
        self.micro_steps = 0
        self.training = True
        self.config = {"train_batch_size": 4}

    def is_gradient_accumulation_boundary(self):
        return (self.micro_steps + 1) % self.gas == 0

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):
        return x * 2

    def backward(self, loss):
        return None

    def step(self):
        if self.is_gradient_accumulation_boundary():
            self.global_steps += 1
        self.micro_steps += 1


def test_stage_spans_with_global_step(server, writer):
    eng = annotate_engine(FakeEngine(), run_id="r", writer=writer)
    for i in range(2):
        assert eng(3) == 6
        eng.backward("loss")
        eng.step()
    got = labels_of(spans(server, 6))
    assert [(l["stage"], l["step"]) for l in got] == [
        ("forward", "0"), ("backward", "0"), ("optimizer_step", "0"),
        ("forward", "1"), ("backward", "1"), ("optimizer_step", "1")]
    assert all(l["phase"] == "train" and l["run_id"] == "r" for l in got)


def test_accumulation_boundary_only(server, writer):
    eng = annotate_engine(FakeEngine(gas=2), writer=writer)
    for _ in range(4):
        eng.step()
    got = labels_of(spans(server, 2))
    assert [(l["step"], l["micro_step"]) for l in got] == [("0", "1"), ("1", "3")]


def test_transparent_proxy_and_eval_phase(server, writer):
    raw = FakeEngine()
    eng = annotate_engine(raw, writer=writer)
    assert isinstance(eng, AnnotatedEngine) and eng.engine is raw
    assert eng.config == {"train_batch_size": 4}
    eng.training = False  # forwarded to the engine
    assert raw.training is False
    eng.forward(1)
    eng.phase = "test"
    eng.forward(1)
    assert [l["phase"] for l in labels_of(spans(server, 2))] == ["val", "test"]


def test_engine_exception_propagates(server, writer):
    class Failing(FakeEngine):
        def backward(self, loss):
            raise RuntimeError("nan")

    eng = annotate_engine(Failing(), writer=writer)
    try:
        eng.backward("x")
    except RuntimeError:
        pass
    assert labels_of(spans(server, 1))[0]["stage"] == "backward"
