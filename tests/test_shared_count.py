"""The step's open-items count shared by the results that end meanwhile (core.runs.shared_count):
at 1,000 clients each result scanned the run's partition once (issue 29's results' burst).
A caller's count must still see its own write, the last result must still advance the run,
and only one member of a round acts on its answer."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from core.models.state import RunState
from core.runs import finalize
from core.runs.shared_count import SharedCount
from tests.test_thousand_clients import World

pytestmark = pytest.mark.unit


def _constant(n: int) -> Callable[[], int]:
    return lambda: n


def test_a_caller_alone_runs_its_own_count_every_time() -> None:
    shared: SharedCount[str, int] = SharedCount()
    answers = [shared.ask("s", _constant(n)) for n in range(3)]
    assert answers == [(0, True), (1, True), (2, True)]
    assert shared.rounds == 3


def test_callers_during_a_count_share_the_next_one_which_sees_their_writes() -> None:
    shared: SharedCount[str, int] = SharedCount()
    writes = [0]
    first_runs, release = threading.Event(), threading.Event()

    def count() -> int:
        seen = writes[0]
        if not first_runs.is_set():
            first_runs.set()
            release.wait(5)
        return seen

    answers: dict[str, tuple[int, bool]] = {}

    def caller(name: str) -> None:
        writes[0] += 1  # this caller's write, before it asks
        answers[name] = shared.ask("s", count)

    first = threading.Thread(target=caller, args=("first",))
    first.start()
    assert first_runs.wait(5)
    joiners = [threading.Thread(target=caller, args=(f"j{i}",)) for i in range(5)]
    for t in joiners:
        t.start()
    time.sleep(0.1)  # every joiner waits on the running count
    assert shared.rounds == 1
    release.set()
    for t in [first, *joiners]:
        t.join(5)
    assert answers["first"] == (1, True)  # the running count saw only the first write
    joined = [answers[f"j{i}"] for i in range(5)]
    assert {value for value, _ in joined} == {6}  # the next round saw every joiner's write
    assert sum(ran for _, ran in joined) == 1  # one of them ran it and acts on it
    assert shared.rounds == 2


def test_a_failed_count_raises_in_each_member_and_the_next_round_runs_afresh() -> None:
    shared: SharedCount[str, int] = SharedCount()
    running, release = threading.Event(), threading.Event()

    def blocked() -> int:
        running.set()
        release.wait(5)
        return 0

    def failing() -> int:
        raise ConnectionError("the database went away")

    raised: list[str] = []

    def member(fn: Callable[[], int]) -> None:
        try:
            shared.ask("s", fn)
        except ConnectionError:
            raised.append("raised")

    holder = threading.Thread(target=shared.ask, args=("s", blocked))
    holder.start()
    assert running.wait(5)
    members = [threading.Thread(target=member, args=(failing,)) for _ in range(3)]
    for t in members:
        t.start()
    time.sleep(0.1)
    release.set()
    for t in [holder, *members]:
        t.join(5)
    assert raised == ["raised"] * 3
    assert shared.ask("s", lambda: 7) == (7, True)


@pytest.mark.parametrize("seed", range(20))
def test_the_last_write_is_always_counted_by_a_round_whose_runner_is_told(seed: int) -> None:
    """Writers racing: whatever the interleaving, some runner sees all of them (the last
    result advances the run), and no answer counts a write made after its round began."""
    rnd = random.Random(seed)
    shared: SharedCount[str, int] = SharedCount()
    lock, writes = threading.Lock(), [0]
    delays = [rnd.uniform(0, 0.004) for _ in range(24)]
    answers: list[tuple[int, int, bool]] = []  # (own write's number, answer, ran)

    def count() -> int:
        with lock:
            seen = writes[0]
        time.sleep(rnd.uniform(0, 0.003))
        return seen

    def writer(delay: float) -> None:
        time.sleep(delay)
        with lock:
            writes[0] += 1
            own = writes[0]
        value, ran = shared.ask("s", count)
        answers.append((own, value, ran))

    threads = [threading.Thread(target=writer, args=(d,)) for d in delays]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(answers) == 24
    assert all(value >= own for own, value, _ in answers)  # each saw its own write
    assert any(ran and value == 24 for _, value, ran in answers)
    assert shared.rounds <= 24


def test_racing_results_advance_the_run_once_with_fewer_counts_than_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six results stored at once on one API process: the run completes, aggregated once,
    and the step's open items were counted fewer times than there were results."""
    world = World(6)
    _, start = world.started_and_measured()
    results = world.uploaded_results(start)
    counts: list[int] = []
    open_items = world.store.items.open_items

    def slow_count(run_id: str, step: int) -> int:
        counts.append(1)
        time.sleep(0.05)  # a count long enough for the other results to end meanwhile
        return open_items(run_id, step)

    monkeypatch.setattr(world.store.items, "open_items", slow_count)
    aggregations: list[int] = []
    aggregate = finalize.aggregate_and_judge

    def counted(*args: Any, **kw: Any) -> Any:
        aggregations.append(1)
        return aggregate(*args, **kw)

    monkeypatch.setattr(finalize, "aggregate_and_judge", counted)
    threads = [
        threading.Thread(target=world.service.store_result, args=(r.model_dump(mode="json"), agent))
        for r, agent in results
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    run_id = results[0][0].run_id
    assert world.store.runs.get(run_id).state == RunState.COMPLETED
    assert aggregations == [1]
    assert 1 <= len(counts) < 6, counts
