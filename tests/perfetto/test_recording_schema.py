"""Validates a synthetic ingero recording against Perfetto's official schema (PyPI `perfetto`).

The trace is produced by the real Recorder through
`cargo run -p ingero-trace --example synth-trace -- OUT --events N`.
"""

import subprocess
import tempfile
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from trace_checks import (
    INSTANT,
    MAIN_SEQUENCE,
    SEQ_CLEARED,
    check_every_event_refers_to_a_defined_track,
    check_sequence_flags_and_clock_snapshots,
    check_slices_nest_on_every_track,
    check_timestamps_monotonic_on_the_main_sequence,
    events,
    expand,
    framed_packets,
    slices,
    track_names,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trace_path():
    out = Path(tempfile.mkdtemp()) / "synth.pftrace"
    subprocess.run(
        ["cargo", "run", "--quiet", "-p", "ingero-trace", "--example", "synth-trace", "--", str(out), "--events", "2000"],
        cwd=REPO,
        check=True,
    )
    return out


@pytest.fixture(scope="module")
def packets(trace_path):
    data = trace_path.read_bytes()
    trace = pb.Trace()
    trace.ParseFromString(data)  # the whole file parses with the official schema
    framed = [pb.TracePacket.FromString(p) for p in framed_packets(data)]
    assert len(framed) == len(trace.packet)
    return expand(trace.packet)


def test_packets_travel_in_zlib_bundles(trace_path):
    outer = pb.Trace.FromString(trace_path.read_bytes()).packet
    bundles = [p for p in outer if p.HasField("compressed_packets")]
    assert bundles, "the recorder compresses by default"
    inner = expand(outer)
    assert len(inner) > 2 * len(outer), "each bundle holds many packets"
    assert not any(p.HasField("compressed_packets") for p in inner), "bundles do not nest"
    plain = [p for p in outer if not p.HasField("compressed_packets")]
    assert plain and all(p.trusted_packet_sequence_id == 3 for p in plain), "outside bundles: the plain sequence only"
    bundled = [p for p in inner if p not in plain]
    assert {p.trusted_packet_sequence_id for p in bundled} <= {1, 2}, "bundles hold the main and late sequences"


def test_structure(packets):
    check_sequence_flags_and_clock_snapshots(packets)
    check_every_event_refers_to_a_defined_track(packets)
    check_timestamps_monotonic_on_the_main_sequence(packets)
    check_slices_nest_on_every_track(packets)


def test_failed_cuda_malloc_carries_size_and_return_code(packets):
    mallocs = [s for s in slices(packets) if s[1] == "cudaMalloc" and s[3].get("size") == 1048576]
    assert mallocs, "the 1 MiB cudaMalloc slice"
    _, _, cats, args, start, end = mallocs[0]
    assert args["ret"] == 35
    assert "cuda,error" in cats
    assert end - start == 50_000


def test_step_track_has_state_slices(packets):
    names = track_names(packets)
    step = [(s[1], s[4], s[5]) for s in slices(packets) if names.get(s[0]) == "step"]
    assert [n for n, *_ in step] == ["step=41", "step=42", "step=43"]
    for (_, _, end), (_, start, _) in zip(step, step[1:]):
        assert end == start, "each value lasts until the next"
    for s in slices(packets):
        if names.get(s[0]) == "step":
            assert s[3]["provenance.uid"] == 1000


def test_overlapping_spans_carry_request_id_on_separate_lanes(packets):
    names = track_names(packets)
    spans = [s for s in slices(packets) if "labels.request_id" in s[3]]
    assert sorted(s[3]["labels.request_id"] for s in spans) == ["req-a", "req-b"]
    a, b = sorted(spans, key=lambda s: s[4])
    assert b[4] < a[5], "they overlap"
    assert a[0] != b[0] and names[a[0]].startswith("spans") and names[b[0]].startswith("spans")
    assert all("provenance.uid" in s[3] for s in spans)


def test_off_cpu_and_lifecycle(packets):
    names = track_names(packets)
    off = [s for s in slices(packets) if names.get(s[0]) == "off-CPU"]
    assert {s[1] for s in off} == {"preempted", "blocked"}
    assert any(s[3].get("next_comm") == "kworker/0:1" for s in off)
    instants = {name for p, _, _, name, *_ in events(packets) if p.track_event.type == INSTANT}
    assert {"exec", "thread_start", "thread_exit", "exit", "session", "statistics", "annotation"} <= instants


def test_machine_id_and_process_descriptors(packets):
    assert all(p.machine_id != 0 for p in packets)
    assert len({p.machine_id for p in packets}) == 1
    procs = [p.track_descriptor.process for p in packets if p.track_descriptor.HasField("process")]
    assert any(pr.process_name == "python3" for pr in procs)
    threads = [p.track_descriptor.thread for p in packets if p.track_descriptor.HasField("thread")]
    assert any(t.thread_name == "pt_worker" for t in threads)


@pytest.fixture(scope="module")
def restarting_packets():
    """A recording of several chunks whose main and late sequences start afresh in every one
    (`--restart-bytes 1`; the default is every 4 MiB)."""
    out = Path(tempfile.mkdtemp()) / "restarting.pftrace"
    subprocess.run(
        ["cargo", "run", "--quiet", "-p", "ingero-trace", "--example", "synth-trace", "--",
         str(out), "--events", "30000", "--restart-bytes", "1"],
        cwd=REPO,
        check=True,
    )
    trace = pb.Trace.FromString(out.read_bytes())
    assert sum(p.HasField("compressed_packets") for p in trace.packet) >= 4, "several chunks"
    return expand(trace.packet)


def test_sequences_restarting_in_every_chunk_stay_well_formed(restarting_packets):
    packets = restarting_packets
    restarts = [p for p in packets if p.trusted_packet_sequence_id == MAIN_SEQUENCE
                and p.sequence_flags & SEQ_CLEARED]
    assert len(restarts) >= 4, "the main sequence starts afresh in every chunk"
    check_sequence_flags_and_clock_snapshots(packets)
    check_every_event_refers_to_a_defined_track(packets)
    check_timestamps_monotonic_on_the_main_sequence(packets)
    check_slices_nest_on_every_track(packets)
    # Every interned id is defined on its sequence since the last restart (events() asserts it),
    # and the calls are all there.
    launches = [e for e in events(packets) if e[3] == "cudaLaunchKernel"]
    assert len(launches) >= 30000 * 0.9, "the launches are 97 % of the calls"
