"""Every step is sent the same way (issue 28.3, core.runs.delivery): a queue out of reach is
tried again with backoff, and 10 min after the first failed attempt the step fails with the
reason, its items with it, and the run fails, freeing its target. Before, a later step was
retried every second for ever: a run hung, running, with nothing said.

On the in-memory ports (core.memory, kept equal to the adapters by
tests/test_ports_contract.py) with the simulation's clock, a queue paused as in tests/sim,
and a simulated agent doing what agent/worker.py does."""

from __future__ import annotations

from typing import Any

from core.models.state import DeliveryState, ItemState, RunState
from core.runs.admission import holder_done
from core.runs.delivery import DELIVERY_DEADLINE_MS
from tests.sim.agents import SimAgent
from tests.sim.world import POOL, World

RUNTIME_S = 2
WORKLOAD = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": RUNTIME_S}
TICK_S = 30
REASON = "the queue service could not be reached for 10 min: "


def body(clients: Any) -> dict[str, Any]:
    return {
        "pool": POOL,
        "target": "c",
        "clients": clients,
        "barrier_timeout_s": 5,
        "workload": WORKLOAD,
    }


def run_first_step(w: World, run_id: str) -> None:
    """One agent takes step 0's item and gets to the start; the queue dies; its result is
    stored (the call that ends step 0 and sends step 1)."""
    agent = SimAgent("agent-1")
    for _ in range(20):
        agent.step(w, 0, None, 3)
        if agent.phase == "go":
            break
        w.clock.advance(1)
    assert agent.phase == "go"
    w.faults.queue_paused = True
    w.clock.advance(RUNTIME_S + 1)
    while agent.work is not None:
        agent.step(w, 0, None, 3)  # 3: its item ends with a result
    assert w.store.items.get_item(run_id, f"{run_id}.s0.c0").state == ItemState.COMPLETED


def tick_for(w: World, seconds: float) -> None:
    end = w.clock() + seconds
    while w.clock() < end:
        w.clock.advance(TICK_S)
        w.apis[0].tick()


def test_a_later_step_the_queue_never_takes_fails_the_run_with_the_reason() -> None:
    w = World()
    run_id = w.apis[0].submit(body([1, 2]))[0]["id"]
    run_first_step(w, run_id)
    run = w.store.runs.get(run_id)
    assert run.state == RunState.RUNNING and run.delivery.last_error is not None
    assert not w.store.items.get_step(run_id, 1).enqueued

    # Tried again with backoff, the run still running and saying why it waits.
    tick_for(w, DELIVERY_DEADLINE_MS / 1000 - 2 * TICK_S)
    run = w.store.runs.get(run_id)
    assert run.state == RunState.RUNNING and not run.finished
    assert run.delivery.attempts >= 10, run.delivery
    assert "queue" in (run.delivery.last_error or "")

    tick_for(w, 3 * TICK_S)
    run = w.store.runs.get(run_id)
    assert run.state == RunState.FAILED and run.finished
    assert (run.error or "").startswith(REASON), run.error
    step = w.store.items.get_step(run_id, 1)
    assert step.failed_reason == run.error
    items = [i for i in w.store.items.of_run(run_id)[1] if i.step == 1]
    assert len(items) == 2  # created before the send failed: they fail with their step
    assert all(i.state == ItemState.FAILED and i.reason == run.error for i in items)
    # The step that ran keeps its aggregate; nothing more is due; the target is free.
    assert (run_id, f"{run_id}.s0") in w.store.table["aggregates"].docs
    assert run.due_ms is None
    assert holder_done(run)
    w.resume()
    second = w.apis[0].submit(body(1))[0]
    assert second["state"] == RunState.QUEUED


def test_the_first_step_fails_the_same_way_its_delivery_with_it() -> None:
    w = World()
    w.faults.queue_paused = True
    run_id = w.apis[0].submit(body(1))[0]["id"]
    run = w.store.runs.get(run_id)
    assert run.delivery.state == DeliveryState.PENDING and run.delivery.attempts == 1
    tick_for(w, DELIVERY_DEADLINE_MS / 1000 + TICK_S)
    run = w.store.runs.get(run_id)
    assert (run.state, run.delivery.state, run.finished) == (
        RunState.FAILED,
        DeliveryState.FAILED,
        True,
    )
    assert (run.error or "").startswith(REASON), run.error
    assert w.store.items.get_step(run_id, 0).failed_reason == run.error
    item = w.store.items.get_item(run_id, f"{run_id}.s0.c0")
    assert (item.state, item.reason) == (ItemState.FAILED, run.error)
    assert run.due_ms is None and holder_done(run)


def test_a_queue_back_before_the_deadline_sends_the_step_and_clears_the_record() -> None:
    w = World()
    run_id = w.apis[0].submit(body([1, 2]))[0]["id"]
    run_first_step(w, run_id)
    tick_for(w, 5 * 60)
    w.resume()
    tick_for(w, TICK_S)
    run = w.store.runs.get(run_id)
    assert w.store.items.get_step(run_id, 1).enqueued
    assert run.state == RunState.RUNNING and run.delivery.last_error is None
    # The next step's failures get a deadline of their own (not this one's, 5 min old).
    assert run.error is None
