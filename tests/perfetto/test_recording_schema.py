"""Validates an ingero recording against Perfetto's official schema (PyPI `perfetto`).

The trace is produced by the real Recorder through
`cargo run -p ingero-agent --example synth-trace -- OUT --events N`, or taken from
$INGERO_TRACE when set (e.g. the end-to-end test's recording).
"""

import os
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

REPO = Path(__file__).resolve().parents[2]
SEQ_CLEARED = 1
SEQ_NEEDS = 2
CLOCK_INCREMENTAL = 64
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4


def _framed_packets(data: bytes):
    """Yields each complete `Trace.packet` (0x0A, varint length, bytes); stops at a cut one."""
    i = 0
    while i < len(data):
        if data[i] != 0x0A:
            raise AssertionError(f"unexpected tag {data[i]:#x} at {i}")
        j, length, shift = i + 1, 0, 0
        while True:
            if j >= len(data):
                return
            b = data[j]
            j += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if j + length > len(data):
            return
        yield data[j : j + length]
        i = j + length


@pytest.fixture(scope="module")
def trace_path():
    if os.environ.get("INGERO_TRACE"):
        return Path(os.environ["INGERO_TRACE"])
    out = Path(tempfile.mkdtemp()) / "synth.pftrace"
    subprocess.run(
        ["cargo", "run", "--quiet", "-p", "ingero-agent", "--example", "synth-trace", "--", str(out), "--events", "2000"],
        cwd=REPO,
        check=True,
    )
    return out


@pytest.fixture(scope="module")
def packets(trace_path):
    data = trace_path.read_bytes()
    trace = pb.Trace()
    trace.ParseFromString(data)  # the whole file parses with the official schema
    framed = [pb.TracePacket.FromString(p) for p in _framed_packets(data)]
    assert len(framed) == len(trace.packet)
    return list(trace.packet)


class Sequences:
    """Per-sequence interning and clock state, resolved as trace processor does."""

    def __init__(self):
        self.names = defaultdict(dict)
        self.cats = defaultdict(dict)
        self.dnames = defaultdict(dict)
        self.strings = defaultdict(dict)
        self.clock = {}
        self.default_clock = {}

    def apply(self, p):
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & SEQ_CLEARED:
            for table in (self.names, self.cats, self.dnames, self.strings):
                table[seq] = {}
        if p.HasField("trace_packet_defaults"):
            self.default_clock[seq] = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("interned_data"):
            i = p.interned_data
            self.names[seq].update({e.iid: e.name for e in i.event_names})
            self.cats[seq].update({e.iid: e.name for e in i.event_categories})
            self.dnames[seq].update({e.iid: e.name for e in i.debug_annotation_names})
            self.strings[seq].update({e.iid: e.str.decode() for e in i.debug_annotation_string_values})
        if p.HasField("clock_snapshot"):
            for c in p.clock_snapshot.clocks:
                if c.clock_id == CLOCK_INCREMENTAL:
                    self.clock[seq] = c.timestamp
        if not p.HasField("timestamp"):
            return None
        clock = p.timestamp_clock_id or self.default_clock.get(seq)
        if clock == CLOCK_INCREMENTAL:
            assert seq in self.clock, "incremental timestamp before its clock snapshot"
            self.clock[seq] += p.timestamp
            return self.clock[seq]
        return p.timestamp


def _events(packets):
    """(packet, sequence, absolute ts, name, categories, args) per TrackEvent, checking that every
    interned id is defined before use on its sequence."""
    s = Sequences()
    out = []
    for p in packets:
        ts = s.apply(p)
        if not p.HasField("track_event"):
            continue
        seq = p.trusted_packet_sequence_id
        e = p.track_event
        if e.HasField("name_iid"):
            assert e.name_iid in s.names[seq], f"name iid {e.name_iid} undefined on sequence {seq}"
            name = s.names[seq][e.name_iid]
        else:
            name = e.name
        cats = []
        for c in e.category_iids:
            assert c in s.cats[seq], f"category iid {c} undefined on sequence {seq}"
            cats.append(s.cats[seq][c])
        args = {}
        for d in e.debug_annotations:
            if d.HasField("name_iid"):
                assert d.name_iid in s.dnames[seq], f"debug name iid {d.name_iid} undefined"
                key = s.dnames[seq][d.name_iid]
            else:
                key = d.name
            if d.HasField("string_value_iid"):
                assert d.string_value_iid in s.strings[seq], f"string iid {d.string_value_iid} undefined"
                val = s.strings[seq][d.string_value_iid]
            else:
                which = d.WhichOneof("value")
                val = getattr(d, which) if which else None
            args[key] = val
        out.append((p, seq, ts, name, cats, args))
    return out


