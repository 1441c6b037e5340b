"""The metrics an operator watches, as OpenTelemetry metrics (functions/telemetry.py), read
from the real queue service and database: queue depth and the age of the oldest message per
pool, runs by state, barrier failures, poison messages, the timers' last ticks and agents live
per pool. Each figure is checked against what the test put there or counted itself."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from adapters import telemetry as otel
from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, poison_queue_name, work_queue_name
from benchctl.localstack import Stack
from core import telemetry
from core.models.agents import AgentRecord
from core.models.holder import AgentRef
from core.models.state import RunState
from core.runs.service import RunService
from functions.telemetry import OperatorMetrics, Sources, read
from tests.conftest import Clock, run_body

Points = dict[tuple[str, tuple[tuple[str, Any], ...]], float]


def collect(reader: InMemoryMetricReader) -> Points:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        (m.name, tuple(sorted((p.attributes or {}).items()))): getattr(p, "value", 0.0)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
    }


@pytest.fixture
def meters() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    """The process's counters (core.telemetry) and the gauges, into one in-memory reader."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    telemetry.install(otel.OtelSink(TracerProvider(), provider))
    try:
        yield provider, reader
    finally:
        telemetry.install(None)


def record(agent_id: str, pool: str, last_seen_ms: int) -> AgentRecord:
    return AgentRecord(
        id=agent_id,
        pool=pool,
        session=uuid.uuid4().hex,
        heartbeat_s=2.0,
        registered_ms=last_seen_ms - 60_000,
        last_seen_ms=last_seen_ms,
    )


def test_the_operators_metrics_read_what_the_queues_and_the_database_hold(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
    meters: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    provider, reader = meters
    clock = Clock()
    service = RunService(
        store,
        queues,
        artifacts,
        pools=tuple(stack.pool_names),
        clock=clock,
        max_deliveries=stack.max_deliveries,
    )
    # Two 2-client runs: four work messages on the pool's queue, waiting for agents.
    body = {**run_body(pool), "clients": 2, "barrier_timeout_s": 30}
    sent_at = time.time()  # before the first message is sent: the oldest's age is below this
    first, _ = service.submit(body)
    second, _ = service.submit({**body, "target": "other"})

    # A delivery past the limit goes to the poison queue (a claim with its dequeue count).
    work = store.items.get_item(first.id, f"{first.id}.s0.c1").work_item
    decision = service.claim(
        work, agent=AgentRef("m-poison"), dequeue_count=stack.max_deliveries + 1, message_id="p"
    )
    assert decision.action == "drop"

    # Barriers that fail: one at an agent's poll past the deadline, one by the timer.
    for run in (first, second):
        agent = AgentRef(f"m-{run.id[-6:]}")
        w = store.items.get_item(run.id, f"{run.id}.s0.c0").work_item
        assert service.claim(w, agent=agent, dequeue_count=1, message_id="m").action == "run"
        assert service.ready(run.id, w.item_id, agent).status == "wait"
    clock.offset = 31
    assert (
        service.barrier(first.id, f"{first.id}.s0.c0", AgentRef(f"m-{first.id[-6:]}")).status
        == "abort"
    )
    service.timer.expire_barrier(store.items.get_step(second.id, 0))
    clock.offset = 0

    # Agents of the pool: two heard from just now, one silent for an hour (gone).
    now_ms = int(time.time() * 1000)
    for name, seen in (("m-a", now_ms), ("m-b", now_ms - 500), ("m-gone", now_ms - 3_600_000)):
        store.agents.create(record(f"{pool}-{name}", pool, seen))

    time.sleep(1.0)  # the oldest message has waited at least this long
    src = Sources((pool,), queues, store, lambda: store.agents.all())
    OperatorMetrics(lambda: read(src)).register(provider.get_meter("t"))
    points = collect(reader)
    elapsed = time.time() - sent_at

    assert points[("bench.queue.messages", (("pool", pool), ("queue", "work")))] == 4
    assert queues.approximate_count(work_queue_name(pool)) == 4
    assert points[("bench.queue.messages", (("pool", pool), ("queue", "poison")))] == 1
    assert len(queues.peek_raw(poison_queue_name(pool))) == 1
    oldest = points[("bench.queue.oldest_age", (("pool", pool),))]
    assert 1.0 <= oldest <= elapsed + 1.0  # the queue's clock is whole seconds
    assert points[("bench.poison.messages", (("pool", pool),))] == 1
    assert points[("bench.barrier.failures", ())] == 2
    assert points[("bench.agents.live", (("pool", pool),))] == 2
    runs_gauge = {dict(k[1])["state"]: v for k, v in points.items() if k[0] == "bench.runs"}
    assert set(runs_gauge) == {s.value for s in RunState}
    # Runs by state against a count of our own (every run's state, counted here), read
    # between two such counts that agree: the session's other runs may be moving on.
    runs = store.container("runs")
    for _ in range(10):
        before = Counter(d["state"] for d in runs.query("SELECT c.state FROM c", []))
        counted = read(src).runs
        after = Counter(d["state"] for d in runs.query("SELECT c.state FROM c", []))
        if before == after:
            break
    assert before == after
    assert {s: n for s, n in counted.items() if n} == dict(before)
    assert dict(before)["failed"] >= 2  # the two runs whose barriers failed
    # The session API's timers record their complete ticks every 5 s (core/runs/timer.py).
    for timer in ("runs", "schedules"):
        assert 0 <= points[("bench.timer.last_tick_age", (("timer", timer),))] < 30
