"""The status a POST is answered with at its deadline says what it committed: 202 for its
own creation, 200 for a replay of another request's (functions/runs_api.py,
core.runs.commit.Answer). A replay that committed its answer and was then held up past the
deadline was answered 202, so one Idempotency-Key was answered 202 twice (a rehearsal of 40
POSTs on 30 keys through 3 instances, under load).

The handler itself, called as FastAPI calls it, on the in-memory store with the real clock
(its deadline is real time); the store's fault hook holds writes of the run back."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from fastapi import Response

from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore
from core.models.ids import run_id_for_key
from core.runs.commit import ANSWER_MS
from core.runs.guardrails import LOCAL_CALLER
from core.runs.service import RunService
from functions.runs_api import create_run

pytestmark = pytest.mark.slow  # waits out the handler's real deadline once

POOL = "sim"
KEY = "answer-status-key"
BODY: dict[str, Any] = {
    "pool": POOL,
    "target": "a",
    "workload": {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2},
}
HOLD_S = ANSWER_MS / 1000 + 1.5  # past the handler's deadline


class HoldRunWrites:
    """Holds the first two writes over the run (its creator's accept, then the replay's)
    for HOLD_S each; says when the first one is reached (the run is stored, not accepted)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.held = 0
        self.stored = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, op: str, table: str, key: str) -> Effect:
        if (op, table, key) == ("replace", "runs", self.run_id):
            with self.lock:
                self.held += 1
                hold = self.held <= 2
            if hold:
                self.stored.set()
                time.sleep(HOLD_S)
        return "ok"


def test_a_replay_held_up_past_the_deadline_is_answered_200_not_202() -> None:
    run_id = run_id_for_key(KEY)
    hook = HoldRunWrites(run_id)
    store = MemoryStore(time.time, hook)
    queues = MemoryQueues(time.time)
    queues.ensure_pool(POOL)
    svc = RunService(
        store,
        queues,
        MemoryArtifacts(),
        clock=time.time,
        pools=(POOL,),
        pool_configs=(PoolConfig(name=POOL, size=2),),
    )
    first: list[tuple[Any, bool]] = []
    creator = threading.Thread(target=lambda: first.append(svc.submit(BODY, KEY)))
    creator.start()
    assert hook.stored.wait(10)  # stored in time; its accept is held
    response = Response()
    started = time.monotonic()
    accepted = asyncio.run(
        create_run(body=BODY, svc=svc, caller=LOCAL_CALLER, response=response, idempotency_key=KEY)
    )
    waited = time.monotonic() - started
    creator.join(30)
    assert accepted.id == run_id
    assert waited >= ANSWER_MS / 1000  # answered at its deadline, with what it committed
    assert response.status_code == 200  # a replay: the run was its creator's
    assert [created for _, created in first] == [True]  # the creator's 202
    assert store.runs.get(run_id).accepted is True
