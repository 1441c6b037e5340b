"""What an agent's heartbeat and barrier poll cost the database: a constant number of calls
per client, whatever the number of clients in the step, and no whole-run read (issue 29.3:
a 32-client profile found 3 reads and a write per heartbeat, 2 reads per poll, the run
read by every client every second).

Counted on the in-memory store (core.memory) through its hook, which sees every call the
Cosmos DB adapter would make; the same step at 2 and at 50 clients must cost the same."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.models import WorkItem
from core.models.holder import AgentRef
from core.models.state import ItemState, RunState
from core.models.stored import Step as PlainStep
from core.runs.agent_reports import HEARTBEAT_RECORD_S
from core.runs.claiming import ADVANCE_AFTER_FIRST_CLAIM_MS, advances_run
from core.runs.service import RunService

POOL = "calls"
WORKLOAD = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 60, "iodepth": 1}


@dataclass
class Counting:
    """The store's hook: counts each call by (container, operation); lets all through."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)

    def __call__(self, op: str, table: str, key: str) -> Effect:
        self.calls[(table, op)] += 1
        return "ok"


@dataclass
class Step:
    service: RunService
    store: MemoryStore
    clock: SimClock
    hook: Counting
    run_id: str
    work: list[WorkItem]
    agents: list[AgentRef]

    def cost(self, call: object) -> dict[tuple[str, str], int]:
        """The database calls ``call`` (a thunk) makes."""
        self.hook.calls.clear()
        assert callable(call)
        call()
        return dict(self.hook.calls)


@dataclass
class Counted:
    """A service over the in-memory store whose calls ``hook`` counts."""

    clock: SimClock
    hook: Counting
    store: MemoryStore
    queues: MemoryQueues
    service: RunService


def counted(clients: int) -> Counted:
    clock, hook = SimClock(), Counting()
    store, queues = MemoryStore(clock, hook), MemoryQueues(clock)
    queues.ensure_pool(POOL)
    service = RunService(
        store,
        queues,
        MemoryArtifacts(),
        clock=clock,
        pools=(POOL,),
        pool_configs=(PoolConfig(name=POOL, size=clients),),
    )
    return Counted(clock, hook, store, queues, service)


def claimed_step(clients: int, claims: list[dict[tuple[str, str], int]] | None = None) -> Step:
    """A run of ``clients`` clients, every item claimed by an agent of its own; ``claims``
    gets the database calls of each claim."""
    c = counted(clients)
    clock, hook, store, queues, service = c.clock, c.hook, c.store, c.queues, c.service
    body = {"pool": POOL, "target": "a", "clients": clients, "workload": WORKLOAD}
    run, _ = service.submit(body)
    work, agents = [], []
    for i in range(clients):
        msg = queues.receive(POOL, 600)
        assert msg is not None
        w = WorkItem.model_validate_json(msg.content)
        agent = AgentRef(f"agent-{i}", principal=f"oid-{i}")
        hook.calls.clear()
        decision = service.claim(w, agent=agent, dequeue_count=1, message_id=msg.id)
        if claims is not None:
            claims.append(dict(hook.calls))
        assert decision.action == "run", decision
        work.append(w)
        agents.append(agent)
    return Step(service, store, clock, hook, run.id, work, agents)


ONE_ITEM_READ = {("items", "read"): 1}


