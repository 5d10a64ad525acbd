"""An application using the PyPI `nvtx` package (0.2.16), which knows nothing of ingero.

Prints "key value" lines for the test. Before emitting it waits for the test's gate file
(events made before the library connects are discarded by design); `--no-gate` skips that, for
the run without NVTX_INJECTION64_PATH.
"""

import os
import sys
import threading
import time

import nvtx


def gate():
    d = os.environ.get("GATE_DIR")
    if not d or "--no-gate" in sys.argv:
        return
    path = os.path.join(d, "gate.%d.1" % os.getpid())
    for _ in range(20000):
        if os.path.exists(path):
            return
        time.sleep(0.001)
    sys.exit(3)


print("pid", os.getpid())
print("main_tid", threading.get_native_id())
nvtx.mark("warm-up")  # the first NVTX call: the tool loads
gate()
print("t1", time.monotonic_ns())
nvtx.push_range("py outer", color="red")
with nvtx.annotate("py annotated", color="blue", domain="py domain", payload=7):
    nvtx.mark("py mark", domain="py domain", payload=2.5)
nvtx.pop_range()
rng = nvtx.start_range("py range", payload=-4)
nvtx.end_range(rng)
print("t2", time.monotonic_ns())
print("done 1")
