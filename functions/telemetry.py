"""The API's telemetry: its traces (FastAPI's server spans, the core's spans of each run)
and the metrics an operator watches, exported where adapters/telemetry.py says (Azure
Monitor in Azure; an OTLP collector or files locally; nowhere when none is configured).

The operator's metrics (docs/operations.md lists them with the alerts worth setting):

- ``bench.queue.messages`` {pool, queue: work|poison}: messages in each queue (approximate);
- ``bench.queue.oldest_age`` {pool} s: how long the oldest visible work message has waited;
- ``bench.runs`` {state}: runs in each state;
- ``bench.agents.live`` {pool}: agents heard from within three heartbeat periods;
- ``bench.timer.last_tick_age`` {timer} s: since each timer's last complete tick;
- ``bench.barrier.failures`` (counter, core.runs.timer.fail_barrier) and ``bench.poison.messages``
  {pool} (counter, adapters/queue.py).

The gauges are read when the meter collects (every 60 s by default), each from one read of
the queues and the database shared by all of them; a read that fails leaves its gauges out
of that collection (logged) and the others still report.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fastapi import FastAPI
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from adapters import telemetry
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, poison_queue_name, work_queue_name
from core.errors import BenchError
from core.models.agents import AgentRecord
from core.models.state import RunState
from core.runs.timer import TIMERS
from functions.context import Services

log = logging.getLogger(__name__)
SERVICE = "benchsvc-api"
# The gauges' names (bicep/modules/alerts.bicep queries the first two).
QUEUE_MESSAGES = "bench.queue.messages"
TICK_AGE = "bench.timer.last_tick_age"
OLDEST_AGE = "bench.queue.oldest_age"
RUNS = "bench.runs"
AGENTS_LIVE = "bench.agents.live"
# Polled many times a second per agent: their spans would drown each run's trace (the
# agent's own "barrier wait" span covers the polls).
UNTRACED_PATHS = ("api/agent/heartbeat", "api/agent/register", "api/agent/barrier", "api/health")
READINGS_TTL_S = 10.0  # one read serves every gauge of a collection
_configured: list[str] = []


@dataclass
class Readings:
    queue_messages: dict[tuple[str, str], int] = field(default_factory=dict)
    oldest_age_s: dict[str, float] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    agents_live: dict[str, int] = field(default_factory=dict)
    tick_age_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Sources:
    """Where the gauges read from (the API's own connections; a test's)."""

    pools: tuple[str, ...]
    queues: WorkQueues
    store: CosmosStore
    agents: Callable[[], list[AgentRecord]]  # the registry


def sources(parts: Services) -> Sources:
    return Sources(
        parts.settings.pools,
        parts.queues,
        parts.store,
        lambda: parts.service.fleet.records(),
    )


def read(src: Sources) -> Readings:
    """Everything the gauges report, each part read on its own (crash-only)."""
    out = Readings()
    now = time.time()
    pools, queues, store = src.pools, src.queues, src.store

    def part(what: str, read_part: Callable[[], None]) -> None:
        try:
            read_part()
        except (BenchError, OSError, ValueError, RuntimeError) as e:
            log.warning("metrics: cannot read %s: %s", what, e)

    for pool in pools:

        def depth(pool: str = pool) -> None:
            out.queue_messages[(pool, "work")] = queues.approximate_count(work_queue_name(pool))
            out.queue_messages[(pool, "poison")] = queues.approximate_count(poison_queue_name(pool))
            oldest = queues.oldest(work_queue_name(pool))
            out.oldest_age_s[pool] = 0.0 if oldest is None else max(0.0, now - oldest)

        part(f"the queues of pool {pool}", depth)

    def runs() -> None:
        for state in RunState:
            out.runs[state.value] = store.count("runs", "c.state = @v", state.value)

    def agents() -> None:
        now_ms = int(now * 1000)
        records = src.agents()
        for pool in pools:
            out.agents_live[pool] = sum(1 for r in records if r.pool == pool and r.live(now_ms))

    def ticks() -> None:
        for name in TIMERS:
            last = store.ticks.get(name)
            if last is not None:
                out.tick_age_s[name] = max(0.0, now - last / 1000)

    part("the runs", runs)
    part("the agent registry", agents)
    part("the timers' ticks", ticks)
    return out


class OperatorMetrics:
    """The observable gauges, over one cached reading per collection."""

    def __init__(self, read_all: Callable[[], Readings]) -> None:
        self._read = read_all
        self._lock = threading.Lock()
        self._at = 0.0
        self._last = Readings()

    def readings(self) -> Readings:
        with self._lock:
            if time.monotonic() - self._at > READINGS_TTL_S:
                self._last = self._read()
                self._at = time.monotonic()
            return self._last

    def register(self, meter: metrics.Meter) -> None:
        def gauge(
            name: str,
            unit: str,
            description: str,
            observe: Callable[[Readings], Iterable[Observation]],
        ) -> None:
            def callback(_: CallbackOptions) -> Iterable[Observation]:
                return list(observe(self.readings()))

            meter.create_observable_gauge(name, [callback], unit=unit, description=description)

        gauge(
            QUEUE_MESSAGES,
            "{message}",
            "messages in each pool's work and poison queue (approximate)",
            lambda r: (
                Observation(n, {"pool": p, "queue": q}) for (p, q), n in r.queue_messages.items()
            ),
        )
        gauge(
            OLDEST_AGE,
            "s",
            "how long the oldest visible message of each pool's work queue has waited",
            lambda r: (Observation(a, {"pool": p}) for p, a in r.oldest_age_s.items()),
        )
        gauge(
            RUNS,
            "{run}",
            "runs in each state",
            lambda r: (Observation(n, {"state": s}) for s, n in r.runs.items()),
        )
        gauge(
            AGENTS_LIVE,
            "{agent}",
            "agents of each pool heard from within three heartbeat periods",
            lambda r: (Observation(n, {"pool": p}) for p, n in r.agents_live.items()),
        )
        gauge(
            TICK_AGE,
            "s",
            "seconds since each timer's last complete tick",
            lambda r: (Observation(a, {"timer": t}) for t, a in r.tick_age_s.items()),
        )


def instrument(app: FastAPI, parts: Callable[[], Services]) -> None:
    """Once per process: the exporters, FastAPI's server spans and the operator's gauges.
    Nothing at all when no destination is configured. The gauges read ``parts()``."""
    if _configured:
        return
    chosen = telemetry.setup(SERVICE, f"{socket.gethostname()}-{os.getpid()}")
    _configured.append(chosen or "none")
    if chosen is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app, excluded_urls=",".join(UNTRACED_PATHS), exclude_spans=["receive", "send"]
    )
    OperatorMetrics(lambda: read(sources(parts()))).register(metrics.get_meter(telemetry.SCOPE))
    log.info("telemetry: %s", chosen)
