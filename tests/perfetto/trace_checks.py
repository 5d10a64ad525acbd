"""Reading an ingero recording with Perfetto's official schema (PyPI `perfetto`), and the
structural checks every recording must pass: sequence flags and clock snapshots, tracks defined
before use, interned ids defined before use, monotonic timestamps on the main sequence, and
properly nested slices. Shared by the synthetic-trace tests and the end-to-end tests."""

import zlib
from collections import defaultdict
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

SEQ_CLEARED = 1
SEQ_NEEDS = 2
CLOCK_INCREMENTAL = 64
MAIN_SEQUENCE, LATE_SEQUENCE, PLAIN_SEQUENCE = 1, 2, 3
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4


def packet_ends(data: bytes):
    """Byte offsets at which each complete framed packet ends."""
    ends, i = [], 0
    while i < len(data):
        j, length, shift = i + 1, 0, 0
        while j < len(data):
            b = data[j]
            j += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        else:
            break
        if j + length > len(data):
            break
        i = j + length
        ends.append(i)
    return ends


def framed_packets(data: bytes):
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


def expand(outer):
    """The packets as trace processor sees them: each `compressed_packets` bundle (a zlib stream
    of a serialized `Trace`) replaced, in place, by the packets it holds. ingero's bundles carry
    nothing else (trace processor would ignore any other field of the enclosing packet)."""
    out = []
    for p in outer:
        if p.HasField("compressed_packets"):
            fields = [f.name for f, _ in p.ListFields()]
            assert fields == ["compressed_packets"], f"a bundle with other fields: {fields}"
            out.extend(pb.Trace.FromString(zlib.decompress(p.compressed_packets)).packet)
        else:
            out.append(p)
    return out


def load_outer_packets(path: Path):
    """Every complete packet of the file as stored (bundles not expanded). A truncated last
    packet (an agent killed mid-write) is left out; anything else malformed fails."""
    data = Path(path).read_bytes()
    return [pb.TracePacket.FromString(p) for p in framed_packets(data)]


def load_packets(path: Path):
    """Every complete packet of the file, bundles expanded, each parsed with the official schema."""
    return expand(load_outer_packets(path))


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


def events(packets):
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


def check_sequence_flags_and_clock_snapshots(packets):
    first_seen = {}
    for p in packets:
        seq = p.trusted_packet_sequence_id
        assert seq != 0
        if seq not in first_seen:
            first_seen[seq] = p
            assert p.sequence_flags & SEQ_CLEARED and p.first_packet_on_sequence
            assert p.HasField("trace_packet_defaults")
        elif p.sequence_flags & SEQ_CLEARED:
            # A sequence inside the chunks starting afresh (every few MiB, so a reader that
            # loses a chunk resumes there): state cleared, defaults and clock restated, and
            # not claiming to be the sequence's first packet.
            assert seq != PLAIN_SEQUENCE
            assert p.sequence_flags == SEQ_CLEARED | SEQ_NEEDS and not p.first_packet_on_sequence
            assert p.HasField("trace_packet_defaults")
            assert p.HasField("clock_snapshot") == (seq == MAIN_SEQUENCE)
        else:
            assert p.sequence_flags == SEQ_NEEDS
    snaps = [p for p in packets if p.HasField("clock_snapshot")]
    assert snaps, "clock snapshots present"
    for p in snaps:
        ids = {c.clock_id for c in p.clock_snapshot.clocks}
        assert {1, 3, 6} <= ids, "REALTIME, MONOTONIC and BOOTTIME in every snapshot"
        # Clock 64 is scoped to the main sequence: only its snapshots restate it.
        assert (CLOCK_INCREMENTAL in ids) == (p.trusted_packet_sequence_id == MAIN_SEQUENCE)
    assert first_seen[MAIN_SEQUENCE].HasField("clock_snapshot")
    assert first_seen[PLAIN_SEQUENCE].HasField("clock_snapshot"), "the plain sequence opens with the clocks"
    assert first_seen[MAIN_SEQUENCE].trace_packet_defaults.timestamp_clock_id == CLOCK_INCREMENTAL


def check_every_event_refers_to_a_defined_track(packets):
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


def check_timestamps_monotonic_on_the_main_sequence(packets):
    last = {}
    for p, seq, ts, *_ in events(packets):
        if seq == 1:
            assert ts >= last.get(seq, 0)
            last[seq] = ts


def check_slices_nest_on_every_track(packets):
    stacks = defaultdict(list)
    # Time order across sequences; at equal times, the order written (a zero-length slice's
    # begin precedes its end, and an end precedes the next begin at the same instant).
    ordered = sorted(((ts, i, p) for i, (p, seq, ts, *_rest) in enumerate(events(packets))), key=lambda t: (t[0], t[1]))
    for ts, _, p in ordered:
        e = p.track_event
        if e.type == BEGIN:
            stacks[e.track_uuid].append(ts)
        elif e.type == END:
            assert stacks[e.track_uuid], f"end without begin on track {e.track_uuid}"
            assert stacks[e.track_uuid].pop() <= ts
    assert not any(stacks.values()), "every slice ends"


def slices(packets):
    """Completed slices: (track, name, cats, args, start, end)."""
    open_ = defaultdict(list)
    out = []
    for p, seq, ts, name, cats, args in events(packets):
        e = p.track_event
        if e.type == BEGIN:
            open_[e.track_uuid].append((name, cats, args, ts))
        elif e.type == END:
            n, c, a, start = open_[e.track_uuid].pop()
            out.append((e.track_uuid, n, c, a, start, ts))
    return out


def track_names(packets):
    return {p.track_descriptor.uuid: p.track_descriptor.name for p in packets if p.HasField("track_descriptor")}


