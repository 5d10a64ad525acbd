"""Annotate live Ingero GPU traces with your application's semantics.

A drop-in replacement for ``ingero-annotate`` 0.1.1 with a non-blocking,
reconnecting, fork- and thread-safe writer and spans::

    from ingero_annotate import AnnotationWriter
    w = AnnotationWriter()
    w.write({"step": "42"}, pid=os.getpid())
    with w.span({"request_id": "abc-123"}):
        ...

Importing it also turns on NVTX capture when an agent listens for it (see
``_nvtx``; opt out with ``INGERO_NVTX=0``).
"""

from ._charclass import CC_ZL_ZP_RANGES, CF_RANGES, is_forbidden_char
from ._contract import (
    _KEY_CHARS,
    ANNOTATION_HOME_SOCKET_DIR,
    ANNOTATION_PROTOCOL_VERSION,
    ANNOTATION_SOCKET_DIR,
    ANNOTATION_SOCKET_ENV,
    ANNOTATION_SOCKET_NAME,
    KEY_EPOCH,
    KEY_MODEL,
    KEY_PHASE,
    KEY_REQUEST_ID,
    KEY_RUN_ID,
    KEY_STEP,
    KEY_TASK_ID,
    MAX_CLOCK_SKEW_NS,
    MAX_LABEL_KEY_LEN,
    MAX_LABEL_VALUE_LEN,
    MAX_LABELS_PER_ANNOTATION,
    MAX_LINE_BYTES,
    PID_MAX,
    WELL_KNOWN_KEYS,
    AnnotationError,
    encode_annotation,
    is_valid_label_key,
    validate_labels,
)
from ._nvtx import (
    NVTX_INJECTION_ENV,
    NVTX_LIBRARY_ENV,
    NVTX_LIBRARY_NAME,
    NVTX_OPT_OUT_ENV,
    NVTX_SOCKET_ENV,
    NVTX_SOCKET_NAME,
    enable_nvtx_capture,
    nvtx_socket_path,
)
from ._paths import _is_socket, default_socket_path
from ._span import Span
from ._writer import AnnotationWriter, logger, now_ns

__version__ = "0.2.0"

# Before any NVTX call of the program's libraries: NVTX reads the variable at a linkage unit's
# first call, so what is imported earlier but has not called NVTX yet is covered too.
enable_nvtx_capture()

__all__ = [
    "ANNOTATION_HOME_SOCKET_DIR",
    "ANNOTATION_PROTOCOL_VERSION",
    "ANNOTATION_SOCKET_DIR",
    "ANNOTATION_SOCKET_ENV",
    "ANNOTATION_SOCKET_NAME",
    "CC_ZL_ZP_RANGES",
    "CF_RANGES",
    "KEY_EPOCH",
    "KEY_MODEL",
    "KEY_PHASE",
    "KEY_REQUEST_ID",
    "KEY_RUN_ID",
    "KEY_STEP",
    "KEY_TASK_ID",
    "MAX_CLOCK_SKEW_NS",
    "MAX_LABEL_KEY_LEN",
    "MAX_LABEL_VALUE_LEN",
    "MAX_LABELS_PER_ANNOTATION",
    "MAX_LINE_BYTES",
    "NVTX_INJECTION_ENV",
    "NVTX_LIBRARY_ENV",
    "NVTX_LIBRARY_NAME",
    "NVTX_OPT_OUT_ENV",
    "NVTX_SOCKET_ENV",
    "NVTX_SOCKET_NAME",
    "PID_MAX",
    "WELL_KNOWN_KEYS",
    "AnnotationError",
    "AnnotationWriter",
    "Span",
    "default_socket_path",
    "enable_nvtx_capture",
    "encode_annotation",
    "is_forbidden_char",
    "is_valid_label_key",
    "logger",
    "now_ns",
    "nvtx_socket_path",
    "validate_labels",
]
