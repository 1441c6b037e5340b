"""Pure rules of one-run-at-a-time: lock keys, when a holder is done, who may go next."""

from __future__ import annotations

from typing import Any

from core.runs.admission import Admission, holder_done, lock_keys, run_keys


def waiting(run_id: str, created_ms: int, *targets: str, pool: str = "p") -> dict[str, Any]:
    return {"id": run_id, "created_ms": created_ms, "pool": pool, "targets": list(targets)}


def test_keys_are_per_pool_sorted_and_unique() -> None:
    assert lock_keys("p", ["b", "a", "b"]) == ["p:a", "p:b"]
    assert run_keys({"pool": "q", "target": "a"}) == ["q:a"]
    assert lock_keys("p", ["a"]) != lock_keys("q", ["a"])  # same alias, other pool's volume


def test_a_holder_is_done_once_its_io_has_ended() -> None:
    assert holder_done({"finished": True, "state": "running"})
    assert holder_done({"state": "failed"}) and holder_done({"state": "completed"})
    assert holder_done({"state": "waiting", "admitted": False})
    assert not holder_done({"state": "running", "admitted": True})
    assert not holder_done({"state": "queued"})
    # Cancelled, but an agent still holds an item (fio stops at its next heartbeat).
    assert not holder_done({"state": "cancelled", "counts": {"running": 1}})
    assert not holder_done({"state": "cancelled", "counts": {"ready": 1, "cancelled": 1}})
    assert holder_done({"state": "cancelled", "counts": {"cancelled": 2}})


def test_waiting_runs_go_in_submission_order_and_crossed_targets_cannot_deadlock() -> None:
    adm = Admission(store=None)  # type: ignore[arg-type]  # ordering needs no store
    ab = waiting("r1", 1, "a", "b")
    ba = waiting("r2", 2, "b", "a")
    c = waiting("r3", 3, "c")
    a_again = waiting("r4", 4, "a")
    # r2 shares a target with the earlier r1: only r1 (and the unrelated r3) may try now.
    assert [r["id"] for r in adm.admissible([a_again, c, ba, ab])] == ["r1", "r3"]
    assert adm.position(ab, [ab, ba, c, a_again]) == 1
    assert adm.position(ba, [ab, ba, c, a_again]) == 2
    assert adm.position(a_again, [ab, ba, c, a_again]) == 3  # behind r1 and r2, not r3
    assert adm.position(c, [ab, ba, c, a_again]) == 1