def costs(clients: int) -> dict[str, dict[tuple[str, str], int]]:
    s = claimed_step(clients)
    svc, run_id = s.service, s.run_id
    ids = [w.item_id for w in s.work]
    out: dict[str, dict[tuple[str, str], int]] = {}
    for i in range(clients - 1):
        assert svc.ready(run_id, ids[i], s.agents[i], 20).status == "wait"
    s.clock.advance(0.5)
    out["claimed heartbeat"] = s.cost(lambda: svc.heartbeat(run_id, ids[-1], s.agents[-1]))
    out["ready heartbeat"] = s.cost(lambda: svc.heartbeat(run_id, ids[0], s.agents[0]))
    out["waiting heartbeat"] = s.cost(
        lambda: svc.heartbeat(run_id, ids[0], s.agents[0], waiting=True)
    )
    out["waiting poll"] = s.cost(lambda: svc.barrier(run_id, ids[0], s.agents[0]))
    last = svc.ready(run_id, ids[-1], s.agents[-1], 20)
    assert last.status == "go" and last.start_at_ms is not None
    polled: list[object] = []
    out["go poll"] = s.cost(lambda: polled.append(svc.barrier(run_id, ids[0], s.agents[0])))
    assert getattr(polled[0], "start_at_ms", None) == last.start_at_ms
    s.clock.advance((last.start_at_ms - s.clock.ms()) / 1000 + 0.1)  # past the instant
    # An agent that has not heard the instant yet has not started: its item stays ready.
    out["late waiting heartbeat"] = s.cost(
        lambda: svc.heartbeat(run_id, ids[0], s.agents[0], waiting=True)
    )
    assert s.store.items.get_item(run_id, ids[0]).state == ItemState.READY
    out["heartbeat at the start"] = s.cost(lambda: svc.heartbeat(run_id, ids[0], s.agents[0]))
    assert s.store.items.get_item(run_id, ids[0]).state == ItemState.RUNNING
    s.clock.advance(1)
    out["running heartbeat"] = s.cost(lambda: svc.heartbeat(run_id, ids[0], s.agents[0]))
    s.clock.advance(HEARTBEAT_RECORD_S)
    out["sign of life"] = s.cost(lambda: svc.heartbeat(run_id, ids[0], s.agents[0]))
    svc.cancel(run_id)
    beats: list[dict[str, bool]] = []
    out["cancelled"] = s.cost(lambda: beats.append(svc.heartbeat(run_id, ids[0], s.agents[0])))
    assert beats == [{"cancel": True}]
    return out


@pytest.fixture(scope="module")
def at_2_and_50() -> tuple[dict[str, dict[tuple[str, str], int]], ...]:
    return costs(2), costs(50)


def test_heartbeats_and_polls_cost_the_same_at_2_and_at_50_clients(
    at_2_and_50: tuple[dict[str, dict[tuple[str, str], int]], ...],
) -> None:
    two, fifty = at_2_and_50
    assert two == fifty


def test_each_heartbeat_and_poll_costs_what_it_needs_and_no_run_read(
    at_2_and_50: tuple[dict[str, dict[tuple[str, str], int]], ...],
) -> None:
    got = at_2_and_50[1]
    step_too = {("items", "read"): 2}  # the item, and its step for the start instant
    assert got == {
        "claimed heartbeat": ONE_ITEM_READ,
        "ready heartbeat": step_too,
        # Issue 29.3: an agent not yet released says so, and its beat reads no step (a beat
        # a second from each agent waiting at the barrier, in its step's start-up storm).
        "waiting heartbeat": ONE_ITEM_READ,
        "late waiting heartbeat": ONE_ITEM_READ,
        # The item (only its holder is answered) and the step: the step no longer records
        # who is ready (issue 29.2: at 1,000 clients it was ~100 KB, rewritten by every
        # claim and ready report), so a poll reads two small documents instead of one.
        "waiting poll": step_too,
        "go poll": step_too,
        "heartbeat at the start": {**step_too, ("items", "replace"): 1},  # ready -> running
        "running heartbeat": ONE_ITEM_READ,
        # Every HEARTBEAT_RECORD_S: the sign of life, and the run's cancellation checked.
        "sign of life": {("items", "read"): 1, ("runs", "read"): 1, ("items", "replace"): 1},
        "cancelled": ONE_ITEM_READ,  # the cancel marked the held item
    }


def test_a_poll_from_another_agent_or_credential_is_refused_as_before() -> None:
    """The step answers alone only for the agent, with the credential, it recorded as
    ready: anyone else is decided on the item, and refused."""
    s = claimed_step(2)
    item = s.work[0].item_id
    assert s.service.ready(s.run_id, item, s.agents[0], 20).status == "wait"
    for other in (AgentRef("agent-1", principal="oid-1"), AgentRef("agent-0", principal="x")):
        with pytest.raises(Exception, match="barrier refused"):
            s.service.barrier(s.run_id, item, other)


