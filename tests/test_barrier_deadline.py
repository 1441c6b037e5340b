"""A step's start barrier past its deadline, through the real store and queue: an agent's
poll fails the step and ends only its own item; the lifecycle, the one place where runs move
on, fails the step's other items with the same reason, and the run (issue 14)."""

from __future__ import annotations

import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.holder import AgentRef
from core.models.state import ItemState, RunState
from core.models.stored import Run
from core.runs.service import RunService
from tests.conftest import Clock, run_body

TIMEOUT_S = 30  # the barrier's; this test's clock jumps past it, the API's timer never gets there


def two_client_run(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> tuple[RunService, Clock, str]:
    clock = Clock()
    service = RunService(store, queues, artifacts, pools=tuple(stack.pool_names), clock=clock)
    body = {**run_body(pool), "clients": 2, "barrier_timeout_s": TIMEOUT_S}
    run, _ = service.submit(body)
    return service, clock, run.id


def claim(service: RunService, store: CosmosStore, run_id: str, client: int) -> AgentRef:
    agent = AgentRef(f"deadline-{run_id[-6:]}-{client}")
    work = store.items.get_item(run_id, f"{run_id}.s0.c{client}").work_item
    decision = service.claim(work, agent=agent, dequeue_count=1, message_id=f"m{client}")
    assert decision.action == "run", decision
    return agent


@pytest.mark.parametrize(
    ("other_claims", "reason"),
    [
        (False, f"1 of 2 clients claimed within {TIMEOUT_S} s"),
        (True, f"1 of 2 clients were ready within {TIMEOUT_S} s"),
    ],
)
def test_a_poll_past_the_deadline_ends_its_own_item_and_the_lifecycle_the_others(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
    monkeypatch: pytest.MonkeyPatch,
    other_claims: bool,
    reason: str,
) -> None:
    service, clock, run_id = two_client_run(stack, store, queues, artifacts, pool)
    mine, other = f"{run_id}.s0.c0", f"{run_id}.s0.c1"
    agent = claim(service, store, run_id, 0)
    if other_claims:
        claim(service, store, run_id, 1)  # and never gets ready
    assert service.ready(run_id, mine, agent).status == "wait"
    assert service.barrier(run_id, mine, agent).status == "wait"

    # What the run's items were when the poll handed the run to the lifecycle.
    seen: list[dict[str, ItemState]] = []
    advance = service.lifecycle.advance

    def spy(rid: str) -> Run:
        seen.append({i.id: i.state for i in store.items.of_run(rid)[1]})
        return advance(rid)

    monkeypatch.setattr(service.lifecycle, "advance", spy)
    clock.offset = TIMEOUT_S + 1
    answer = service.barrier(run_id, mine, agent)
    assert (answer.status, answer.reason) == ("abort", reason)

    # The poll changed its own item and its step, nothing else...
    waiting_other = ItemState.CLAIMED if other_claims else ItemState.QUEUED
    assert seen[0] == {mine: ItemState.FAILED, other: waiting_other}
    assert store.items.get_step(run_id, 0).failed_reason == reason
    # ... and the lifecycle failed the other item with the same reason, and the run.
    items = {i.id: i for i in store.items.of_run(run_id)[1]}
    assert {i.state for i in items.values()} == {ItemState.FAILED}
    assert items[mine].reason == items[other].reason == reason
    run = store.runs.get(run_id)
    assert (run.state, run.error, run.finished) == (RunState.FAILED, reason, True)

    # A later poll (or a retry of this one) hears the same.
    again = service.barrier(run_id, mine, agent)
    assert (again.status, again.reason) == ("abort", reason)


def test_the_timer_fails_a_barrier_nobody_polls(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    service, clock, run_id = two_client_run(stack, store, queues, artifacts, pool)
    claim(service, store, run_id, 0)
    clock.offset = TIMEOUT_S + 1
    # What the timer does with each barrier past its deadline (Lifecycle.tick).
    step = service.timer.expire_barrier(store.items.get_step(run_id, 0))
    reason = f"1 of 2 clients claimed within {TIMEOUT_S} s"
    assert step.failed_reason == reason
    items = store.items.of_run(run_id)[1]
    assert [(i.state, i.reason) for i in items] == [(ItemState.FAILED, reason)] * 2
    run = store.runs.get(run_id)
    assert (run.state, run.error) == (RunState.FAILED, reason)


def test_a_barrier_complete_before_the_deadline_is_not_failed_by_the_timer(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    service, clock, run_id = two_client_run(stack, store, queues, artifacts, pool)
    agents = [claim(service, store, run_id, c) for c in (0, 1)]
    assert service.ready(run_id, f"{run_id}.s0.c0", agents[0]).status == "wait"
    go = service.ready(run_id, f"{run_id}.s0.c1", agents[1])
    assert go.status == "go"
    clock.offset = TIMEOUT_S + 1
    # A timer that read the step just before its start instant was set.
    stale = store.items.get_step(run_id, 0).model_copy(update={"start_at_ms": None})
    step = service.timer.expire_barrier(stale)
    assert step.start_at_ms == go.start_at_ms and step.failed_reason is None
    assert {i.state for i in store.items.of_run(run_id)[1]} == {ItemState.READY}
    service.cancel(run_id)
