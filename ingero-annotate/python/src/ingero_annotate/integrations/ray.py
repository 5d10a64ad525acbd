"""Ray: ``annotate_task`` and ``task_annotation`` label task executions.

    @ray.remote
    @annotate_task                      # innermost, so it runs in the worker
    def preprocess(shard): ...

    @ray.remote
    class Trainer:
        @annotate_task(labels={"model": "resnet50"})
        def train_step(self, batch): ...

    def work():
        with task_annotation(phase="train"):   # inside any task or actor method
            ...

Each execution is one span with ``task_id`` (Ray's task id, hex),
``task_name``, ``run_id`` (the Ray job id, unless you pass ``run_id``),
``actor_id`` for actor methods, and your labels. It is scoped to the worker
process running it (pid read at emit time, so the same decorated function
is right in every worker). Outside a Ray worker or driver with Ray
initialised, and without Ray installed, it does nothing and costs one check.
Async functions (async actors) are supported.
"""

from __future__ import annotations

import functools
import inspect
import sys
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, TypeVar, Union

from ._common import KEY_ACTOR_ID, KEY_RUN_ID, KEY_TASK_ID, KEY_TASK_NAME, Emitter, _internal_error

F = TypeVar("F", bound=Callable[..., Any])

_default: Optional[Emitter] = None


def _emitter() -> Emitter:
    # Module-level and created lazily: each worker process makes its own.
    global _default
    if _default is None:
        _default = Emitter()
    return _default


def _ray_labels() -> Optional[Dict[str, Any]]:
    """Ray's ids for the running task, or None when not inside Ray."""
    ray = sys.modules.get("ray")
    # Not imported means no task can be running: skip even the import.
    if ray is None or not getattr(ray, "is_initialized", lambda: False)():
        return None
    ctx = ray.get_runtime_context()
    labels: Dict[str, Any] = {}
    for key, getter in ((KEY_TASK_ID, "get_task_id"), (KEY_TASK_NAME, "get_task_name"),
                        (KEY_RUN_ID, "get_job_id"), (KEY_ACTOR_ID, "get_actor_id")):
        fn = getattr(ctx, getter, None)
        if fn is None:
            continue
        try:
            value = fn()
        except Exception:  # e.g. get_task_id in a driver on some versions
            value = None
        if value is not None:
            labels[key] = value
    return labels


@contextmanager
def task_annotation(labels: Optional[Mapping[str, Any]] = None, *, emitter: Optional[Emitter] = None,
                    **more: Any) -> Iterator[None]:
    """A span over the block, labelled with the running Ray task's ids."""
    span: Optional[Dict[str, Any]] = None
    try:
        ids = _ray_labels()
        if ids is not None:
            span = ids
            span.update(labels or {})
            span.update(more)
    except Exception as exc:
        _internal_error(exc)
    if span is None:
        yield
        return
    with (emitter or _emitter()).span(span):
        yield


def annotate_task(func: Optional[F] = None, *, labels: Optional[Mapping[str, Any]] = None,
                  emitter: Optional[Emitter] = None) -> Union[F, Callable[[F], F]]:
    """Decorate a task function or actor method (use below ``@ray.remote``)."""
    extra = dict(labels or {})

    def decorate(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with task_annotation(extra, emitter=emitter):
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with task_annotation(extra, emitter=emitter):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    if func is not None:
        return decorate(func)
    return decorate


__all__ = ["annotate_task", "task_annotation"]
