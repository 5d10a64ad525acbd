"""Spans: one annotation covering ``[start, end]``, sent when the span ends.

Works as a context manager and as a decorator (sync or async functions).
Start times are kept per thread (a stack), so one Span object can be
entered from several threads or recursively.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time

from ._contract import encode_annotation, validate_labels


class Span:
    """Created by ``AnnotationWriter.span(labels, pid=None)``."""

    def __init__(self, writer, labels, pid=None):
        validate_labels(labels)
        self._writer = writer
        self._labels = dict(labels)
        self._pid = pid
        self._local = threading.local()

    def __enter__(self) -> "Span":
        stack = getattr(self._local, "starts", None)
        if stack is None:
            stack = self._local.starts = []
        stack.append(time.time_ns())
        return self

    def __exit__(self, *exc) -> bool:
        start = self._local.starts.pop()
        end = max(time.time_ns(), start)
        line = encode_annotation(self._labels, pid=self._pid, span_start=start, span_end=end)
        self._writer._send(line)
        return False

    def __call__(self, func):
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args, **kwargs):
                with self:
                    return await func(*args, **kwargs)

            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
