"""End to end, as root: a launch of a registered kernel, recorded, reads in Perfetto's schema as
a slice named by the kernel (as Nsight Systems shows it), with the op, the mangled name and the
name's source as arguments, and the recording stays well formed.

Needs INGERO_BIN and INGERO_CUDART (set by `cargo xtask test`) and the C program built by the
Rust kernel tests (target/test-fixtures/cuda_driver_api).
"""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from test_e2e_recording import BIN, CUDART, REPO, Agent
from trace_checks import (
    check_every_event_refers_to_a_defined_track,
    check_sequence_flags_and_clock_snapshots,
    check_slices_nest_on_every_track,
    check_timestamps_monotonic_on_the_main_sequence,
    load_packets,
    slices,
)

PROGRAM = REPO / "target/test-fixtures/cuda_driver_api"
KERNEL = "void demo::scale<4>(float*, float, int)"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loads eBPF programs: needs root")


def test_a_launch_slice_is_named_by_its_kernel():
    for path in (BIN, CUDART, PROGRAM):
        assert Path(path).exists(), f"{path} is missing: run `cargo xtask test` first"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kernels.pftrace"
        prog = subprocess.Popen(
            [str(PROGRAM), CUDART, "register"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        pid = prog.stdout.readline()
        agent = Agent("--cuda-lib", CUDART, "--pid", str(prog.pid), "--record", "-o", str(out))
        prog.stdin.write("go\n")
        prog.stdin.close()
        assert prog.wait(timeout=30) == 0, pid
        assert agent.stop() == 0
        packets = load_packets(out)
        check_sequence_flags_and_clock_snapshots(packets)
        check_every_event_refers_to_a_defined_track(packets)
        check_timestamps_monotonic_on_the_main_sequence(packets)
        check_slices_nest_on_every_track(packets)
        launches = [s for s in slices(packets) if s[1] == KERNEL]
        assert len(launches) == 2, [s[1] for s in slices(packets)]
        for _track, _name, cats, args, start, end in launches:
            assert args["op"] == "cudaLaunchKernel"
            assert args["kernel"] == KERNEL
            assert args["kernel_mangled"] == "_ZN4demo5scaleILi4EEEvPffi"
            assert args["kernel_source"] == "registration"
            assert "cuda" in ",".join(cats)
            assert start <= end
        by_kernel = subprocess.run(
            [BIN, "query", "--trace", str(out), "--group-by", "kernel", "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert KERNEL in by_kernel and '"launches":2' in by_kernel.replace(" ", ""), by_kernel