def test_sequence_flags_and_clock_snapshots(packets):
    first_seen = {}
    for p in packets:
        seq = p.trusted_packet_sequence_id
        assert seq != 0
        if seq not in first_seen:
            first_seen[seq] = p
            assert p.sequence_flags & SEQ_CLEARED and p.first_packet_on_sequence
            assert p.HasField("trace_packet_defaults")
        else:
            assert p.sequence_flags == SEQ_NEEDS
    snaps = [p for p in packets if p.HasField("clock_snapshot")]
    assert snaps, "clock snapshots present"
    ids = {c.clock_id for c in snaps[0].clock_snapshot.clocks}
    assert {1, 3, 6, CLOCK_INCREMENTAL} <= ids
    assert first_seen[1].HasField("clock_snapshot")
    assert first_seen[1].trace_packet_defaults.timestamp_clock_id == CLOCK_INCREMENTAL


def test_every_event_refers_to_a_defined_track(packets):
    defined = set()
    for p in packets:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid != 0
            if d.HasField("parent_uuid"):
                assert d.parent_uuid in defined, "parent described first"
            defined.add(d.uuid)
        if p.HasField("track_event"):
            assert p.track_event.track_uuid in defined, f"event on undescribed track {p.track_event.track_uuid}"


def test_timestamps_monotonic_on_the_main_sequence(packets):
    last = {}
    for p, seq, ts, *_ in _events(packets):
        if seq == 1:
            assert ts >= last.get(seq, 0)
            last[seq] = ts


def test_slices_nest_on_every_track(packets):
    stacks = defaultdict(list)
    ordered = sorted(
        ((ts, 0 if p.track_event.type == END else 1, i, p) for i, (p, seq, ts, *_rest) in enumerate(_events(packets))),
        key=lambda t: (t[0], t[1], t[2]),
    )
    for ts, _, _, p in ordered:
        e = p.track_event
        if e.type == BEGIN:
            stacks[e.track_uuid].append(ts)
        elif e.type == END:
            assert stacks[e.track_uuid], f"end without begin on track {e.track_uuid}"
            assert stacks[e.track_uuid].pop() <= ts
    assert not any(stacks.values()), "every slice ends"


def _slices(packets):
    """Completed slices: (track, name, cats, args, start, end)."""
    open_ = defaultdict(list)
    out = []
    for p, seq, ts, name, cats, args in _events(packets):
        e = p.track_event
        if e.type == BEGIN:
            open_[e.track_uuid].append((name, cats, args, ts))
        elif e.type == END:
            n, c, a, start = open_[e.track_uuid].pop()
            out.append((e.track_uuid, n, c, a, start, ts))
    return out


def test_failed_cuda_malloc_carries_size_and_return_code(packets):
    mallocs = [s for s in _slices(packets) if s[1] == "cudaMalloc" and s[3].get("size") == 1048576]
    assert mallocs, "the 1 MiB cudaMalloc slice"
    _, _, cats, args, start, end = mallocs[0]
    assert args["ret"] == 35
    assert "cuda,error" in cats
    assert end - start == 50_000


def _track_names(packets):
    return {p.track_descriptor.uuid: p.track_descriptor.name for p in packets if p.HasField("track_descriptor")}


def test_step_track_has_state_slices(packets):
    names = _track_names(packets)
    step = [(s[1], s[4], s[5]) for s in _slices(packets) if names.get(s[0]) == "step"]
    assert [n for n, *_ in step] == ["step=41", "step=42", "step=43"]
    for (_, _, end), (_, start, _) in zip(step, step[1:]):
        assert end == start, "each value lasts until the next"
    for s in _slices(packets):
        if names.get(s[0]) == "step":
            assert s[3]["provenance.uid"] == 1000


def test_overlapping_spans_carry_request_id_on_separate_lanes(packets):
    names = _track_names(packets)
    spans = [s for s in _slices(packets) if "labels.request_id" in s[3]]
    assert sorted(s[3]["labels.request_id"] for s in spans) == ["req-a", "req-b"]
    a, b = sorted(spans, key=lambda s: s[4])
    assert b[4] < a[5], "they overlap"
    assert a[0] != b[0] and names[a[0]].startswith("spans") and names[b[0]].startswith("spans")
    assert all("provenance.uid" in s[3] for s in spans)


def test_off_cpu_and_lifecycle(packets):
    names = _track_names(packets)
    off = [s for s in _slices(packets) if names.get(s[0]) == "off-CPU"]
    assert {s[1] for s in off} == {"preempted", "blocked"}
    assert any(s[3].get("next_comm") == "kworker/0:1" for s in off)
    instants = {name for p, _, _, name, *_ in _events(packets) if p.track_event.type == INSTANT}
    assert {"exec", "thread_start", "thread_exit", "exit", "session", "statistics", "annotation"} <= instants


def test_machine_id_and_process_descriptors(packets):
    assert all(p.machine_id != 0 for p in packets)
    assert len({p.machine_id for p in packets}) == 1
    procs = [p.track_descriptor.process for p in packets if p.track_descriptor.HasField("process")]
    assert any(pr.process_name == "python3" for pr in procs)
    threads = [p.track_descriptor.thread for p in packets if p.track_descriptor.HasField("thread")]
    assert any(t.thread_name == "pt_worker" for t in threads)
