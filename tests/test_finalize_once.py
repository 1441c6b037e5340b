"""A finished run is aggregated once (core.runs.finalizing): at 1,000 simulated clients the
last results' requests and the timer each aggregated the run, reading every timeline three
times over (3,000 blob reads, 36 s from the last result to ``completed`` on 2 loaded
cores). On the in-memory store (core.memory): a caller that advances the run while another
aggregates it leaves it; a finalizer that fails gives the lease back and the timer's next
tick finalizes; one that died is taken over once its lease lapses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.errors import StoreUnavailable
from core.models.state import RunState
from core.runs import finalize
from core.runs.finalizing import FINALIZE_LEASE_MS
from tests.test_thousand_clients import World

pytestmark = pytest.mark.unit
CLIENTS = 6


class Killed(BaseException):
    """The API process died while it aggregated: nothing in the service catches it."""


def finished_but_the_last_result(world: World) -> Callable[[], bool]:
    """Run every client of one run to its result, all but the last one's stored; returns
    the call that stores it (and so advances the run to its finalize)."""
    _, start = world.started_and_measured()
    results = world.uploaded_results(start)
    for result, agent in results[:-1]:
        assert world.service.store_result(result.model_dump(mode="json"), agent)
    last, agent = results[-1]
    return lambda: world.service.store_result(last.model_dump(mode="json"), agent)


def counting_aggregations(
    monkeypatch: pytest.MonkeyPatch, during: Callable[[int], None]
) -> list[int]:
    """Every aggregation of a run; ``during(n)`` runs inside the n-th (from 1)."""
    calls: list[int] = []
    aggregate = finalize.aggregate_and_judge

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(len(calls) + 1)
        during(len(calls))
        return aggregate(*args, **kw)

    monkeypatch.setattr(finalize, "aggregate_and_judge", counted)
    return calls


def test_a_caller_that_finds_the_run_being_finalized_leaves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the last result's request aggregates, another API instance's request and the
    timer advance the run: before, each aggregated it again."""
    world = World(CLIENTS)
    store_last = finished_but_the_last_result(world)
    run_id = world.claimed[0][0].run_id

    def others(n: int) -> None:
        if n == 1:
            world.service.lifecycle.advance(run_id)
            world.service.tick()

    calls = counting_aggregations(monkeypatch, others)
    store_last()
    assert calls == [1]
    run = world.store.runs.get(run_id)
    assert run.state == RunState.COMPLETED and run.finalized


def test_a_finalizer_that_fails_gives_the_run_back_to_the_next_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = World(CLIENTS)
    store_last = finished_but_the_last_result(world)
    run_id = world.claimed[0][0].run_id

    def fail_first(n: int) -> None:
        if n == 1:
            raise StoreUnavailable("Blob Storage is unavailable", "Blob Storage")

    calls = counting_aggregations(monkeypatch, fail_first)
    store_last()  # stored; the advance failed and left the run due now
    assert world.store.runs.get(run_id).state != RunState.COMPLETED
    world.clock.advance(1)
    world.service.tick()
    assert calls == [1, 2]
    assert world.store.runs.get(run_id).state == RunState.COMPLETED


def test_a_finalizer_that_died_is_taken_over_once_its_lease_lapses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = World(CLIENTS)
    store_last = finished_but_the_last_result(world)
    run_id = world.claimed[0][0].run_id

    def die_first(n: int) -> None:
        if n == 1:
            raise Killed

    calls = counting_aggregations(monkeypatch, die_first)
    with pytest.raises(Killed):
        store_last()
    for _ in range(3):  # the timer ticks while the dead finalizer's lease holds
        world.clock.advance(FINALIZE_LEASE_MS / 1000 / 4)
        world.service.tick()
    assert calls == [1]
    world.clock.advance(FINALIZE_LEASE_MS / 1000 / 4 + 1)
    world.service.tick()
    assert calls == [1, 2]
    assert world.store.runs.get(run_id).state == RunState.COMPLETED
