"""Pure rules of one-run-at-a-time: lock keys, when a holder is done, who waits ahead; and
that a run revived under its Idempotency-Key stays in line whatever a stale drop does."""

from __future__ import annotations

import time
from typing import Any

from core.memory import MemoryStore
from core.models.locks import TargetLock, Waiter
from core.models.state import RunState
from core.models.stored import Run
from core.runs.admission import (
    Admission,
    ahead,
    holder_done,
    lock_keys,
    position,
    run_keys,
)


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


def test_a_run_revived_under_its_key_stays_in_line_when_a_stale_drop_follows() -> None:
    """A request's creation came too late and is void; its twin with the same
    Idempotency-Key revives the run (a new document, waiting) and puts it in line, a no-op
    while the void attempt's entry is still there; then the void's own cleanup (or another
    request that read the run as void) drops the run's entry. The run must still be in
    line, or it waits forever at the head of an empty queue (found by 40 concurrent POSTs
    on 30 keys through 3 instances: 1 of 30 runs stuck waiting, in 1 of 3 tries)."""
    store = MemoryStore(time.time)
    admission = Admission(store)
    keys = lock_keys("q", ["a"])
    holder = store.runs.create(run(id="r-0", created_ms=5, admitted=True, state=RunState.RUNNING))
    assert admission.try_acquire(keys, w(holder.id, 5))
    first = store.runs.create(run(id="r-1", created_ms=10, state=RunState.WAITING, admitted=False))
    admission.wait(keys, w("r-1", 10))
    # The first attempt is void: failed, finished, never to run.
    void = store.runs.replace(
        first.model_copy(update={"accepted": False, "finished": True, "state": RunState.FAILED})
    )
    # Its twin revives it (created at 20) and joins: its entry is there already.
    revived = run(id="r-1", created_ms=20, state=RunState.WAITING, admitted=False)
    revived.etag = void.etag
    store.runs.replace(revived)
    admission.wait(keys, w("r-1", 20))
    # The void's cleanup, from what it read before the revival.
    admission.leave(void)
    lock = store.targets.get(keys[0])
    assert [(x.run_id, x.created_ms) for x in lock.queue] == [("r-1", 20)]
    # And it starts once the holder is done.
    store.runs.replace(
        store.runs.get("r-0").model_copy(update={"finished": True, "state": RunState.COMPLETED})
    )
    assert [r.id for r in admission.admit_next(keys)] == ["r-1"]


def test_a_run_admitted_or_cancelled_leaves_its_line_for_good() -> None:
    store = MemoryStore(time.time)
    admission = Admission(store)
    keys = lock_keys("q", ["a", "b"])
    admitted = store.runs.create(run(id="r-1", targets=["a", "b"], admitted=True))
    cancelled = store.runs.create(run(id="r-2", targets=["a", "b"], cancel_requested=True))
    for r in (admitted, cancelled):
        admission.wait(keys, w(r.id, r.created_ms))
        admission.leave(r)
    assert all(store.targets.get(k).queue == [] for k in keys)
