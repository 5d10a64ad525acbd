"""Turning NVTX capture on from inside the program: ``import ingero_annotate``
points ``NVTX_INJECTION64_PATH`` at the agent's injection library.

NVTX reads that variable lazily, at each linkage unit's first NVTX call, not
when a library loads; so setting it at import time works for every NVTX call
made afterwards (torch's ranges included), though not in a library that has
already made one.

It is set only when all of these hold:

* it is unset or empty: another tool (Nsight Systems, CUPTI) owns the slot
  otherwise, and only one tool per process can;
* ``$INGERO_NVTX`` is not ``0`` (the opt-out);
* an agent is listening: the NVTX socket exists (``$INGERO_NVTX_SOCKET``,
  else ``/run/ingero/nvtx.sock``, else ``~/.ingero/annotate/nvtx.sock``);
* the library exists: ``$INGERO_NVTX_LIBRARY``, else the copy the agent
  publishes beside the socket.

The same rules as the Rust ``socket_path`` module; the names are checked
against it by ``tests/test_rust_contract.py``.
"""

from __future__ import annotations

import os
from typing import MutableMapping, Optional

from ._contract import ANNOTATION_HOME_SOCKET_DIR, ANNOTATION_SOCKET_DIR
from ._paths import _is_socket

NVTX_SOCKET_ENV = "INGERO_NVTX_SOCKET"
NVTX_SOCKET_NAME = "nvtx.sock"
NVTX_LIBRARY_ENV = "INGERO_NVTX_LIBRARY"
NVTX_LIBRARY_NAME = "libingero_nvtx.so"
NVTX_INJECTION_ENV = "NVTX_INJECTION64_PATH"
NVTX_OPT_OUT_ENV = "INGERO_NVTX"


def nvtx_socket_path(environ: Optional[MutableMapping[str, str]] = None) -> str:
    """Return the NVTX socket a client connects to (the annotation socket's
    rules with ``$INGERO_NVTX_SOCKET``)."""
    env = os.environ if environ is None else environ
    explicit = env.get(NVTX_SOCKET_ENV)
    if explicit:
        return explicit
    run_path = os.path.join(ANNOTATION_SOCKET_DIR, NVTX_SOCKET_NAME)
    if _is_socket(run_path):
        return run_path
    home_path = os.path.join(os.path.expanduser("~"), ANNOTATION_HOME_SOCKET_DIR, NVTX_SOCKET_NAME)
    if _is_socket(home_path):
        return home_path
    if os.access("/run", os.W_OK | os.X_OK):
        return run_path
    return home_path


def nvtx_library_path(socket_path: str, environ: Optional[MutableMapping[str, str]] = None) -> str:
    """Return the injection library to load: ``$INGERO_NVTX_LIBRARY``, else
    the one published beside ``socket_path``."""
    env = os.environ if environ is None else environ
    explicit = env.get(NVTX_LIBRARY_ENV)
    if explicit:
        return explicit
    return os.path.join(os.path.dirname(socket_path), NVTX_LIBRARY_NAME)


def enable_nvtx_capture(environ: Optional[MutableMapping[str, str]] = None) -> Optional[str]:
    """Set ``NVTX_INJECTION64_PATH`` in ``environ`` (default: this process's
    environment, which its children inherit) when the rules above allow.

    Returns the library path it set, or None when it left the environment
    alone. Never raises: capture is a bonus, never a reason for an import to
    fail.
    """
    env = os.environ if environ is None else environ
    try:
        if env.get(NVTX_INJECTION_ENV):
            return None
        if env.get(NVTX_OPT_OUT_ENV, "").strip() == "0":
            return None
        socket_path = nvtx_socket_path(env)
        if not _is_socket(socket_path):
            return None
        library = os.path.abspath(nvtx_library_path(socket_path, env))
        if not os.path.isfile(library):
            return None
        env[NVTX_INJECTION_ENV] = library
        return library
    except (OSError, ValueError):
        return None
