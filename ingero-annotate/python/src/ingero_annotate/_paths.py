"""Where the agent's annotation socket is.

The same rules as the agent and the Rust client:

1. ``$INGERO_ANNOTATE_SOCKET`` when set and non-empty.
2. ``/run/ingero/annotate.sock`` when a socket is there (an agent run with
   sudo), else ``~/.ingero/annotate/annotate.sock`` when a socket is there.
3. With neither, where an agent run by this user would bind:
   ``/run/ingero`` when /run is writable, else the home path.
"""

from __future__ import annotations

import os
import stat

from ._contract import (
    ANNOTATION_HOME_SOCKET_DIR,
    ANNOTATION_SOCKET_DIR,
    ANNOTATION_SOCKET_ENV,
    ANNOTATION_SOCKET_NAME,
)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _home_socket_path() -> str:
    return os.path.join(os.path.expanduser("~"), ANNOTATION_HOME_SOCKET_DIR, ANNOTATION_SOCKET_NAME)


def default_socket_path() -> str:
    """Return the annotation socket path to connect to (rules above).

    The existence checks only pick the likelier path; the real guard is the
    connect, which copes with the socket vanishing in between.
    """
    env = os.environ.get(ANNOTATION_SOCKET_ENV)
    if env:
        return env
    run_path = os.path.join(ANNOTATION_SOCKET_DIR, ANNOTATION_SOCKET_NAME)
    if _is_socket(run_path):
        return run_path
    home_path = _home_socket_path()
    if _is_socket(home_path):
        return home_path
    if os.access("/run", os.W_OK | os.X_OK):
        return run_path
    return home_path
