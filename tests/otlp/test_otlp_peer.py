"""An independent OTLP peer for ingero's export: Google's protobuf runtime on the official
OpenTelemetry `.proto` definitions (PyPI `opentelemetry-proto`), behind a standard-library
HTTP server, decodes what `ingero export otlp` sends and checks it against
`ingero query --group-by --json` on the same recording, field by field. Also the standard
`OTEL_*` variables (endpoint, headers, service name, resource, compression), and, as root with
the real libcudart, a live `ingero trace --record --annotate --otlp-endpoint` of a Python
process labelling its steps.

Needs INGERO_BIN (set by `cargo xtask test`); the recording is written by the `synth-trace`
example (cargo). The live test also needs INGERO_CUDART.
"""

import gzip
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

REPO = Path(__file__).resolve().parents[2]
BIN = os.environ.get("INGERO_BIN", str(REPO / "target/release/ingero"))
CUDART = os.environ.get(
    "INGERO_CUDART", str(REPO / "target/test-deps/cudart/nvidia/cuda_runtime/lib/libcudart.so.12")
)

COUNTERS = {
    "ingero.cuda_calls": ("cuda_calls",),
    "ingero.api_time_ns": ("api_time_ns",),
    "ingero.sync_time_ns": ("sync_time_ns",),
    "ingero.memcpy_time_ns": ("memcpy_time_ns",),
    "ingero.memcpy.h2d_bytes": ("memcpy_bytes", "h2d"),
    "ingero.memcpy.d2h_bytes": ("memcpy_bytes", "d2h"),
    "ingero.memcpy.d2d_bytes": ("memcpy_bytes", "d2d"),
    "ingero.memcpy.other_bytes": ("memcpy_bytes", "other"),
    "ingero.launches": ("launches",),
    "ingero.launch_time_ns": ("launch_time_ns",),
    "ingero.errors": ("errors",),
    "ingero.off_cpu_ns": ("off_cpu_ns",),
    "ingero.off_cpu.preempted_ns": ("preempted_ns",),
    "ingero.off_cpu.blocked_ns": ("blocked_ns",),
    "ingero.held_ns": ("duration_ns",),
    "ingero.recording.start_ns": ("start_ns",),
    "ingero.recording.end_ns": ("end_ns",),
}
NCCL_COUNTERS = {
    "ingero.nccl_time_ns": "nccl_time_ns",
    "ingero.nccl.collectives": "collectives",
    "ingero.nccl.bytes": "nccl_bytes",
}


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Collector:
    """OTLP/HTTP receiver: POST /v1/traces and /v1/metrics, protobuf, gzip or not."""

    def __init__(self):
        self.spans, self.metrics, self.requests = [], [], []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path == "/v1/traces":
                    req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                    for rs in req.resource_spans:
                        resource = attrs(rs.resource.attributes)
                        for ss in rs.scope_spans:
                            assert ss.scope.name == "ingero"
                            for s in ss.spans:
                                outer.spans.append((s, attrs(s.attributes), resource))
                    reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    req = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    outer.metrics.append(req)
                    reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture(scope="module")
def recording():
    assert Path(BIN).exists(), f"{BIN} is missing: cargo build --release"
    out = Path(tempfile.mkdtemp()) / "synth.pftrace"
    subprocess.run(
        ["cargo", "run", "--quiet", "--release", "-p", "ingero-trace", "--example", "synth-trace", "--",
         str(out), "--events", "20000", "--labels"],
        cwd=REPO, check=True,
    )
    return out


