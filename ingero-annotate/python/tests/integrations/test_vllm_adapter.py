"""RequestEmitter against fakes of vLLM's ``RequestOutput``.

V1 fakes mirror vLLM 0.11 to 0.33 (``vllm/v1/metrics/stats.py``
``RequestStateStats``: wall-clock ``arrival_time``, engine-core monotonic
``queued_ts``/``scheduled_ts``/``first_token_ts``/``last_token_ts``, attached
as ``RequestOutput.metrics``); the V0 fake mirrors ``vllm.sequence.RequestMetrics``
(all wall-clock). ``RequestOutput`` has ``request_id``, ``prompt_token_ids``,
``outputs[i].token_ids`` and ``finished``.
"""

from __future__ import annotations

import asyncio
import time
import types

from ingero_annotate.integrations.vllm import RequestEmitter

from .conftest import labels_of, spans


def _output(rid, finished=True, metrics=None, prompt=5, generated=(3, 4)):
    outs = [types.SimpleNamespace(token_ids=list(range(n))) for n in generated]
    return types.SimpleNamespace(request_id=rid, prompt_token_ids=list(range(prompt)), outputs=outs,
                                 finished=finished, metrics=metrics)


def test_v1_request_and_stage_spans(server, writer):
    mono, wall = time.monotonic(), time.time()
    stats = types.SimpleNamespace(num_generation_tokens=7, arrival_time=wall - 1.0, queued_ts=mono - 0.9,
                                  scheduled_ts=mono - 0.6, first_token_ts=mono - 0.4, last_token_ts=mono - 0.1,
                                  first_token_latency=0.6, is_corrupted=False)
    RequestEmitter(model="tiny-llm", writer=writer).record(_output("req-1", metrics=stats))
    got = spans(server, 4)
    assert got[0]["labels"] == {"model": "tiny-llm", "request_id": "req-1", "prompt_tokens": "5",
                                "output_tokens": "7"}
    assert [a["labels"].get("request_stage") for a in got] == [None, "queued", "prefill", "decode"]
    assert all("pid" not in a for a in got)  # V1: GPU work is in the engine core
    request, queued, prefill, decode = got
    assert abs((request["span_end"] - request["span_start"]) / 1e9 - 0.9) < 0.05
    assert queued["span_end"] == prefill["span_start"] and prefill["span_end"] == decode["span_start"]
    assert decode["span_end"] == request["span_end"]


def test_v0_metrics(server, writer):
    t = time.time()
    m = types.SimpleNamespace(arrival_time=t - 1, first_scheduled_time=t - 0.8, first_token_time=t - 0.5,
                              last_token_time=t - 0.1, finished_time=t - 0.1, time_in_queue=0.2)
    RequestEmitter(writer=writer, scope="process").record(_output("r0", metrics=m))
    got = spans(server, 4)
    assert all(a["pid"] for a in got)
    assert got[0]["span_start"] == int((t - 1) * 1e9)


def test_stream_without_metrics_uses_first_seen(server, writer):
    em = RequestEmitter(model="m", writer=writer)

    async def engine():
        yield _output("s1", finished=False)
        yield _output("s1", finished=True)

    async def consume():
        return [o async for o in em.stream(engine())]

    assert len(asyncio.run(consume())) == 2
    got = spans(server, 1)
    assert got[0]["labels"]["request_id"] == "s1" and got[0]["span_end"] >= got[0]["span_start"]


def test_record_all_and_garbage(server, writer):
    em = RequestEmitter(writer=writer)
    em.record_all([_output("a"), object(), _output("b", generated=())])
    assert labels_of(spans(server, 2))[1] == {"request_id": "b", "prompt_tokens": "5"}
