"""Fixtures for the adapter tests: a writer connected to the capturing
LineServer of tests/conftest.py, helpers to read what adapters sent, and
the `e2e` marker (real frameworks under the real agent)."""

from __future__ import annotations

import sys
import types
from typing import Dict, List

import pytest

from ingero_annotate import AnnotationWriter
from ingero_annotate.integrations import _common


def pytest_configure(config: pytest.Config) -> None:
    # Registered here (not only in pyproject.toml) because CI runs pytest
    # from the repository root, where that file is not the config.
    config.addinivalue_line(
        "markers", "e2e: real frameworks on CPU under the real ingero agent (select with -m e2e)")


@pytest.fixture(autouse=True)
def _fresh_warnings():
    _common._reset_warnings_for_tests()
    yield
    _common._reset_warnings_for_tests()


@pytest.fixture
def writer(server):
    w = AnnotationWriter(server.path)
    assert w.active
    yield w
    w.close()


def spans(server, n: int) -> List[Dict]:
    """Wait for ``n`` lines and return them (all must be spans)."""
    got = server.wait_for(n)
    for a in got:
        assert "span_start" in a and "span_end" in a, a
        assert a["span_end"] >= a["span_start"]
    return got


def labels_of(lines: List[Dict]) -> List[Dict[str, str]]:
    return [a["labels"] for a in lines]


def install_fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attrs) -> types.ModuleType:
    """Put a fake module (and its parents) into sys.modules for one test."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        mod_name = ".".join(parts[:i])
        mod = sys.modules.get(mod_name)
        if mod is None or not getattr(mod, "__ingero_fake__", False):
            mod = types.ModuleType(mod_name)
            mod.__ingero_fake__ = True  # type: ignore[attr-defined]
            # A spec, so importlib.util.find_spec() sees the fake as installed.
            import importlib.machinery
            mod.__spec__ = importlib.machinery.ModuleSpec(mod_name, None)
            monkeypatch.setitem(sys.modules, mod_name, mod)
            if i > 1:
                monkeypatch.setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], mod, raising=False)
    mod = sys.modules[name]
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod
