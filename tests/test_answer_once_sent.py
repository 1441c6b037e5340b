"""A new run is answered once its first step's messages are all out, not after the writes
that record the send (the step marked sent, the run's outbox closed): those follow the
answer in the intake's thread (functions/runs_api.py, issue 29.3). Enqueued at the answer
as before (tests/test_api.py), nothing lost: the step is marked sent after. A run that waits
in line is still answered with its place in line.

The handler itself, called as FastAPI calls it, on the in-memory store with the real clock;
the store's fault hook holds the first write after the sends back."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from fastapi import Response

from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore
from core.memory.queue import work_queue_name
from core.models.state import DeliveryState
from core.models.views import RunAccepted
from core.runs.guardrails import LOCAL_CALLER
from core.runs.service import RunService
from functions.runs_api import create_run

POOL = "sim"
CLIENTS = 4
HOLD_S = 2.0


def body(target: str) -> dict[str, Any]:
    return {
        "pool": POOL,
        "target": target,
        "clients": CLIENTS,
        "workload": {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2},
    }


class HoldAfterSends:
    """Holds the first write to the store once every message is out, HOLD_S."""

    def __init__(self) -> None:
        self.queues: MemoryQueues | None = None
        self.held = False
        self.lock = threading.Lock()

    def __call__(self, op: str, table: str, key: str) -> Effect:
        if op in ("create", "replace", "upsert", "delete") and self.queues is not None:
            with self.lock:
                hold = not self.held and self.queued() == CLIENTS
                self.held = self.held or hold
            if hold:
                time.sleep(HOLD_S)
        return "ok"

    def queued(self) -> int:
        assert self.queues is not None
        return len(self.queues.queues.get(work_queue_name(POOL), []))


def service(hook: HoldAfterSends) -> RunService:
    queues = MemoryQueues(time.time)
    queues.ensure_pool(POOL)
    hook.queues = queues
    return RunService(
        MemoryStore(time.time, hook),
        queues,
        MemoryArtifacts(),
        clock=time.time,
        pools=(POOL,),
        pool_configs=(PoolConfig(name=POOL, size=CLIENTS),),
    )


def post(
    svc: RunService, hook: HoldAfterSends, target: str
) -> tuple[RunAccepted, Response, float, int]:
    """The handler's answer, its response, how long it took to answer (not how long the
    event loop took to close: asyncio.run waits for the intake's thread) and how many
    messages were on the queue then."""
    response = Response()
    seen: list[tuple[float, int]] = []

    async def call() -> RunAccepted:
        started = time.monotonic()
        accepted = await create_run(
            body=body(target), svc=svc, caller=LOCAL_CALLER, response=response
        )
        seen.append((time.monotonic() - started, hook.queued()))
        return accepted

    accepted = asyncio.run(call())
    return accepted, response, *seen[0]


def test_a_run_is_answered_enqueued_before_the_send_is_recorded() -> None:
    hook = HoldAfterSends()
    svc = service(hook)
    accepted, response, took, queued = post(svc, hook, "a")
    assert (response.status_code, accepted.state) == (202, "queued")
    assert queued == CLIENTS  # enqueued at the answer
    assert hook.held and took < HOLD_S, took  # not after the writes that follow the sends
    # asyncio.run returned once the intake's thread had ended: the send recorded, once.
    run = svc.store.runs.get(accepted.id)
    assert run.accepted is True and run.delivery.state == DeliveryState.SENT
    assert svc.store.items.get_step(accepted.id, 0).enqueued
    assert hook.queued() == CLIENTS


def test_a_run_that_waits_in_line_is_answered_with_its_place() -> None:
    hook = HoldAfterSends()
    svc = service(hook)
    first, _, _, _ = post(svc, hook, "a")
    second, response, _, queued = post(svc, hook, "a")  # the target is the first run's
    assert response.status_code == 202
    assert (second.state, second.queue_position) == ("waiting", 1)
    assert queued == CLIENTS  # the first run's only
    assert first.id != second.id
