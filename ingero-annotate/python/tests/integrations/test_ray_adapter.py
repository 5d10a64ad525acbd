"""annotate_task / task_annotation against a fake of Ray 2.60's runtime context.

The fake mirrors ray==2.60.0: ``ray.is_initialized()`` and
``ray.get_runtime_context()`` with ``get_task_id()`` / ``get_task_name()`` /
``get_job_id()`` / ``get_actor_id()`` returning hex strings (None where not
applicable, e.g. ``get_actor_id`` in a plain task).
"""

from __future__ import annotations

import asyncio
import pickle
import sys

import pytest

from ingero_annotate.integrations import ray as ray_adapter
from ingero_annotate.integrations._common import Emitter

from .conftest import install_fake_module, labels_of, spans


class FakeContext:
    def __init__(self, task_id, name, actor_id=None):
        self._task_id, self._name, self._actor_id = task_id, name, actor_id

    def get_task_id(self):
        return self._task_id

    def get_task_name(self):
        return self._name

    def get_job_id(self):
        return "01000000"

    def get_actor_id(self):
        return self._actor_id


@pytest.fixture
def fake_ray(monkeypatch):
    ctx = {"now": FakeContext("c8ef45ccd0112571ffffffff01000000", "work")}
    install_fake_module(monkeypatch, "ray", is_initialized=lambda: True,
                        get_runtime_context=lambda: ctx["now"])
    return ctx


def test_decorator_labels_task(fake_ray, server, writer):
    em = Emitter(writer)

    @ray_adapter.annotate_task(labels={"phase": "predict"}, emitter=em)
    def work(x):
        return x + 1

    assert work(1) == 2
    assert work.__name__ == "work"
    got = labels_of(spans(server, 1))
    assert got == [{"task_id": "c8ef45ccd0112571ffffffff01000000", "task_name": "work", "run_id": "01000000",
                    "phase": "predict"}]


def test_bare_decorator_and_actor_method(fake_ray, server, writer, monkeypatch):
    monkeypatch.setattr(ray_adapter, "_default", Emitter(writer))
    fake_ray["now"] = FakeContext("aa", "Actor.step", actor_id="bb")

    class Actor:
        @ray_adapter.annotate_task
        def step(self):
            return "ok"

    assert Actor().step() == "ok"
    assert labels_of(spans(server, 1))[0]["actor_id"] == "bb"


def test_async_and_context_manager(fake_ray, server, writer):
    em = Emitter(writer)

    @ray_adapter.annotate_task(emitter=em)
    async def job():
        with ray_adapter.task_annotation(emitter=em, step=3):
            return 5

    assert asyncio.run(job()) == 5
    got = labels_of(spans(server, 2))
    assert got[0]["step"] == "3" and "step" not in got[1]


def test_exception_propagates(fake_ray, server, writer):
    @ray_adapter.annotate_task(emitter=Emitter(writer))
    def bad():
        raise ValueError("task failed")

    with pytest.raises(ValueError):
        bad()
    assert len(spans(server, 1)) == 1


def test_outside_ray_is_noop(monkeypatch, server, writer):
    monkeypatch.delitem(sys.modules, "ray", raising=False)

    @ray_adapter.annotate_task(emitter=Emitter(writer))
    def f():
        return 1

    assert f() == 1
    assert writer.sent == 0


def test_decorated_function_pickles(fake_ray, writer):
    # Ray ships decorated functions to workers; cloudpickle does what
    # pickle does for the closure's emitter.
    em = Emitter(writer, static_labels={"model": "m"})
    clone = pickle.loads(pickle.dumps(em))
    assert clone._writer is None and clone._static == {"model": "m"}
