"""Requests with one Idempotency-Key converge on one run whatever order their writes land in
(core.runs.intake): a void run (its creation answered 503, core.runs.commit) is revived by
whichever request writes over it first; one that loses the write answers with the run
that won, or revives it again while it is still void, and never 409 for the same body.

In memory (core.memory), one clock; the interleavings are forced by the store's fault
hook, which runs a twin request at the moment a request is about to write the run (found
by 40 concurrent POSTs on 30 keys through 3 instances: one answered 409 "runs/r-... changed
concurrently"). The first one runs on the Cosmos DB server too, where it gave that 409."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.errors import Conflict, StoreUnavailable
from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.models.ids import run_id_for_key
from core.models.state import RunState
from core.models.stored import Run
from core.runs.commit import DECIDE_GRACE_MS, Abandoned, Answer
from core.runs.intake import COMMIT_ATTEMPTS
from core.runs.service import RunService
from tests.conftest import run_body

POOL = "sim"
KEY = "revive-key"
BODY: dict[str, Any] = {
    "pool": POOL,
    "target": "a",
    "workload": {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2},
}


class Script:
    """The fault hook: before the n-th write of ``op`` on a document, run the n-th action
    (another request's work, done in full before that write is applied). Actions' own
    operations go through untouched."""

    def __init__(self) -> None:
        self.actions: dict[tuple[str, str, str], list[Callable[[], object]]] = {}
        self.acting = False

    def before(self, op: str, table: str, key: str, *actions: Callable[[], object]) -> None:
        self.actions.setdefault((op, table, key), []).extend(actions)

    def __call__(self, op: str, table: str, key: str) -> Effect:
        queued = self.actions.get((op, table, key))
        if queued and not self.acting:
            self.acting = True
            try:
                queued.pop(0)()
            finally:
                self.acting = False
        return "ok"


def service() -> tuple[RunService, MemoryStore, Script, SimClock]:
    clock = SimClock(1_900_000_000.0)
    script = Script()
    store = MemoryStore(clock, script)
    queues = MemoryQueues(clock)
    queues.ensure_pool(POOL)
    pools = (PoolConfig(name=POOL, size=2),)
    svc = RunService(
        store, queues, MemoryArtifacts(), clock=clock, pools=(POOL,), pool_configs=pools
    )
    return svc, store, script, clock


def nearly_answered(svc: RunService) -> Answer:
    """A request whose handler answers 503 in 0.6 s: what it stores now is already past
    its accept_by_s (core.runs.commit), so its creation is void."""
    return Answer(svc.lifecycle.now_ms() + 600, svc.lifecycle.clock)


def late_twin(svc: RunService, answers: list[str]) -> Callable[[], None]:
    """A request with the key whose revival lands too late: it voids it and answers 503."""

    def twin() -> None:
        try:
            svc.intake.submit(BODY, KEY, answer=nearly_answered(svc))
        except Abandoned:
            answers.append("503")

    return twin


def twin_in_time(svc: RunService, answers: list[str]) -> Callable[[], None]:
    def twin() -> None:
        _, created = svc.intake.submit(BODY, KEY)
        answers.append("202" if created else "200")

    return twin


def void_run(svc: RunService, store: MemoryStore) -> Run:
    """The key's first request: stored after its deadline, so void."""
    with pytest.raises(Abandoned):
        svc.intake.submit(BODY, KEY, answer=nearly_answered(svc))
    void = store.runs.get(run_id_for_key(KEY))
    assert void.void and void.state == RunState.FAILED
    return void


def test_a_reviver_that_loses_its_write_twice_answers_with_the_run_that_won() -> None:
    """The key's run is void. Request B reads it and is about to write over it; a twin
    revives it first, too late (it voids its own revival): B's write is lost, B reads the
    run void again and writes over it once more; this time another twin revives it in time
    first. B answers with that run (200), not 409 "changed concurrently"."""
    svc, store, script, _ = service()
    run_id = void_run(svc, store).id
    twins: list[str] = []
    script.before("replace", "runs", run_id, late_twin(svc, twins), twin_in_time(svc, twins))
    run, created = svc.intake.submit(BODY, KEY)
    assert twins == ["503", "202"]
    assert (run.id, created) == (run_id, False)
    stored = store.runs.get(run_id)
    assert stored.accepted is True and not stored.void and stored.state == RunState.QUEUED
    assert len(store.items.of_run(run_id)[1]) == 1  # its step was sent once


def test_a_reviver_revives_again_a_run_still_void_after_its_lost_write() -> None:
    """B's write is lost to a twin whose revival came too late and was voided: B writes
    over the void run again, and its run is the one that runs (202)."""
    svc, store, script, _ = service()
    run_id = void_run(svc, store).id
    twins: list[str] = []
    script.before("replace", "runs", run_id, late_twin(svc, twins))
    run, created = svc.intake.submit(BODY, KEY)
    assert twins == ["503"]
    assert (run.id, created) == (run_id, True)
    stored = store.runs.get(run_id)
    assert stored.accepted is True and stored.state == RunState.QUEUED
    assert len(store.items.of_run(run_id)[1]) == 1


def test_a_void_run_that_keeps_changing_is_answered_503_and_a_retry_makes_it() -> None:
    """Every write B tries is lost to another late twin: B gives up with a 503 the caller
    retries (StoreUnavailable), never a 409; the retry makes the run."""
    svc, store, script, _ = service()
    run_id = void_run(svc, store).id
    twins: list[str] = []
    for _ in range(COMMIT_ATTEMPTS):  # before each of B's writes, a late twin's
        script.before("replace", "runs", run_id, late_twin(svc, twins))
    with pytest.raises(StoreUnavailable) as refused:
        svc.intake.submit(BODY, KEY)
    assert not isinstance(refused.value, Conflict)
    assert twins == ["503"] * COMMIT_ATTEMPTS
    assert store.runs.get(run_id).void
    run, created = svc.intake.submit(BODY, KEY)
    assert (run.id, created) == (run_id, True)
    assert store.runs.get(run_id).accepted is True


def test_on_the_cosmos_db_server_a_reviver_that_loses_twice_answers_with_the_run_that_won(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first test's interleaving on the real ETags of the Cosmos DB server (whose 412
    was the CI's 409): a write "lands late" when it is held until its run's accept_by_s
    has passed, as by a paused server."""
    svc = RunService(store, queues, artifacts, pools=tuple(stack.pool_names))
    key, body = f"revive-{pool}-{time.time_ns()}", run_body(pool)
    run_id = run_id_for_key(key)
    late, twins, before_write = [False], list[str](), list[Callable[[], object]]()
    acting: list[bool] = []

    def held(write: Callable[[Run], Run]) -> Callable[[Run], Run]:
        def maybe_late(run: Run) -> Run:
            if late[0]:
                late[0] = False
                while int(time.time()) <= (run.accept_by_s or 0):
                    time.sleep(0.05)
            elif before_write and run.id == run_id and not acting:
                acting.append(True)  # the twin's own writes go through
                try:
                    before_write.pop(0)()
                finally:
                    acting.clear()
            return write(run)

        return maybe_late

    monkeypatch.setattr(store.runs, "create", held(store.runs.create))
    monkeypatch.setattr(store.runs, "replace", held(store.runs.replace))

    def twin(landing_late: bool) -> None:
        late[0] = landing_late
        try:
            twins.append("202" if svc.intake.submit(body, key)[1] else "200")
        except Abandoned:
            twins.append("503")

    twin(landing_late=True)  # the key's first request: void
    assert twins == ["503"] and store.runs.get(run_id).void
    before_write.extend([lambda: twin(landing_late=True), lambda: twin(landing_late=False)])
    roomy = Answer(int(time.time() * 1000) + 30_000, time.time)  # outlasts the twins
    run, created = svc.intake.submit(body, key, answer=roomy)
    try:
        assert twins == ["503", "503", "202"]
        assert (run.id, created) == (run_id, False)
        stored = store.runs.get(run_id)
        assert stored.accepted is True and stored.generation == 2 and not stored.void
    finally:
        svc.cancel(run_id)


def test_a_late_creations_void_spares_the_revival_a_twin_answered_202_for() -> None:
    """Request A's creation lands late and its void does not get through at once. Twin B
    voids that attempt and revives the run in time (202); A's void lands between B's write
    and B's accept. It was decided on A's attempt, so it leaves B's alone: the run B was
    answered 202 for runs (before, it was failed, and A's retry was answered 202 too: one
    key answered 202 twice, in a rehearsal of 40 POSTs on 30 keys through 3 instances)."""
    svc, store, script, _ = service()
    run_id = run_id_for_key(KEY)

    def void_unreachable() -> None:
        raise StoreUnavailable("Cosmos DB: replace runs: no answer (simulated)", "Cosmos DB")

    script.before("replace", "runs", run_id, void_unreachable)  # A's own void
    with pytest.raises(Abandoned):
        svc.intake.submit(BODY, KEY, answer=nearly_answered(svc))
    first = store.runs.get(run_id)
    assert first.accepted is None and not first.void  # late, not yet voided by anyone

    def noop() -> None:
        pass

    def a_void_lands() -> None:  # A's void, decided on its own attempt, lands only now
        svc.lifecycle.void(run_id, first.generation, read=first)

    # B's writes of the run: its void of A's attempt, its revival, then its accept.
    script.before("replace", "runs", run_id, noop, noop, a_void_lands)
    run, created = svc.intake.submit(BODY, KEY)
    assert (run.id, created) == (run_id, True)
    stored = store.runs.get(run_id)
    assert stored.generation == first.generation + 1
    assert stored.accepted is True and not stored.void and stored.state == RunState.QUEUED
    assert len(store.items.of_run(run_id)[1]) == 1  # its step was sent, once


def test_a_write_without_answer_voids_its_own_attempt_never_a_twins_answered_202() -> None:
    """B is about to revive the void run; its twin C, of the same generation, revives it
    first and is answered 202 (its accept's write gets no answer: the timer accepts it);
    then B's write gets no answer. B voids what it may have stored, and must leave C's
    attempt alone (before, it voided the run C was answered 202 for)."""
    svc, store, _, clock = service()
    run_id = void_run(svc, store).id
    writes, twins = [0], list[bool]()

    def effect(op: str, table: str, key: str) -> Effect:
        if (op, table, key) != ("replace", "runs", run_id):
            return "ok"
        writes[0] += 1
        if writes[0] == 1:  # B's revival: twin C first, then B's write is refused unanswered
            twins.append(svc.intake.submit(BODY, KEY)[1])
            return "fail"
        return "fail" if writes[0] == 3 else "ok"  # 2: C's revival; 3: C's accept

    store.tables.faults = effect
    with pytest.raises(StoreUnavailable):
        svc.intake.submit(BODY, KEY)
    assert twins == [True]  # C: 202
    run = store.runs.get(run_id)
    assert (run.void, run.generation, run.accepted) == (False, 1, None)
    clock.advance(DECIDE_GRACE_MS / 1000)
    svc.tick()  # nobody decided it: the timer does, from its timestamp (in time)
    run = store.runs.get(run_id)
    assert run.accepted is True and len(store.items.of_run(run_id)[1]) == 1