def query(trace, key):
    out = subprocess.run([BIN, "query", "--trace", str(trace), "--group-by", key, "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def clock_offset(spans):
    """REALTIME - MONOTONIC the spans were converted with: the same for all of them."""
    offsets = {s.start_time_unix_nano - a["ingero.recording.start_ns"] for s, a, _ in spans}
    assert len(offsets) == 1, offsets
    return offsets.pop()


def check_against_rows(spans, rows, name):
    mine = [(s, a, r) for s, a, r in spans if s.name == name]
    assert len(mine) == len(rows) > 0, (name, len(mine), len(rows))
    offset = clock_offset(mine)
    for s, a, r in mine:
        labels = {k[len("ingero.label."):]: v for k, v in a.items() if k.startswith("ingero.label.")}
        row = [x for x in rows if x["labels"] == labels and x.get("pid") == r.get("process.pid")]
        assert len(row) == 1, (labels, r.get("process.pid"))
        row = row[0]
        for attr, path in COUNTERS.items():
            want = row
            for p in path:
                want = want[p]
            assert a[attr] == want, (name, labels, attr, a[attr], want)
        # NCCL's counters travel only on spans of groups that called NCCL.
        for attr, key in NCCL_COUNTERS.items():
            assert a.get(attr, 0) == row[key], (name, labels, attr, a.get(attr), row[key])
        assert s.end_time_unix_nano - s.start_time_unix_nano == row["end_ns"] - row["start_ns"]
        assert s.start_time_unix_nano == row["start_ns"] + offset
        assert len(s.trace_id) == 16 and len(s.span_id) == 8 and s.kind == s.SPAN_KIND_INTERNAL
    return mine


def test_replayed_spans_decode_with_the_official_protos_and_equal_query(collector, recording):
    subprocess.run([BIN, "export", "otlp", "--trace", str(recording), "--otlp-endpoint", collector.url],
                   check=True, capture_output=True)
    assert all(path == "/v1/traces" for path, _ in collector.requests)
    assert all(h.get("content-type") == "application/x-protobuf" for _, h in collector.requests)
    assert all(h.get("content-encoding") == "gzip" for _, h in collector.requests)
    steps = check_against_rows(collector.spans, query(recording, "step"), "ingero.step")
    check_against_rows(collector.spans, query(recording, "request_id"), "ingero.request")
    _, _, resource = steps[0]
    assert resource["service.name"] == "ingero"
    assert isinstance(resource["ingero.machine_id"], int) and resource["process.pid"] > 0
    # One trace per step value.
    by_step = {}
    for s, a, _ in steps:
        by_step.setdefault(a["ingero.step"], set()).add(s.trace_id)
    assert all(len(ids) == 1 for ids in by_step.values())
    assert len({next(iter(ids)) for ids in by_step.values()}) == len(by_step)


def test_the_standard_variables_are_honoured(collector, recording):
    env = dict(os.environ)
    env.update({
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-scope-orgid=team-a",
        "OTEL_SERVICE_NAME": "trainer",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,k8s.pod.name=pod-1",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "none",
    })
    subprocess.run([BIN, "export", "otlp", "--trace", str(recording), "--no-requests"],
                   check=True, capture_output=True, env=env)
    assert collector.spans and all(s.name == "ingero.step" for s, _, _ in collector.spans)
    for _, headers in collector.requests:
        assert headers["authorization"] == "Bearer abc"
        assert headers["x-scope-orgid"] == "team-a"
        assert "content-encoding" not in headers
    _, _, resource = collector.spans[0]
    assert resource["service.name"] == "trainer"
    assert resource["deployment.environment"] == "ci" and resource["k8s.pod.name"] == "pod-1"


def test_dry_run_json_is_what_is_sent(collector, recording):
    out = subprocess.run([BIN, "export", "otlp", "--trace", str(recording), "--dry-run", "--json"],
                         check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    subprocess.run([BIN, "export", "otlp", "--trace", str(recording), "--otlp-endpoint", collector.url],
                   check=True, capture_output=True)
    sent = {s.span_id.hex(): (s, a, r) for s, a, r in collector.spans}
    assert len(lines) == len(sent)
    for line in lines:
        s, a, r = sent[line["span_id"]]
        assert line["trace_id"] == s.trace_id.hex() and line["name"] == s.name
        assert line["start_time_unix_nano"] == s.start_time_unix_nano
        assert line["end_time_unix_nano"] == s.end_time_unix_nano
        assert line["attributes"] == a and line["resource"] == r


LIVE_STEPS = 5


def _live_workload(sock, cudart):
    """A process of this test's own: labels its steps and calls libcudart in each."""
    code = f"""
import ctypes, os, sys, time
sys.path.insert(0, {str(REPO / 'ingero-annotate/python/src')!r})
from ingero_annotate import AnnotationWriter
lib = ctypes.CDLL({cudart!r})
w = AnnotationWriter(socket_path={sock!r})
assert w.active
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
ptr = ctypes.c_void_p()
for step in range({LIVE_STEPS}):
    w.write({{"step": str(step)}}, pid=os.getpid())
    time.sleep(0.05)
    for _ in range(3):
        lib.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))
    lib.cudaDeviceSynchronize()
    time.sleep(0.05)
w.write({{"step": ""}}, pid=os.getpid())
w.close()
"""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="loads eBPF programs: needs root")
def test_a_live_trace_sends_one_span_per_step_with_querys_numbers(collector):
    assert Path(CUDART).exists(), f"{CUDART} is missing: cargo xtask test-deps"
    tmp = Path(tempfile.mkdtemp())
    out, sock = tmp / "live.pftrace", str(tmp / "annotate.sock")
    agent = subprocess.Popen(
        [BIN, "trace", "--record", "-o", str(out), "--annotate", "--annotate-socket", sock,
         "--cuda-lib", CUDART, "--otlp-endpoint", collector.url, "--otlp-metrics-interval", "1s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()
    err = []

    def read():
        for line in agent.stderr:
            err.append(line)
            if "attached" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(120) and agent.poll() is None, "".join(err)
    work = _live_workload(sock, CUDART)
    assert work.stdout.readline().strip() == "ready"
    work.stdin.write("go\n")
    work.stdin.flush()
    assert work.wait(timeout=60) == 0
    time.sleep(1.5)
    agent.send_signal(2)
    assert agent.wait(timeout=60) == 0, "".join(err)
    rows = [r for r in query(out, "step") if r.get("pid") == work.pid]
    assert sorted(r["labels"]["step"] for r in rows) == [str(s) for s in range(LIVE_STEPS)]
    spans = [(s, a, r) for s, a, r in collector.spans if s.name == "ingero.step" and r.get("process.pid") == work.pid]
    check_against_rows(spans, rows, "ingero.step")
    assert all(a["ingero.cuda_calls"] >= 3 for _, a, _ in spans), "each step's calls were traced"
    names = {m.name for req in collector.metrics for rm in req.resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert {"ingero.cuda.calls", "ingero.cuda.duration", "ingero.export.spans_sent"} <= names
