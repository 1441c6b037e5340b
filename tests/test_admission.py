"""Pure rules of one-run-at-a-time: lock keys, when a holder is done, who waits ahead."""

from __future__ import annotations

from typing import Any

from core.models.locks import TargetLock, Waiter
from core.models.state import RunState
from core.models.stored import Run
from core.runs.admission import ahead, holder_done, lock_keys, position, run_keys


def run(**fields: Any) -> Run:
    doc: dict[str, Any] = {
        "id": "r-1",
        "created_at": "2031-01-01T00:00:00Z",
        "created_ms": 1,
        "request": {"target": "a", "pool": "q"},
        "workload": {},
        "comparison_key": "k",
        "target": "a",
        "targets": ["a"],
        "pool": "q",
        "step_count": 1,
        "items_total": 1,
        "requested_by": {"name": "t", "role": "admin"},
        "body_hash": "h",
    }
    return Run.model_validate(doc | fields)


def test_keys_are_per_pool_sorted_and_unique() -> None:
    assert lock_keys("p", ["b", "a", "b"]) == ["p:a", "p:b"]
    assert run_keys(run(pool="q", targets=["a"])) == ["q:a"]
    assert lock_keys("p", ["a"]) != lock_keys("q", ["a"])  # same alias, other pool's volume


def test_a_holder_is_done_once_its_io_has_ended() -> None:
    assert holder_done(run(finished=True, state=RunState.RUNNING))
    assert holder_done(run(state=RunState.FAILED)) and holder_done(run(state=RunState.COMPLETED))
    assert not holder_done(run(state=RunState.RUNNING, admitted=True))
    assert not holder_done(run(state=RunState.QUEUED))
    # Cancelled, but an agent still holds an item (fio stops at its next heartbeat): the
    # run is finished only once every item has ended.
    assert not holder_done(run(state=RunState.CANCELLED, cancel_requested=True, finished=False))
    assert holder_done(run(state=RunState.CANCELLED, cancel_requested=True, finished=True))
    # Holding locks but not yet marked admitted: it is being admitted, not done.
    assert not holder_done(run(state=RunState.WAITING, admitted=False))


def w(run_id: str, created_ms: int) -> Waiter:
    return Waiter(run_id=run_id, created_ms=created_ms)


def test_waiting_runs_go_in_submission_order_and_crossed_targets_cannot_deadlock() -> None:
    """r1 waits for a and b, r2 for b and a, r3 for c, r4 for a. Every target's queue is in
    submission order, whatever order the runs joined them in: r1 is first on both a and
    b, so r2 (which shares them) can never hold one while r1 holds the other."""
    ab, ba, c, a_again = w("r1", 1), w("r2", 2), w("r3", 3), w("r4", 4)
    lock_a = TargetLock(id="p:a", queue=sorted([a_again, ba, ab], key=lambda x: x.order))
    lock_b = TargetLock(id="p:b", queue=sorted([ba, ab], key=lambda x: x.order))
    lock_c = TargetLock(id="p:c", queue=[c])
    assert [x.run_id for x in lock_a.queue] == ["r1", "r2", "r4"]
    assert [x.run_id for x in lock_b.queue] == ["r1", "r2"]
    assert ahead(lock_a, ab) == [] and ahead(lock_b, ab) == []  # r1 may try now
    assert ahead(lock_c, c) == []  # and so may the unrelated r3
    assert [x.run_id for x in ahead(lock_b, ba)] == ["r1"]  # r2 waits behind r1
    assert position([lock_a, lock_b], ab) == 1
    assert position([lock_b, lock_a], ba) == 2
    assert position([lock_a], a_again) == 3  # behind r1 and r2, not r3
    assert position([lock_c], c) == 1


def test_a_run_already_in_line_keeps_its_place_whatever_instant_a_twin_request_read() -> None:
    """Two requests with one Idempotency-Key (on two API instances) read their own clocks:
    r1 joined the line at 30, r2 at 20; r1's twin request read 10. It must still wait
    behind r2, or it takes the target while r1 waits behind r2 and neither ever starts
    (found by tests/test_local_multi.py's 40 POSTs on 30 keys)."""
    lock = TargetLock(id="p:a", queue=[w("r2", 20), w("r1", 30)])
    twin = w("r1", 10)
    assert [x.run_id for x in ahead(lock, twin)] == ["r2"]
    assert position([lock], twin) == 2
