"""One contract for the ports (core.ports), run against both the in-memory implementations
the simulation drives (core.memory) and the adapters on the Cosmos DB stand-in and
Azurite: what the simulation assumes of the store, the queue and the artifacts is what the
real services do, so the two cannot drift apart (issue 24.6). The store's part here; the
queue's and the artifacts': tests/test_ports_contract_queues.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters import counting
from benchctl.localstack import Stack
from core.errors import Conflict, NotFound, TooLarge, ValidationFailed
from core.models.activity import SeenActivity
from core.models.agents import AgentRecord
from core.models.barrier_shard import BarrierShard, ClaimMark, claim_mark_id
from core.models.gate import KeptVerdict
from core.models.live import LiveDirection, LiveDoc, LiveSample
from core.models.locks import TargetLock, Waiter
from core.models.regression import MeanStd, MedianSd, Regression, ToldWith
from core.models.schedule import StoredSchedule
from core.models.series import InfraFacts, StepPoint
from core.models.state import ItemState, RunState
from core.models.stored import Item, Step
from tests.documents import stored_aggregate, stored_result
from tests.ports_world import Ports, a_run, contract_store, new_id, open_ports, work


# The servers' side is fetched by name (tests/ports_world.py), which tests/lanes.py cannot
# see: marked here.
@pytest.fixture(params=["memory", pytest.param("azure", marks=pytest.mark.stack)])
def ports(request: pytest.FixtureRequest, pool: str) -> Iterator[Ports]:
    yield from open_ports(request, pool)


# ---- documents: create, read, compare-and-swap ---------------------------------------------


def test_a_document_is_created_once_read_back_and_swapped_by_etag(ports: Ports) -> None:
    runs = ports.store.runs
    run = runs.create(a_run(ports.pool))
    assert run.etag and runs.get(run.id).etag == run.etag
    with pytest.raises(Conflict):
        runs.create(run)
    with pytest.raises(NotFound):
        runs.get(new_id())

    run.tags = {"a": "1"}
    first = runs.replace(run)
    assert first.etag != run.etag and runs.get(run.id).tags == {"a": "1"}
    run.tags = {"a": "2"}  # written from the copy read before the first write
    with pytest.raises(Conflict):
        runs.replace(run)
    assert runs.get(run.id).tags == {"a": "1"}
    missing = a_run(ports.pool)
    missing.etag = first.etag
    with pytest.raises(NotFound):
        runs.replace(missing)


def test_a_run_carries_the_time_the_database_stored_it(ports: Ports) -> None:
    """``_ts``: whole seconds of the database's clock, renewed by every write (the commit
    point judges a creation by it, core.runs.commit)."""
    before = int(ports.now())
    run = ports.store.runs.create(a_run(ports.pool))
    assert run.ts is not None and before <= run.ts <= int(ports.now()) + 1
    assert ports.store.runs.get(run.id).ts == run.ts
    ports.wait(1.1)
    again = ports.store.runs.replace(run)
    assert again.ts is not None and again.ts > run.ts
    assert "ts" not in again.doc() and "_ts" not in again.doc()


def test_a_document_over_2_mb_is_refused(ports: Ports) -> None:
    big = a_run(ports.pool, tags={f"k{i}": "x" * 250 for i in range(9_000)})
    with pytest.raises(TooLarge):
        ports.store.runs.create(big)
    with pytest.raises(NotFound):
        ports.store.runs.get(big.id)


def test_due_active_and_pages_of_runs(ports: Ports) -> None:
    runs = ports.store.runs
    tag = uuid.uuid4().hex[:12]
    now = int(time.time() * 1000)
    made = [
        runs.create(
            a_run(
                ports.pool,
                created_ms=now + i,
                tags={"contract": tag},
                due_ms=now - 1 if i % 2 else None,
                admitted=i != 4,
                finished=i == 3,
                state=RunState.RUNNING if i < 3 else RunState.QUEUED,
            )
        )
        for i in range(5)
    ]
    ids = [r.id for r in made]
    due = {r.id for r in runs.due(now)}
    assert {ids[1], ids[3]} <= due and not {ids[0], ids[2], ids[4]} & due
    active = {r.id for r in runs.active(ports.pool)}
    assert {ids[0], ids[1], ids[2]} <= active and not {ids[3], ids[4]} & active

    seen: list[str] = []
    token: str | None = None
    for _ in range(20):
        page, token = runs.page(
            target="scratch", state=None, tag=("contract", tag), limit=2, continuation=token
        )
        assert len(page) <= 2
        seen += [r.id for r in page]
        if token is None:
            break
    assert seen == ids[::-1], (seen, ids)  # newest first, each once
    running, _ = runs.page(
        target=None, state="running", tag=("contract", tag), limit=10, continuation=None
    )
    assert [r.id for r in running] == ids[2::-1]
    with pytest.raises(ValidationFailed) as bad:  # not URL-safe Base64
        runs.page(target=None, state=None, tag=None, limit=2, continuation="not a token")
    assert bad.value.errors[0].field == "continuation"
    for unknown in ("bm90IGEgdG9rZW4", "abc", "AAAA"):  # of that form, but not given
        with pytest.raises(NotFound) as missing:
            runs.page(target=None, state=None, tag=None, limit=2, continuation=unknown)
        assert missing.value.field == "continuation"


def test_a_runs_steps_and_items_and_overdue_barriers(ports: Ports) -> None:
    items = ports.store.items
    run_id = new_id()
    now = int(time.time() * 1000)
    items.create_step(Step(id=f"{run_id}.s1", run_id=run_id, step=1, clients=1))
    step = items.create_step(
        Step(id=f"{run_id}.s0", run_id=run_id, step=0, clients=2, deadline_ms=now - 1)
    )
    for c in (1, 0):
        w = work(run_id, ports.pool, c)
        items.create_item(Item(id=w.item_id, run_id=run_id, step=0, client=c, work_item=w))
    with pytest.raises(Conflict):
        items.create_step(step)
    steps, its = items.of_run(run_id)
    assert [s.id for s in steps] == [f"{run_id}.s0", f"{run_id}.s1"]
    assert [i.id for i in its] == [f"{run_id}.s0.c0", f"{run_id}.s0.c1"]
    assert items.get_step(run_id, 0).deadline_ms == now - 1
    assert items.get_item(run_id, f"{run_id}.s0.c1").client == 1

    overdue = [s.id for s in items.overdue_barriers(now) if s.run_id == run_id]
    assert overdue == [step.id]
    step.start_at_ms = now + 5
    started = items.replace_step(step)
    assert not [s for s in items.overdue_barriers(now) if s.run_id == run_id]
    step.start_at_ms = None  # the stale copy
    with pytest.raises(Conflict):
        items.replace_step(step)
    item = items.get_item(run_id, f"{run_id}.s0.c0")
    item.attempts = 3
    assert items.replace_item(item).attempts == 3
    assert started.etag != step.etag


def test_barrier_shards_and_claim_marks_beside_the_items(ports: Ports) -> None:
    """A shard is created once and swapped by ETag; a claim mark is upserted; neither is
    read back as a step or an item of the run (core.models.barrier_shard)."""
    items = ports.store.items
    run_id = new_id()
    items.create_step(Step(id=f"{run_id}.s0", run_id=run_id, step=0, clients=2))
    shard = BarrierShard.empty(run_id, 0, 0, 1, 2)
    with pytest.raises(NotFound):
        items.get_shard(run_id, shard.id)
    shard.ready["1"] = "agent-1"
    made = items.create_shard(shard)
    with pytest.raises(Conflict):
        items.create_shard(shard)
    made.rtt_ms["1"] = 20
    swapped = items.replace_shard(made)
    with pytest.raises(Conflict):
        items.replace_shard(made)  # the stale copy
    assert items.get_shard(run_id, shard.id).rtt_ms == {"1": 20} and swapped.complete
    other = BarrierShard.empty(run_id, 0, 0, 0, 2)  # never written: left out
    assert items.get_shards(run_id, [other.id, shard.id]) == {shard.id: swapped}
    mark_id = claim_mark_id(run_id, 0, "agent/1?")  # any agent id makes a valid id
    for item in ("a", "b"):
        items.put_claim_mark(
            ClaimMark(id=mark_id, run_id=run_id, step=0, agent_id="agent/1?", item_id=item)
        )
    assert items.get_claim_mark(run_id, mark_id).item_id == "b"
    steps, its = items.of_run(run_id)
    assert [s.id for s in steps] == [f"{run_id}.s0"] and its == []


def test_target_locks_and_free_targets_with_waiters(ports: Ports) -> None:
    targets = ports.store.targets
    key = f"{ports.pool}:{uuid.uuid4().hex[:8]}"
    lock = targets.create(TargetLock(id=key))
    with pytest.raises(Conflict):
        targets.create(TargetLock(id=key))
    lock.queue = [Waiter(run_id=new_id(), created_ms=1)]
    lock = targets.replace(lock)
    assert [(k.run_id, k.queue) for k in targets.with_waiters() if k.id == key] == [(None, [])]
    lock.run_id, lock.since_ms = new_id(), 7
    held = targets.replace(lock)
    listed = [(k.run_id, k.since_ms) for k in targets.with_waiters() if k.id == key]
    assert listed == [(lock.run_id, 7)]
    with pytest.raises(Conflict):
        targets.replace(lock)
    assert targets.get(key).run_id == held.run_id


def test_results_aggregates_agents_ticks_schedules_once(ports: Ports) -> None:
    s = ports.store
    run_id = new_id()
    item = f"{run_id}.s0.c0"
    ids = {"id": item, "run_id": run_id, "item_id": item}
    result = stored_result(run_id=run_id)
    assert result.model_dump(include=set(ids)) == ids
    assert s.results.create(result) is True
    assert s.results.create(result) is False
    # What is read back is what was stored, its JSON to the byte.
    back = s.results.get(run_id, item)
    assert back.model_dump_json() == result.model_dump_json()
    assert [r.id for r in s.results.of_run(run_id)] == [item]
    agg = stored_aggregate(run_id=run_id, read={"iops": 1000.0})
    assert s.results.create_aggregate(agg) and not s.results.create_aggregate(agg)
    (stored,) = s.results.list_aggregates(run_id)
    assert stored.model_dump_json() == agg.model_dump_json()

    agent = f"contract-{uuid.uuid4().hex[:8]}"
    record = s.agents.create(
        AgentRecord(id=agent, pool=ports.pool, session="s", registered_ms=1, last_seen_ms=1)
    )
    record.last_seen_ms = 2
    assert s.agents.replace(record).last_seen_ms == 2
    with pytest.raises(Conflict):
        s.agents.replace(record)
    assert agent in {a.id for a in s.agents.all(ports.pool)}
    assert agent not in {a.id for a in s.agents.all("no-such-pool")}

    name = f"contract-{uuid.uuid4().hex[:8]}"
    assert s.ticks.get(name) is None
    s.ticks.put(name, 5)
    s.ticks.put(name, 7)
    assert s.ticks.get(name) == 7

    schedule = s.schedules.create(
        StoredSchedule(
            id=f"sch-{uuid.uuid4().hex[:16]}",
            cron="0 * * * *",
            request={"targets": ["scratch"]},
            created_at="2031-03-04T10:00:00+00:00",
            next_fire="2031-03-04T11:00:00+00:00",
        )
    )
    assert schedule.etag is not None
    moved = s.schedules.replace(schedule.model_copy(update={"cron": "5 * * * *"}))
    assert moved.cron == "5 * * * *" and s.schedules.get(schedule.id) == moved
    with pytest.raises(Conflict):
        s.schedules.replace(schedule)  # its ETag is the one before
    assert schedule.id in {x.id for x in s.schedules.all()}
    s.schedules.delete(schedule.id)
    with pytest.raises(NotFound):
        s.schedules.get(schedule.id)
    seen = SeenActivity(id=f"teams:{uuid.uuid4().hex}", seen_at_ms=1)
    assert s.activities.create(seen) is True and s.activities.create(seen) is False


def test_series_points_and_regressions_round_trip_by_series(ports: Ports) -> None:
    """What the monitor writes comes back equal, by series; a regression is replaced
    with compare-and-swap on its ETag."""
    s, key = ports.store, uuid.uuid4().hex[:16]
    point = StepPoint(
        id=f"{key}.r-1.s0",
        series_key=key,
        run_id="r-1",
        step=0,
        target="scratch",
        time_ms=1000,
        infra="i",
        infra_facts=InfraFacts(hosts=[("D8s", None)], mounts=[("s", "nfs", "h:/v", "vers=3")]),
        metrics={"read.iops": 5.0},
        clients=1,
        engine="fio",
        workload={"rw": "randread"},
        gate={"read.iops": KeptVerdict(verdict="pass", value=5.0)},
    )
    assert s.series.create_point(point) is True and s.series.create_point(point) is False
    assert [p.doc() for p in s.series.points(key)] == [point.doc()]  # its ETag besides
    facts = [p for p in s.series.all_points() if p.series_key == key]
    assert [(p.time_ms, p.workload) for p in facts] == [(1000, {"rw": "randread"})]
    reg = Regression(
        id=f"{key}.read.iops.gate.r-1",
        series_key=key,
        metric="read.iops",
        kind="regression",
        method="gate",
        before=MedianSd(median=10.0, sd=0.5),
        after=MeanStd(mean=5.0, std=0.0),
        first_run_id="r-1",
        first_time_ms=1000,
        notified=ToldWith.model_validate({"with": "other"}),
    )
    assert s.series.create_regression(reg) is True and s.series.create_regression(reg) is False
    assert [r.doc() for r in s.series.regressions(key)] == [reg.doc()]
    assert reg.id in {r.id for r in s.series.regressions()}
    stored = s.series.get_regression(key, reg.id)
    assert stored.etag is not None and stored.doc()["notified"] == {"with": "other"}
    triaged = s.series.replace_regression(stored.model_copy(update={"state": "expected"}))
    assert s.series.get_regression(key, reg.id).state == "expected"
    with pytest.raises(Conflict):
        s.series.replace_regression(stored)
    assert triaged.etag != stored.etag


def test_live_documents_are_put_whole_and_read_by_run(ports: Ports) -> None:
    live, run_id = ports.store.live, new_id()
    one = LiveSample(end_ms=2000, dur_ms=1000, read=LiveDirection(ios=5, bytes=20480))
    two = LiveSample(end_ms=3000, dur_ms=1000, read=LiveDirection(ios=6, bytes=24576))
    for c in (1, 0):
        doc = LiveDoc(
            id=f"{run_id}.s0.c{c}", run_id=run_id, step=0, client=c, agent_id="a", samples=[one]
        )
        assert live.put(doc).samples == [one]
    with pytest.raises(NotFound):
        live.get(run_id, f"{run_id}.s0.c9")
    got = live.get(run_id, f"{run_id}.s0.c0")
    assert got.samples == [one] and got.agent_id == "a"
    live.put(got.model_copy(update={"samples": [one, two], "agent_id": "b"}))  # a new ring
    assert [d.id for d in live.of_run(run_id)] == [f"{run_id}.s0.c0", f"{run_id}.s0.c1"]
    assert live.of_run(run_id)[0].samples == [one, two]
    assert live.of_run(run_id)[0].agent_id == "b"
    assert live.of_run(new_id()) == []


# ---- the queue ---------------------------------------------------------------------------


# ---- artifacts ---------------------------------------------------------------------------


@pytest.mark.stack
def test_a_steps_items_are_created_in_one_request(
    stack: Stack, pool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter creates a run's items in a transactional batch (issue 29.3: 32 creates,
    8 at a time, were a tenth of a 32-client POST); one of them there already (a replay)
    leaves it as it is and creates the others."""
    calls = tmp_path / "calls"
    monkeypatch.setenv(counting.SETTING, str(calls))  # read as the client is made
    items = contract_store(stack).items
    run_id = new_id()
    docs = []
    for c in range(32):
        w = work(run_id, pool, c)
        docs.append(Item(id=w.item_id, run_id=run_id, step=0, client=c, work_item=w))
    before = calls.stat().st_size if calls.exists() else 0
    items.create_items(docs[:31])
    monkeypatch.delenv(counting.SETTING)
    lines = calls.read_bytes()[before:].decode().splitlines()
    writes = [x.split()[3] for x in lines if " cosmos " in x]
    assert [w for w in writes if w in ("create", "batch")] == ["batch"]
    items.create_items(docs)  # the first 31 again: each on its own, left as they are
    assert sorted(i.id for i in items.of_run(run_id)[1]) == sorted(d.id for d in docs)


def test_items_created_together_and_a_steps_open_items_counted(ports: Ports) -> None:
    """create_items leaves an item there already as it is (a replay); open_items counts the
    step's items not ended, in one call (an item's end asks it, issue 29)."""
    items = ports.store.items
    run_id = new_id()
    docs = []
    for c in range(5):
        w = work(run_id, ports.pool, c)
        docs.append(Item(id=w.item_id, run_id=run_id, step=0, client=c, work_item=w))
    items.create_items(docs[:2])
    items.create_items(docs)  # the first two again: left as they are
    items.create_step(Step(id=f"{run_id}.s0", run_id=run_id, step=0, clients=5))
    assert [i.id for i in items.of_run(run_id)[1]] == [d.id for d in docs]
    assert items.open_items(run_id, 0) == 5 and items.open_items(run_id, 1) == 0
    for c, to in ((0, ItemState.COMPLETED), (1, ItemState.FAILED), (2, ItemState.CANCELLED)):
        item = items.get_item(run_id, docs[c].id)
        item.state = to
        items.replace_item(item)
    item = items.get_item(run_id, docs[3].id)
    item.state = ItemState.RUNNING
    items.replace_item(item)
    assert items.open_items(run_id, 0) == 2
