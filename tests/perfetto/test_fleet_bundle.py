"""The multi-host Perfetto bundle (`ingero export perfetto`) checked with Python's own readers:
`tarfile` for the archive, `json` for the manifest, Perfetto's official schema (PyPI `perfetto`)
for every member.

Two simulated hosts are written by the real Recorder
(`cargo run -p ingero-trace --example synth-trace -- OUT --machine NAME ID`), one of them in
rotated files, and bundled by the agent. Trace processor itself cannot run here (the PyPI package
downloads `trace_processor_shell` on first use), so whether the UI merges the archive onto one
timeline is checked by hand (docs/fleet.md); this checks what it reads: the layout the archive
readers accept and the manifest fields of format version 1.
"""

import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from trace_checks import expand

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
BIN = os.environ.get("INGERO_BIN", str(TARGET / "release/ingero"))
HOSTS = [("gpu-node-1", 11), ("gpu-node-17", 17)]


def synth(out: Path, name: str, machine_id: int, *extra: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["cargo", "run", "--quiet", "-p", "ingero-trace", "--example", "synth-trace", "--",
         str(out), "--events", "3000", "--machine", name, str(machine_id), *extra],
        cwd=REPO,
        check=True,
    )


@pytest.fixture(scope="module")
def bundle():
    assert Path(BIN).exists(), f"{BIN} is missing: run cargo build --release first"
    job = Path(tempfile.mkdtemp()) / "job"
    synth(job / "gpu-node-1" / "run.pftrace", *HOSTS[0], "--max-file-size", "20000")
    synth(job / "gpu-node-17" / "run.pftrace", *HOSTS[1])
    out = job.parent / "job.tar"
    subprocess.run([BIN, "export", "perfetto", "--trace", str(job), "-o", str(out)], check=True)
    return out


def test_the_archive_is_a_plain_ustar_tar_with_the_manifest_first(bundle):
    with tarfile.open(bundle) as t:
        members = t.getmembers()
    assert members[0].name == "perfetto_manifest.json"
    assert all(m.isfile() for m in members), "no directories, links or extension headers"
    assert all(len(m.name) <= 99 for m in members), "the Perfetto UI's member name limit"
    names = [m.name for m in members[1:]]
    assert all(n.endswith(".pftrace") for n in names)
    assert sum(n.startswith("gpu-node-1/") for n in names) >= 2, "rotated files of one host"
    assert sum(n.startswith("gpu-node-17/") for n in names) == 1


def test_the_manifest_names_each_files_machine(bundle):
    with tarfile.open(bundle) as t:
        manifest = json.load(t.extractfile("perfetto_manifest.json"))
        names = [m.name for m in t.getmembers()[1:]]
    assert list(manifest) == ["perfetto_manifest"]
    pm = manifest["perfetto_manifest"]
    assert pm["version"] == 1
    assert pm["trace_time"] == {"clock": "REALTIME"}
    files = pm["files"]
    assert [f["path"] for f in files] == names, "every member, in order"
    for f in files:
        assert set(f) <= {"path", "machine", "machines", "clocks"}
        assert f["machine"]["name"] == f["path"].split("/")[0]
    attrs = pm["attributes"]
    assert attrs["ingero.hosts"] == "gpu-node-1,gpu-node-17"
    assert all(isinstance(v, (str, int)) for v in attrs.values())


def test_every_member_is_a_trace_naming_the_manifests_machine(bundle):
    with tarfile.open(bundle) as t:
        manifest = json.load(t.extractfile("perfetto_manifest.json"))
        machine = {f["path"]: f["machine"]["name"] for f in manifest["perfetto_manifest"]["files"]}
        ids = {}
        for m in t.getmembers()[1:]:
            data = t.extractfile(m).read()
            packets = expand(pb.Trace.FromString(data).packet)
            infos = [p for p in packets if p.HasField("system_info")]
            assert len(infos) == 1, m.name
            assert infos[0].system_info.machine_name == machine[m.name]
            assert infos[0].system_info.utsname.sysname == "Linux"
            stamped = {p.machine_id for p in packets}
            assert len(stamped) == 1 and 0 not in stamped, "one machine id on every packet"
            ids.setdefault(machine[m.name], set()).update(stamped)
            snaps = [p for p in packets if p.HasField("clock_snapshot")]
            clocks = {c.clock_id for s in snaps for c in s.clock_snapshot.clocks}
            assert {1, 3, 6} <= clocks, "REALTIME, MONOTONIC and BOOTTIME for the merge"
    assert ids == {"gpu-node-1": {11}, "gpu-node-17": {17}}
