"""A run revived under its Idempotency-Key keeps the target locks it took over from its void
attempt (core.runs.admission: each attempt has a generation, and a lock carries the
generation of the attempt that took it): the next run in line never starts beside it.

Before, locks were given back by run id alone and a holder was judged by the run's document
alone, so (1) the void attempt's cleanup, running just after a revival took its locks over,
freed them, and (2) a run submitted while a revival had taken a lock but not yet written
its document read the holder as the void attempt, done, and took the lock. Either way two
runs ran on one target. In memory (core.memory), the interleavings forced by the store's
fault hook (tests/test_intake_revive.py)."""

from __future__ import annotations

from typing import Any

import pytest

from core.memory import MemoryStore
from core.models.ids import run_id_for_key
from core.models.state import RunState
from core.runs.admission import UNWRITTEN_HOLDER_GRACE_MS
from core.runs.commit import Abandoned
from core.runs.service import RunService
from tests.test_intake_revive import BODY, KEY, nearly_answered, service

LOCK = "sim:a"
OTHER: dict[str, Any] = {**BODY, "tags": {"who": "next in line"}}


def in_line(svc: RunService, ids: list[str]) -> None:
    """A run without a key on the same target, submitted at this moment."""
    run, created = svc.intake.submit(OTHER)
    assert created
    ids.append(run.id)


def one_runs(store: MemoryStore, run_id: str, next_id: str) -> None:
    """The revived run holds the target and runs; the next one waits in line."""
    revived, waiting = store.runs.get(run_id), store.runs.get(next_id)
    assert (revived.accepted, revived.admitted) == (True, True)
    assert revived.state == RunState.QUEUED and len(store.items.of_run(run_id)[1]) == 1
    assert (waiting.admitted, waiting.state) == (False, RunState.WAITING)
    assert store.items.of_run(next_id)[1] == []  # nothing of it was sent
    lock = store.targets.get(LOCK)
    assert lock.run_id == run_id and [w.run_id for w in lock.queue] == [next_id]
    assert revived.generation == lock.generation == 1


def the_next_starts_when_it_ends(
    svc: RunService, store: MemoryStore, run_id: str, nxt: str
) -> None:
    svc.cancel(run_id)  # its item was not claimed: it ends at once and frees the target
    assert store.runs.get(run_id).finished
    assert store.runs.get(nxt).admitted and len(store.items.of_run(nxt)[1]) == 1
    assert store.targets.get(LOCK).run_id == nxt


def test_the_void_attempts_cleanup_leaves_the_locks_a_revival_took_over() -> None:
    """The key's first request takes the target, lands too late and voids its run; in the
    moment between the void and its cleanup, a retry revives the run (taking the target
    over) and another run joins the line behind it. The cleanup must not free the target:
    it admitted the next run beside the revived one."""
    svc, store, script, _ = service()
    run_id = run_id_for_key(KEY)
    nxt: list[str] = []

    def revive_and_queue() -> None:
        assert store.runs.get(run_id).void  # the void is written, its cleanup not done
        assert svc.intake.submit(BODY, KEY)[1]  # the retry: 202
        in_line(svc, nxt)

    def arm() -> None:  # before the void's write: after it, the cleanup's first read
        script.before("read", "targets", LOCK, revive_and_queue)

    script.before("replace", "runs", run_id, arm)
    with pytest.raises(Abandoned):
        svc.intake.submit(BODY, KEY, answer=nearly_answered(svc))
    assert len(nxt) == 1
    one_runs(store, run_id, nxt[0])
    the_next_starts_when_it_ends(svc, store, run_id, nxt[0])


def test_a_run_submitted_while_a_revival_writes_waits_behind_it() -> None:
    """The void attempt is cleaned up (the target is free). A retry revives the run: it
    takes the target, and before its document is written another run is submitted. The
    holder is the revival being written, not the void attempt: the other run waits."""
    svc, store, script, _ = service()
    with pytest.raises(Abandoned):
        svc.intake.submit(BODY, KEY, answer=nearly_answered(svc))
    run_id = run_id_for_key(KEY)
    assert store.runs.get(run_id).void and store.targets.get(LOCK).run_id is None
    nxt: list[str] = []
    script.before("replace", "runs", run_id, lambda: in_line(svc, nxt))
    assert svc.intake.submit(BODY, KEY)[1]
    one_runs(store, run_id, nxt[0])
    the_next_starts_when_it_ends(svc, store, run_id, nxt[0])


def test_a_revival_never_written_holds_the_target_only_for_the_grace() -> None:
    """A retry takes the target over and is then answered 503 before writing the run: the
    run in line behind it starts once the grace for unwritten holders has passed (the
    timer), as after a new run never written."""
    svc, store, script, clock = service()
    with pytest.raises(Abandoned):
        svc.intake.submit(BODY, KEY, answer=nearly_answered(svc))
    run_id = run_id_for_key(KEY)
    # The retry's lock is written; then its handler's deadline passes.
    script.before("replace", "targets", LOCK, lambda: clock.advance(5))
    with pytest.raises(Abandoned):
        svc.intake.submit(BODY, KEY)
    lock = store.targets.get(LOCK)
    assert (lock.run_id, lock.generation) == (run_id, 1) and store.runs.get(run_id).void
    nxt: list[str] = []
    in_line(svc, nxt)
    assert store.runs.get(nxt[0]).state == RunState.WAITING
    clock.advance(UNWRITTEN_HOLDER_GRACE_MS / 1000 - 10)
    svc.tick()
    assert store.runs.get(nxt[0]).state == RunState.WAITING
    clock.advance(11)
    svc.tick()
    assert store.runs.get(nxt[0]).admitted
    assert len(store.items.of_run(nxt[0])[1]) == 1