def test_a_claim_reads_its_item_once() -> None:
    """A claim reads the run, its item, its step (twice, the barrier opened by another
    claim) and the agent's claim mark, and swaps the item as it read it (issue 29.3: it
    read the item a second time for the swap, one read more for each of a step's clients,
    all claiming at once)."""
    claims: list[dict[tuple[str, str], int]] = []
    claimed_step(3, claims)
    # The first claim opens the step's barrier and shows the run running; the others:
    expected = {
        ("runs", "read"): 1,
        # The item, its step (and again: nothing to write on the step as read is confirmed
        # on a fresh read, core.runs.cas.update), the agent's claim mark.
        ("items", "read"): 4,
        ("items", "replace"): 1,  # the item, claimed
        ("items", "upsert"): 1,  # the agent's claim mark
    }
    assert claims[1:] == [expected, expected]


def test_only_the_claim_that_opened_the_barrier_advances_a_queued_run() -> None:
    """Issue 29.3: a step's claims come at once, and each read the run while it still showed
    queued; each then advanced it, with a query of the run's every document (32 such
    queries in a 32-client step's claims). The claim that opened the step's barrier does;
    the others, having read the run before that one showed it running, do not."""
    c = counted(4)
    clock, hook, store, queues, service = c.clock, c.hook, c.store, c.queues, c.service
    run, _ = service.submit({"pool": POOL, "target": "a", "clients": 4, "workload": WORKLOAD})
    queued = store.runs.get(run.id)  # as every claim of the burst read it
    assert queued.state == RunState.QUEUED
    queries = []
    for i in range(4):
        msg = queues.receive(POOL, 600)
        assert msg is not None
        w = WorkItem.model_validate_json(msg.content)
        agent = AgentRef(f"agent-{i}", principal=f"oid-{i}")
        doc, step = store.items.get_item(run.id, w.item_id), store.items.get_step(run.id, 0)
        hook.calls.clear()
        clock.advance(0.01)
        taken = service.protocol._take(w, doc, step, agent, 1, msg.id, queued)
        assert taken.action == "run"
        queries.append(hook.calls[("items", "query")])
    assert queries == [1, 0, 0, 0]  # the first claim's advance reads the run's documents
    assert store.runs.get(run.id).state == RunState.RUNNING
    # A claim long after the first, the run still shown queued (its first claim's instance
    # died before advancing it), advances it.
    assert advances_run(store.items.get_step(run.id, 0), clock.ms() + ADVANCE_AFTER_FIRST_CLAIM_MS)


@given(first=st.integers(0, 10**12), after=st.integers(0, 10**6))
def test_a_claim_advances_the_run_when_it_opened_the_barrier_or_long_after(
    first: int, after: int
) -> None:
    step = PlainStep.model_validate(
        {"id": "r-1.s0", "run_id": "r-1", "step": 0, "clients": 4, "first_claim_ms": first}
    )
    assert advances_run(step, first + after) is (
        after == 0 or after >= ADVANCE_AFTER_FIRST_CLAIM_MS
    )
    unopened = step.model_copy(update={"first_claim_ms": None})
    assert advances_run(unopened, first)


def test_a_post_rereads_no_document_it_has_just_written() -> None:
    """A POST sends its first step from the step it read and goes on from the run as it
    wrote it "sent" (issue 29.3: it read the step again to take the send lease, and the run
    twice after marking it sent, on the way to its answer)."""
    c = counted(4)
    hook, service = c.hook, c.service
    service.submit({"pool": POOL, "target": "a", "clients": 4, "workload": WORKLOAD})
    reads = {k: n for k, n in hook.calls.items() if k[1] == "read"}
    # The step: to send it and to mark it sent; the run: as the settle writes it.
    assert reads == {("targets", "read"): 1, ("items", "read"): 2, ("runs", "read"): 1}
