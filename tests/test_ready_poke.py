"""The API process whose ready report sets a step's start instant wakes the barrier calls it
holds for that step at once (functions/agent_api.py pokes its watch, issue 29.3): they do
not wait for the watch's next read of the step. The watch's interval is stretched to 30 s
here, so only the poke can answer a held call within the test's second.

The route handlers are called as FastAPI calls them, on one event loop, over the in-memory
store (core.memory)."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.models import WorkItem
from core.models.holder import AgentRef
from core.runs.guardrails import Caller
from functions import agent_api
from functions.agent_api import BarrierBody, ReadyBody, barrier, ready
from tests.test_report_calls import POOL, WORKLOAD, counted

pytestmark = pytest.mark.unit
LOCAL = Caller(name="local", role="admin")


def test_the_report_that_sets_the_instant_answers_the_calls_held_here_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_api, "WATCH_MS", 30_000)
    c = counted(2)
    svc = c.service
    run, _ = svc.submit({"pool": POOL, "target": "a", "clients": 2, "workload": WORKLOAD})
    items = []
    for i in range(2):
        msg = c.queues.receive(POOL, 600)
        assert msg is not None
        w = WorkItem.model_validate_json(msg.content)
        agent = AgentRef(f"agent-{i}")
        assert svc.claim(w, agent=agent, dequeue_count=1, message_id=msg.id).action == "run"
        items.append((w.item_id, agent.id))
    (first, first_agent), (last, last_agent) = items

    async def step() -> tuple[dict[str, object], dict[str, object], float]:
        held_ready = ReadyBody(
            run_id=run.id, item_id=first, agent_id=first_agent, rtt_ms=20, barrier_wait=True
        )
        assert (await ready(held_ready, svc, LOCAL)).status == "wait"
        held = asyncio.create_task(
            barrier(
                BarrierBody(run_id=run.id, item_id=first, agent_id=first_agent, wait_ms=5_000),
                svc,
                LOCAL,
            )
        )
        await asyncio.sleep(0.3)  # held: its watch read the step once, and sleeps 30 s
        assert not held.done()
        last_ready = ReadyBody(
            run_id=run.id, item_id=last, agent_id=last_agent, rtt_ms=20, barrier_wait=True
        )
        go = await ready(last_ready, svc, LOCAL)
        set_at = time.monotonic()
        answer = await asyncio.wait_for(held, 5)
        return go.model_dump(), answer.model_dump(), time.monotonic() - set_at

    go, answer, took_s = asyncio.run(step())
    assert go["status"] == "go" and go["start_at_ms"] is not None
    assert answer["status"] == "go" and answer["start_at_ms"] == go["start_at_ms"]
    assert took_s < 1.0, f"the held call heard it {took_s:.2f} s after the instant was set"
