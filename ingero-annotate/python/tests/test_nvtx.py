"""``import ingero_annotate`` turns NVTX capture on: NVTX_INJECTION64_PATH is
set when the agent's NVTX socket and the injection library both exist, never
over a value already there, and not with INGERO_NVTX=0.

Each case imports the package in a fresh interpreter, as a program would; the
socket and library are faked in a temp dir."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Dict, Iterator, Optional

import pytest

from conftest import HERE

SRC = os.path.join(os.path.dirname(HERE), "src")
PROBE = "import os, ingero_annotate; print(os.environ.get('NVTX_INJECTION64_PATH', '<unset>'))"


@pytest.fixture
def agent(sock_dir: str) -> Iterator[Dict[str, str]]:
    """A listening NVTX socket and a library file, named by the variables."""
    path = os.path.join(sock_dir, "nvtx.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    library = os.path.join(sock_dir, "libingero_nvtx.so")
    with open(library, "wb") as f:
        f.write(b"\x7fELF")
    yield {"INGERO_NVTX_SOCKET": path, "INGERO_NVTX_LIBRARY": library}
    listener.close()


def imported_value(extra: Dict[str, str], drop: Optional[str] = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_", "INGERO_"))}
    env.update(extra)
    if drop:
        env.pop(drop, None)
    env["PYTHONPATH"] = SRC
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_set_when_the_socket_and_the_library_exist(agent):
    assert imported_value(agent) == agent["INGERO_NVTX_LIBRARY"]


def test_the_published_library_beside_the_socket_is_found(agent):
    published = os.path.join(os.path.dirname(agent["INGERO_NVTX_SOCKET"]), "libingero_nvtx.so")
    assert imported_value(agent, drop="INGERO_NVTX_LIBRARY") == published


def test_not_set_without_a_listening_agent(agent, sock_dir):
    os.unlink(agent["INGERO_NVTX_SOCKET"])
    assert imported_value(agent) == "<unset>"
    # A plain file where the socket should be is not an agent either.
    with open(agent["INGERO_NVTX_SOCKET"], "w"):
        pass
    assert imported_value(agent) == "<unset>"


def test_not_set_without_the_library(agent):
    os.unlink(agent["INGERO_NVTX_LIBRARY"])
    assert imported_value(agent) == "<unset>"


def test_never_overrides_a_value_already_set(agent):
    nsys = "/opt/nsight-systems/target-linux-x64/libToolsInjection64.so"
    assert imported_value({**agent, "NVTX_INJECTION64_PATH": nsys}) == nsys


def test_opt_out(agent):
    assert imported_value({**agent, "INGERO_NVTX": "0"}) == "<unset>"
    assert imported_value({**agent, "INGERO_NVTX": "1"}) == agent["INGERO_NVTX_LIBRARY"]


def test_in_process_call_reports_what_it_did(agent):
    import ingero_annotate as ia

    env: Dict[str, str] = dict(agent)
    assert ia.enable_nvtx_capture(env) == agent["INGERO_NVTX_LIBRARY"]
    assert env["NVTX_INJECTION64_PATH"] == agent["INGERO_NVTX_LIBRARY"]
    # Second call: already set, left alone.
    assert ia.enable_nvtx_capture(env) is None
    assert ia.nvtx_socket_path(env) == agent["INGERO_NVTX_SOCKET"]
