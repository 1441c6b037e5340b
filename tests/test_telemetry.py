"""Traces: one run is one trace, from the API's intake through the queue to the agents and
back to the aggregation, with every parent link intact (the queue message carries W3C trace
context); spans carry the run, step, item and agent ids. On the real stack: a second API
and two agents exporting their spans to files (adapters/telemetry.py)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters import telemetry
from adapters.queue import WorkQueues, work_queue_name
from benchctl import localstack
from benchctl.localstack import Stack
from tests.conftest import run_body, wait_state, wait_until
from tests.loopback import Quiet, serve
from tests.second_api import SecondApi

ROOT = Path(__file__).resolve().parent.parent
Span = dict[str, Any]
AGENT_STAGES = ("claim", "layout", "barrier wait", "fio", "result upload")


def read_spans(directory: Path) -> list[Span]:
    spans = []
    for path in directory.glob("*.spans.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                spans.append(json.loads(line))
    return spans


def span_id(span: Span) -> str:
    return str(span["context"]["span_id"])


@pytest.mark.fio  # its agents run fio
def test_a_run_is_one_trace_across_api_queue_agents_and_aggregation(
    stack: Stack, queues: WorkQueues, pool: str, scratch: Path, tmp_path: Path
) -> None:
    spans_dir = tmp_path / "telemetry"
    env = {
        "BENCH_TELEMETRY_DIR": str(spans_dir),
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "1000",
    }
    api = SecondApi(stack, tmp_path / "api", env=env)
    api.stack.telemetry = env  # its agents export too
    api.start()
    started = []
    try:
        with httpx.Client(base_url=api.url, timeout=30) as client:
            # Two steps, 1 then 2 clients: the second step is sent by the API call that
            # stored the first step's result, inside the run's trace.
            body = {**run_body(pool, runtime=1), "clients": [1, 2]}
            r = client.post("/api/runs", json=body)
            assert r.status_code == 202, r.text
            run_id = r.json()["id"]
            view = client.get(f"/api/runs/{run_id}").json()
            trace_id = view["trace_id"]

            # The message on the queue carries the trace context of the span that sent it.
            raw = queues.peek_raw(work_queue_name(pool))
            assert len(raw) == 1
            message = json.loads(base64.b64decode(raw[0]))
            version, msg_trace, msg_parent, flags = message["traceparent"].split("-")
            assert (version, msg_trace) == ("00", trace_id)
            assert int(flags, 16) & 1  # sampled

            for i in (1, 2):
                started.append(
                    localstack.start_agent(
                        api.stack, f"{pool}-trace-{i}", pool=pool, targets={"scratch": str(scratch)}
                    )
                )
            wait_state(client, run_id, ("completed",), timeout=90)
    finally:
        for p in started:
            localstack.stop_proc(p, signal.SIGTERM, timeout=10)  # flushes its spans at exit
        api.stop()

    def whole() -> list[Span] | None:
        spans = [s for s in read_spans(spans_dir) if s["context"]["trace_id"] == f"0x{trace_id}"]
        names = Counter(s["name"] for s in spans)
        wanted = {"intake": 1, "aggregate": 1, "detect": 1, "enqueue step": 2}
        wanted.update({stage: 3 for stage in AGENT_STAGES})
        return spans if all(names[n] >= k for n, k in wanted.items()) else None

    spans = wait_until(whole, timeout=15, what="the run's spans in the files")
    by_id = {span_id(s): s for s in spans}
    names = Counter(s["name"] for s in spans)
    queue = work_queue_name(pool)
    assert names[f"send {queue}"] == 3  # 1 + 2 messages
    items = [s for s in spans if s["name"] == f"process {queue}"]
    # One delivery per message, unless a lease was lost under load (a redelivery is a
    # span of its own, in the same trace, under the same send span).
    completed = [s for s in items if s["attributes"]["bench.outcome"] == "completed"]
    assert len(completed) == 3

    # Parent links are intact: one root (the request that made the run), every other
    # span's parent is a span of this same trace.
    roots = [s for s in spans if not s.get("parent_id")]
    assert [r["name"] for r in roots] == ["POST /api/runs"]
    assert all(s["parent_id"] in by_id for s in spans if s.get("parent_id"))

    def parent(s: Span) -> Span:
        found: Span = by_id[s["parent_id"]]
        return found

    def ancestors(s: Span) -> list[str]:
        out = []
        while s.get("parent_id"):
            s = parent(s)
            out.append(s["name"])
        return out

    # Across the queue: each agent's item span is a child of the span that sent its
    # message, which is a child of its step's "enqueue step" span.
    sends = {span_id(s): s for s in spans if s["name"] == f"send {queue}"}
    assert f"0x{msg_parent}" in sends  # the first message's context is its send span
    for process in items:
        send = parent(process)
        assert send["name"] == f"send {queue}" and process["kind"] == "SpanKind.CONSUMER"
        assert parent(send)["name"] == "enqueue step"
        assert process["attributes"]["bench.item_id"] == send["attributes"]["bench.item_id"]
    enqueues = [s for s in spans if s["name"] == "enqueue step"]
    assert sorted(s["attributes"]["bench.step"] for s in enqueues) == [0, 1]
    first, second = sorted(enqueues, key=lambda s: s["attributes"]["bench.step"])
    assert ancestors(first)[:2] == ["intake", "POST /api/runs"]
    # Step 1 went out from the API call storing step 0's result, under that agent's span.
    assert ancestors(second)[:3] == [
        "PUT /api/agent/results/{item_id}",
        "result upload",
        f"process {queue}",
    ]

    # The agent's stages, in order, each under its item span, carrying every id.
    for stage in (s for s in spans if s["name"] in AGENT_STAGES):
        item = parent(stage)
        assert item["name"] == f"process {queue}"
        attrs = stage["attributes"]
        assert attrs["bench.run_id"] == run_id
        assert attrs["bench.item_id"] == item["attributes"]["bench.item_id"]
        assert attrs["bench.step"] == int(attrs["bench.item_id"].split(".s")[1].split(".")[0])
        assert attrs["bench.agent_id"].startswith(f"agent-{pool}-trace-")
    for item in completed:
        mine = sorted(
            (s for s in spans if s.get("parent_id") == span_id(item)),
            key=lambda s: s["start_time"],
        )
        assert [s["name"] for s in mine] == list(AGENT_STAGES)
    # The API's spans of each agent call nest under the stage that made it.
    claims = [s for s in spans if s["name"] == "POST /api/agent/claim"]
    assert len(claims) == len(items) and all(parent(s)["name"] == "claim" for s in claims)

    # Aggregation and detection, in the same trace, carrying the run id.
    for name in ("aggregate", "detect"):
        for s in (s for s in spans if s["name"] == name):
            assert s["attributes"]["bench.run_id"] == run_id
            assert "POST /api/runs" in ancestors(s)

    # The API exported the operator's gauges as OpenTelemetry metrics too, the test pool's
    # among them (functions/telemetry.py; checked figure by figure in test_operator_metrics).
    exported: dict[str, set[str]] = {}
    for path in spans_dir.glob("benchsvc-api-*.metrics.jsonl"):
        for line in path.read_text().splitlines():
            for rm in json.loads(line)["resource_metrics"]:
                for sm in rm["scope_metrics"]:
                    for m in sm["metrics"]:
                        pools = {str(p["attributes"].get("pool")) for p in m["data"]["data_points"]}
                        exported.setdefault(m["name"], set()).update(pools)
    gauges = ("bench.queue.messages", "bench.queue.oldest_age", "bench.agents.live")
    assert all(pool in exported[g] for g in gauges), exported
    assert {"bench.runs", "bench.timer.last_tick_age"} <= set(exported)


def test_a_span_named_with_a_runs_traceparent_joins_that_run_s_trace() -> None:
    """The parent rule (core.telemetry): the timer's spans go directly under the intake
    span; spans of an agent's call into the API nest under that call; a span opened while
    another trace is current (a timer tick of its own) still joins the run's."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    sink = telemetry.OtelSink(provider, MeterProvider(metric_readers=[reader]))
    tracer = provider.get_tracer("test")

    with sink.span("intake", None, {}) as intake:
        run_trace = intake.traceparent
    assert run_trace is not None
    _, trace_hex, intake_hex, _ = run_trace.split("-")

    with sink.span("aggregate", run_trace, {"run_id": "r-1"}):  # the timer: nothing current
        pass
    with tracer.start_as_current_span(
        "PUT /api/agent/results", context=telemetry.context_of(run_trace)
    ) as call:
        with sink.span("aggregate", run_trace, {"run_id": "r-1"}):
            pass
    with tracer.start_as_current_span("a tick of its own"), sink.span("detect", run_trace, {}):
        pass

    spans = {
        (s.name, s.parent.span_id if s.parent else None): s for s in exporter.get_finished_spans()
    }
    assert all(
        f"{s.context.trace_id:032x}" == trace_hex
        for n, s in spans.items()
        if n[0] != "a tick of its own"
    )
    assert ("aggregate", int(intake_hex, 16)) in spans
    assert ("aggregate", call.get_span_context().span_id) in spans
    assert ("detect", int(intake_hex, 16)) in spans
    aggregate = spans[("aggregate", int(intake_hex, 16))]
    assert aggregate.attributes == {"bench.run_id": "r-1"}

    sink.count("bench.barrier.failures", {})
    sink.count("bench.barrier.failures", {})
    sink.count("bench.poison.messages", {"pool": "p"})
    data = reader.get_metrics_data()
    assert data is not None
    sums = {
        (m.name, tuple(sorted((p.attributes or {}).items()))): getattr(p, "value", None)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
    }
    assert sums == {
        ("bench.barrier.failures", ()): 2,
        ("bench.poison.messages", (("pool", "p"),)): 1,
    }
    assert trace.get_current_span().get_span_context().is_valid is False  # nothing leaked


