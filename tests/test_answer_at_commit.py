"""A new run that is admitted is answered at its commit point, not after its first step's
sends (functions/runs_api.py, issue 29.3: at 32 clients the sends and the writes around
them were ~80 % of a POST's time). The sends go on in the intake's thread: nothing is lost.
A run that waits in line is still answered with its place in line.

The handler itself, called as FastAPI calls it, on the in-memory store with the real clock;
the queue's fault hook holds every send back."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from fastapi import Response

from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore
from core.memory.queue import work_queue_name
from core.models.views import RunAccepted
from core.runs.guardrails import LOCAL_CALLER
from core.runs.service import RunService
from functions.runs_api import create_run

POOL = "sim"
CLIENTS = 4
HOLD_S = 0.5  # each send: the step's sends take CLIENTS x this


def body(target: str) -> dict[str, Any]:
    return {
        "pool": POOL,
        "target": target,
        "clients": CLIENTS,
        "workload": {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2},
    }


class SlowSends:
    def __init__(self) -> None:
        self.sent = 0
        self.lock = threading.Lock()

    def __call__(self, op: str, table: str, key: str) -> Effect:
        if (op, table) == ("send", "queue"):
            time.sleep(HOLD_S)
            with self.lock:
                self.sent += 1
        return "ok"


def service(hook: SlowSends) -> tuple[RunService, MemoryQueues]:
    queues = MemoryQueues(time.time, hook)
    queues.ensure_pool(POOL)
    svc = RunService(
        MemoryStore(time.time),
        queues,
        MemoryArtifacts(),
        clock=time.time,
        pools=(POOL,),
        pool_configs=(PoolConfig(name=POOL, size=CLIENTS),),
    )
    return svc, queues


def post(svc: RunService, target: str) -> tuple[RunAccepted, Response, float]:
    """The handler's answer, its response and how long it took to answer (not how long the
    event loop took to close: asyncio.run waits for the intake's thread)."""
    response = Response()
    took: list[float] = []

    async def call() -> RunAccepted:
        started = time.monotonic()
        accepted = await create_run(
            body=body(target), svc=svc, caller=LOCAL_CALLER, response=response
        )
        took.append(time.monotonic() - started)
        return accepted

    return asyncio.run(call()), response, took[0]


def test_an_admitted_run_is_answered_before_its_sends_and_every_item_is_sent() -> None:
    hook = SlowSends()
    svc, queues = service(hook)
    accepted, response, took = post(svc, "a")
    assert response.status_code == 202
    assert accepted.state == "queued"
    # Its CLIENTS sends take CLIENTS * HOLD_S = 2 s; the answer came before the first ended.
    assert took < HOLD_S, took
    # asyncio.run returned once the intake's thread had ended: every item sent, once.
    assert hook.sent == CLIENTS
    assert len(queues.queues[work_queue_name(POOL)]) == CLIENTS
    run = svc.store.runs.get(accepted.id)
    assert run.accepted is True


def test_a_run_that_waits_in_line_is_answered_with_its_place() -> None:
    hook = SlowSends()
    svc, _ = service(hook)
    first, _, _ = post(svc, "a")
    second, response, _ = post(svc, "a")  # the target is the first run's
    assert response.status_code == 202
    assert (second.state, second.queue_position) == ("waiting", 1)
    assert hook.sent == CLIENTS  # the first run's only
    assert first.id != second.id
