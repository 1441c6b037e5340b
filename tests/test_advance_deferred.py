"""An item's end whose run cannot be advanced at once (a backing service fails the advance:
the aggregation's writes during a Cosmos DB or Blob Storage restart) makes the run due now,
so the timer's next tick finishes it, and the report that ended the item succeeds
(core.runs.timer.advance_or_defer). Before: the agent's result call was answered 503 after
the result was stored and the item completed, and the run stayed running until the step's
expected end plus a minute (the chaos test, under load, timed out waiting for it).
In memory (core.memory), one clock, the aggregates' table failing on demand."""

from __future__ import annotations

from typing import Any

from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.models.holder import AgentRef
from core.models.state import ItemState, RunState
from core.runs.service import RunService
from tests.sim.agents import result_of

POOL = "sim"
WORKLOAD = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2}


class Aggregates:
    """The aggregates' table down (every call fails) until ``up``."""

    def __init__(self) -> None:
        self.down = False

    def __call__(self, op: str, table: str, key: str) -> Effect:
        return "fail" if self.down and table == "aggregates" else "ok"


def service() -> tuple[RunService, MemoryStore, Aggregates, SimClock]:
    clock = SimClock(1_900_000_000.0)
    faults = Aggregates()
    store = MemoryStore(clock, faults)
    queues = MemoryQueues(clock)
    queues.ensure_pool(POOL)
    svc = RunService(
        store,
        queues,
        MemoryArtifacts(),
        clock=clock,
        pools=(POOL,),
        pool_configs=(PoolConfig(name=POOL, size=2),),
    )
    return svc, store, faults, clock


def started(svc: RunService, store: MemoryStore, body: dict[str, Any]) -> str:
    run_id = svc.submit({"pool": POOL, "workload": dict(WORKLOAD), **body})[0].id
    for c in range(body.get("clients", 1)):
        work = store.items.get_item(run_id, f"{run_id}.s0.c{c}").work_item
        agent = AgentRef(f"agent-{c}")
        assert svc.claim(work, agent=agent, dequeue_count=1, message_id=f"m{c}").action == "run"
        svc.ready(run_id, work.item_id, agent)
    return run_id


def test_a_result_stored_while_the_run_cannot_advance_finishes_at_the_next_tick() -> None:
    svc, store, aggregates, clock = service()
    run_id = started(svc, store, {"target": "a"})
    work = store.items.get_item(run_id, f"{run_id}.s0.c0").work_item
    aggregates.down = True
    # The result call succeeds: the result is stored and the item completed.
    assert svc.store_result(result_of(work, "agent-0"), AgentRef("agent-0")) is True
    assert store.items.get_item(run_id, work.item_id).state == ItemState.COMPLETED
    run = store.runs.get(run_id)
    assert run.state == RunState.RUNNING and run.due_ms is not None
    assert run.due_ms <= int(clock() * 1000)  # due now, not at the step's end plus a minute
    svc.tick()  # still down: the tick tries, and the run stays due
    assert store.runs.get(run_id).state == RunState.RUNNING
    aggregates.down = False
    clock.advance(0.5)
    svc.tick()
    assert store.runs.get(run_id).state == RunState.COMPLETED


def test_a_claim_that_fails_a_lost_client_while_the_run_cannot_advance_is_answered() -> None:
    """The chaos test's other item: the killed client's message comes back, the claim fails
    its item (a client of a started 2-client step) and the survivor's result is in."""
    svc, store, aggregates, clock = service()
    run_id = started(svc, store, {"target": "a", "clients": 2})
    clock.advance(1)
    survivor = store.items.get_item(run_id, f"{run_id}.s0.c1").work_item
    assert svc.store_result(result_of(survivor, "agent-1"), AgentRef("agent-1")) is True
    lost = store.items.get_item(run_id, f"{run_id}.s0.c0").work_item
    aggregates.down = True
    taken = svc.claim(lost, agent=AgentRef("agent-2"), dequeue_count=2, message_id="m0")
    assert taken.action == "drop" and "stopped renewing" in taken.reason
    run = store.runs.get(run_id)
    assert run.state == RunState.RUNNING and run.due_ms is not None
    assert run.due_ms <= int(clock() * 1000)
    aggregates.down = False
    clock.advance(0.5)
    svc.tick()
    run = store.runs.get(run_id)
    assert run.state == RunState.FAILED and "stopped renewing" in (run.error or "")
    items = {i.client: i.state for i in store.items.of_run(run_id)[1]}
    assert items == {0: ItemState.FAILED, 1: ItemState.COMPLETED}