COLLECTOR_CHILD = """
import sys
from adapters import telemetry as otel
from core import telemetry

assert otel.setup("benchsvc-check", "one") == "otlp"
with telemetry.span("intake", None, run_id="r-otlp") as intake:
    with telemetry.span("aggregate", intake.traceparent, run_id="r-otlp", step=0):
        pass
otel.flush()
"""


def test_spans_go_to_an_otlp_collector_when_one_is_named(tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP/HTTP exporter, to a collector the operator runs
    (here a receiver of the OTLP/HTTP protocol, decoding with OpenTelemetry's own protobufs)."""
    received: list[ExportTraceServiceRequest] = []

    class Collector(Quiet):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                received.append(ExportTraceServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

    server, collector_url = serve(Collector)
    try:
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector_url,
            "OTEL_METRIC_EXPORT_INTERVAL": "600000",
        }
        env.pop("BENCH_TELEMETRY_DIR", None)
        env.pop("APPLICATIONINSIGHTS_CONNECTION_STRING", None)
        done = subprocess.run(
            [sys.executable, "-c", COLLECTOR_CHILD],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
    spans = [
        span
        for request in received
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"intake", "aggregate"}
    assert by_name["aggregate"].parent_span_id == by_name["intake"].span_id
    assert by_name["aggregate"].trace_id == by_name["intake"].trace_id
    attrs = {a.key: a.value for a in by_name["aggregate"].attributes}
    assert attrs["bench.run_id"].string_value == "r-otlp" and attrs["bench.step"].int_value == 0
    service = {
        a.key: a.value.string_value for a in received[0].resource_spans[0].resource.attributes
    }
    assert service["service.name"] == "benchsvc-check"
