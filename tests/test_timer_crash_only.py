"""The timer is crash-only (issue 24.1): one run, step or delivery that fails does not stop
the others. Through the Cosmos DB stand-in, Azurite and the core services, with a clock
the test moves (the session API's own timer, on the real clock, never gets that far)."""

from __future__ import annotations

import logging

import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.holder import AgentRef
from core.models.state import ItemState, RunState
from core.runs.lifecycle import Lifecycle
from core.runs.service import RunService
from core.runs.timer import INTERNAL_ERROR_ATTEMPTS
from tests.conftest import Clock, result_from_capture, run_body

MAX_DELIVERIES = 2


class Died(BaseException):
    """The API process died in the middle of a call (nothing in the service catches it, as
    nothing catches a SIGKILL; an outage, StoreUnavailable, only defers the advance to the
    timer's next tick: core.runs.timer.advance_or_defer)."""


def service_on(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts
) -> tuple[RunService, Clock]:
    clock = Clock()
    service = RunService(
        store,
        queues,
        artifacts,
        pools=tuple(stack.pool_names),
        clock=clock,
        max_deliveries=MAX_DELIVERIES,
    )
    return service, clock


def test_a_poisoned_lone_client_does_not_stop_the_timer_for_the_other_runs(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reported sequence: a one-client run fails retryably on every delivery after its
    start and goes to the poison queue. Its step was left with a deadline and no claim
    (Step.reopen); once that deadline passed, every tick raised before reaching the other
    runs: a run whose only item had completed stayed running and held its target, with a
    run waiting behind it."""
    service, clock = service_on(stack, store, queues, artifacts)
    agent = AgentRef(f"crash-{pool}")

    # Run A: every delivery fails after the start, until the poison queue takes it.
    a = service.submit(run_body(pool))[0].id
    work = store.items.get_item(a, f"{a}.s0.c0").work_item
    for delivery in range(1, MAX_DELIVERIES + 1):
        taken = service.claim(work, agent=agent, dequeue_count=delivery, message_id="ma")
        assert taken.action == "run"
        assert service.ready(a, work.item_id, agent).status == "go"
        assert service.report_failure(a, work.item_id, agent, "[Errno 28] No space") is False
    poisoned = service.claim(work, agent=agent, dequeue_count=MAX_DELIVERIES + 1, message_id="ma")
    assert poisoned.action == "drop" and "poison" in poisoned.reason
    assert store.runs.get(a).state == RunState.FAILED
    step = store.items.get_step(a, 0)
    # The cause: a barrier with no claim has no deadline.
    assert (step.first_claim_ms, step.deadline_ms) == (None, None)

    # Run B on another target: its only item completed, but the advance that should have
    # followed did not happen (the API died in between): the timer must finish it.
    b_body = {**run_body(pool), "target": "other"}
    b = service.submit(b_body)[0].id
    b_work = store.items.get_item(b, f"{b}.s0.c0").work_item
    assert service.claim(b_work, agent=agent, dequeue_count=1, message_id="mb").action == "run"
    assert service.ready(b, b_work.item_id, agent).status == "go"
    advance = service.lifecycle.advance

    def crash(run_id: str) -> object:
        raise Died("the API died here")

    monkeypatch.setattr(service.lifecycle, "advance", crash)
    with pytest.raises(Died):
        service.store_result(result_from_capture(b_work, agent.id), agent)
    monkeypatch.setattr(service.lifecycle, "advance", advance)
    assert store.items.get_item(b, b_work.item_id).state == ItemState.COMPLETED
    assert store.runs.get(b).state == RunState.RUNNING
    # Run C waits for B's target.
    c = service.submit(b_body)[0]
    assert c.state == RunState.WAITING

    # Past A's old barrier deadline and B's due time.
    clock.offset = 24 * 3600
    finalized = service.tick()
    assert b in finalized
    assert store.runs.get(b).state == RunState.COMPLETED
    assert store.runs.get(c.id).state == RunState.QUEUED  # admitted, B's target freed
    run_a = store.runs.get(a)
    assert run_a.state == RunState.FAILED and "poison" in (run_a.error or "")
    service.cancel(c.id)


def test_a_step_left_with_a_deadline_and_no_claim_is_repaired_not_failed(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    """Documents written before the fix keep their stray deadline: the timer clears it."""
    service, clock = service_on(stack, store, queues, artifacts)
    a = service.submit(run_body(pool))[0].id
    step = store.items.get_step(a, 0)
    step.deadline_ms = service.lifecycle.now_ms() + 1_000
    store.items.replace_step(step)
    clock.offset = 3600
    service.tick()
    step = store.items.get_step(a, 0)
    assert (step.deadline_ms, step.failed_reason) == (None, None)
    assert store.runs.get(a).state == RunState.QUEUED
    service.cancel(a)


def test_a_run_that_keeps_crashing_the_timer_fails_alone_with_an_internal_error(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, clock = service_on(stack, store, queues, artifacts)
    agent = AgentRef(f"crash2-{pool}")
    bad = service.submit(run_body(pool))[0].id
    good = service.submit({**run_body(pool), "target": "other"})[0].id
    for run_id in (bad, good):
        work = store.items.get_item(run_id, f"{run_id}.s0.c0").work_item
        assert service.claim(work, agent=agent, dequeue_count=1, message_id=run_id).action == "run"
        assert service.ready(run_id, work.item_id, agent).status == "go"
    waiting = service.submit(run_body(pool))[0].id  # behind the bad run, on its target

    advance = Lifecycle.advance

    def buggy(self: Lifecycle, run_id: str) -> object:
        if run_id == bad:
            raise KeyError("a bug in this run's advance")
        return advance(self, run_id)

    monkeypatch.setattr(Lifecycle, "advance", buggy)
    clock.offset = 24 * 3600  # both runs are due: "still running?"
    caplog.set_level(logging.ERROR, logger="core.runs.timer")
    for attempt in range(1, INTERNAL_ERROR_ATTEMPTS + 1):
        service.tick()  # never raises
        run = store.runs.get(bad)
        assert run.internal_errors == attempt
        if attempt < INTERNAL_ERROR_ATTEMPTS:
            assert run.state == RunState.RUNNING
        # The good run was looked at every tick (still running: due again 30 s later).
        clock.offset += 31
    assert any(bad in r.getMessage() for r in caplog.records)
    run = store.runs.get(bad)
    assert run.state == RunState.FAILED and run.finished
    assert (run.error or "").startswith("internal error: ")
    assert "KeyError" in (run.error or "")
    item = store.items.get_item(bad, f"{bad}.s0.c0")
    assert item.state == ItemState.FAILED and item.reason == run.error
    # Its target went to the run waiting for it; the good run went on as usual.
    assert store.runs.get(waiting).state == RunState.QUEUED
    assert store.runs.get(good).state == RunState.RUNNING
    service.cancel(good)
    service.cancel(waiting)
