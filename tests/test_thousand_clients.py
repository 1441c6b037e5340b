"""A run of a thousand clients (issue 29.2): its documents and messages fit Azure's limits,
each item is sent once, and the calls per client do not grow with the clients.

On the in-memory store (core.memory), which holds Azure's limits as the adapters do (a
document at most 2 MB, a message at most 64 KiB) and sees every call the Cosmos DB adapter
would make through its hook. The clients' results and timelines are the simulated client's
(simagent.measured: the agent's own code over fio's outputs at a declared rate)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

import pytest

from core.analysis.step_aggregates import build_aggregates
from core.artifacts import unpack_json, uploads
from core.errors import StoreUnavailable
from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.memory.documents import MAX_DOCUMENT_BYTES
from core.models import MAX_CLIENTS, HostFacts, Result, WorkItem
from core.models.holder import AgentRef
from core.models.state import RunState
from core.models.stored import Item, Step
from core.ports import Store
from core.runs.finalize import aggregate_and_judge, timelines
from core.runs.service import RunService
from simagent.figures import DeclaredRate
from simagent.fleet import FLEET_IDLE_POLLS_PER_S, Fleet
from simagent.measured import Measurements

POOL = "many"
RUNTIME_S = 3
WORKLOAD = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": RUNTIME_S, "iodepth": 1}
RATE = DeclaredRate(1000, 100_000)
HOST = HostFacts(hostname="simulated", kernel="", os="simulated", cpu_count=0)


@dataclass
class Counting:
    """The store's hook: counts each call by (container, operation); lets all through."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)

    def __call__(self, op: str, table: str, key: str) -> Effect:
        self.calls[(table, op)] += 1
        return "ok"


class Queues(MemoryQueues):
    """The memory queues, every message sent counted by its item; ``mid_send`` runs
    halfway through a step's send (agents claiming while intake still sends)."""

    def __init__(self, clock: SimClock) -> None:
        super().__init__(clock)
        self.sent: Counter[str] = Counter()
        self.largest = 0
        self.mid_send: Callable[[], None] | None = None

    def send(self, item: WorkItem) -> None:
        self.sent[item.item_id] += 1
        self.largest = max(self.largest, len(item.model_dump_json().encode()))
        super().send(item)

    def send_all(self, items: Sequence[WorkItem]) -> None:
        half = len(items) // 2
        super().send_all(items[:half])
        if self.mid_send is not None:
            self.mid_send()
        super().send_all(items[half:])


@dataclass
class World:
    clients: int
    clock: SimClock = field(default_factory=SimClock)
    hook: Counting = field(default_factory=Counting)
    of_run_reads: int = 0

    def __post_init__(self) -> None:
        self.store = MemoryStore(self.clock, self.hook)
        self.queues = Queues(self.clock)
        self.queues.ensure_pool(POOL)
        self.artifacts = MemoryArtifacts()
        self.service = RunService(
            self.store,
            self.queues,
            self.artifacts,
            clock=self.clock,
            pools=(POOL,),
            pool_configs=(PoolConfig(name=POOL, size=self.clients),),
        )
        whole_run = self.store.items.of_run

        def counted(run_id: str) -> tuple[list[Step], list[Item]]:
            self.of_run_reads += 1
            return whole_run(run_id)

        self.store.items.of_run = counted  # type: ignore[method-assign]
        self.claimed: list[tuple[WorkItem, AgentRef]] = []

    def claim_visible(self) -> None:
        """Every agent without an item takes the next visible message and claims it."""
        while (msg := self.queues.receive(POOL, 600)) is not None:
            w = WorkItem.model_validate_json(msg.content)
            agent = AgentRef(f"agent-{len(self.claimed)}", principal=f"oid-{len(self.claimed)}")
            decision = self.service.claim(w, agent=agent, dequeue_count=1, message_id=msg.id)
            if decision.action == "run":
                self.claimed.append((w, agent))

    def started_and_measured(self) -> tuple[str, int]:
        """Submit a run of ``clients``, claim and ready every client, and move the clock past
        its measured seconds: the run's id and its start instant (ms)."""
        body = {"pool": POOL, "target": "a", "clients": self.clients, "workload": WORKLOAD}
        run, _ = self.service.submit(body)
        self.claim_visible()
        assert len(self.claimed) == self.clients
        for w, agent in self.claimed:
            decision = self.service.ready(w.run_id, w.item_id, agent, 20)
        assert decision.status == "go" and decision.start_at_ms is not None
        start = decision.start_at_ms
        self.clock.advance((start - self.clock.ms()) / 1000 + RUNTIME_S + 0.5)
        return run.id, start

    def uploaded_results(
        self, start: int, protocol: Callable[[int], int] = lambda client: 2
    ) -> list[tuple[Result, AgentRef]]:
        """Each claimed client's result measured from ``start``, its artifacts put through
        the service, or carried in the result as an agent does that speaks agent
        ``protocol(client)`` (core.artifacts.uploads); the results not stored yet."""
        measurements = Measurements()
        results = []
        for w, agent in self.claimed:
            made = measurements.of(
                w, RATE, agent_id=agent.id, host=HOST, scheduled_ms=start, started_ms=start
            )
            up = uploads(made.artifacts, protocol(w.client))
            for name, data in up.sent.items():
                self.service.put_artifact(w.run_id, w.item_id, name, data, agent)
            results.append((made.result.model_copy(update=up.result_fields(made.artifacts)), agent))
        return results

    def run(self, protocol: Callable[[int], int] = lambda client: 2) -> str:
        """Submit a run of ``clients``, claim, ready, start and report every client."""
        run_id, start = self.started_and_measured()
        for result, agent in self.uploaded_results(start, protocol):
            assert self.service.store_result(result.model_dump(mode="json"), agent)
        assert self.store.runs.get(run_id).state == RunState.COMPLETED
        return run_id

    def largest_documents(self) -> dict[str, int]:
        """Each container's largest document, in bytes of JSON as Cosmos DB measures it."""
        return {
            name: max(len(json.dumps(d, separators=(",", ":")).encode()) for d in t.docs.values())
            for name, t in self.store.table.items()
            if t.docs
        }


@pytest.fixture(scope="module")
def forty() -> tuple[World, str]:
    world = World(40)
    return world, world.run()


@pytest.fixture(scope="module")
def thousand() -> tuple[World, str]:
    world = World(MAX_CLIENTS)
    return world, world.run()


@pytest.mark.slow
def test_a_run_may_have_a_thousand_clients_and_every_document_fits(
    thousand: tuple[World, str],
) -> None:
    """Every write of the run went through the store's 2 MB check (it would have raised
    TooLarge) and every message through the 64 KiB check; the largest are well within."""
    world, run_id = thousand
    assert MAX_CLIENTS == 1000
    largest = world.largest_documents()
    assert max(largest.values()) < MAX_DOCUMENT_BYTES / 2, largest
    assert world.queues.largest < 16 * 1024
    (agg,) = world.store.results.list_aggregates(run_id)
    assert agg.clients == 1000 and len(agg.per_client) == 1000
    assert agg.read is not None and agg.read.iops == pytest.approx(1000 * RATE.iops, rel=1e-6)


@pytest.mark.slow
def test_each_of_a_thousand_items_is_sent_once(thousand: tuple[World, str]) -> None:
    world, _ = thousand
    assert len(world.queues.sent) == 1000 and set(world.queues.sent.values()) == {1}


def test_agents_claiming_while_the_step_is_still_sent_do_not_send_it_again() -> None:
    """Issue 29: every claim of a queued run advanced it, and while its first step was
    still going out, each sent the step again (5.2 sends per item at 64 clients, the items
    created again with 409s). Here half the agents claim halfway through the send."""
    world = World(40)
    world.queues.mid_send = world.claim_visible
    world.run()
    assert len(world.queues.sent) == 40 and set(world.queues.sent.values()) == {1}
    # The items, the step, and its barrier's 16 shards (core.models.barrier_shard).
    assert world.hook.calls[("items", "create")] == 40 + 1 + 16


def whole_run_costs(clients: int) -> tuple[Counter[tuple[str, str]], int]:
    world = World(clients)
    world.run()
    return world.hook.calls, world.of_run_reads


def test_calls_per_client_do_not_grow_with_the_clients() -> None:
    """Every (container, operation) costs a + b x clients over a whole run: the same extra
    calls for each client added, from 20 to 40 and from 40 to 60 (each with the barrier's 16
    shards: a step of fewer clients has fewer). The run's items are read whole a constant
    number of times per run (was: by every claim and every result)."""
    (c20, r20), (c40, r40), (c60, r60) = (whole_run_costs(n) for n in (20, 40, 60))
    for key in set(c20) | set(c40) | set(c60):
        assert c60[key] - c40[key] == c40[key] - c20[key], key
    assert r20 == r40 == r60 <= 4


def test_a_claim_reads_no_other_item_of_the_run() -> None:
    """Issue 29: a claim read every item of the run to see whether its agent held another
    of the step. It costs the same at 2 and at 50 clients, and no query."""

    def claim_cost(clients: int) -> dict[tuple[str, str], int]:
        world = World(clients)
        body = {"pool": POOL, "target": "a", "clients": clients, "workload": WORKLOAD}
        world.service.submit(body)
        for _ in range(clients - 1):  # the others first: the run shows running
            msg = world.queues.receive(POOL, 600)
            assert msg is not None
            w = WorkItem.model_validate_json(msg.content)
            agent = AgentRef(f"agent-{w.client}")
            world.service.claim(w, agent=agent, dequeue_count=1, message_id=msg.id)
        msg = world.queues.receive(POOL, 600)
        assert msg is not None
        w = WorkItem.model_validate_json(msg.content)
        world.hook.calls.clear()
        decision = world.service.claim(
            w, agent=AgentRef("last"), dequeue_count=1, message_id=msg.id
        )
        assert decision.action == "run"
        return dict(world.hook.calls)

    two, fifty = claim_cost(2), claim_cost(50)
    assert two == fifty
    assert not any(op == "query" for _, op in fifty), fifty


def test_an_agent_holding_an_item_of_the_step_is_told_to_release_another() -> None:
    """The step's record of who claimed what still finds the agent's other item."""
    world = World(3)
    body = {"pool": POOL, "target": "a", "clients": 3, "workload": WORKLOAD}
    world.service.submit(body)
    agent = AgentRef("twice")
    first, second = (world.queues.receive(POOL, 600) for _ in range(2))
    assert first is not None and second is not None
    w1, w2 = (WorkItem.model_validate_json(m.content) for m in (first, second))
    assert world.service.claim(w1, agent=agent, dequeue_count=1, message_id=first.id).action == (
        "run"
    )
    again = world.service.claim(w2, agent=agent, dequeue_count=1, message_id=second.id)
    assert again.action == "release" and w1.item_id in again.reason


class SlowArtifacts(MemoryArtifacts):
    """Each read takes 20 ms, as a blob's round trip; the most at once is recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()

    def get(self, run_id: str, owner: str, name: str) -> bytes:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1
        return super().get(run_id, owner, name)


def test_the_timelines_are_fetched_several_at_once(forty: tuple[World, str]) -> None:
    """Issue 29: aggregation fetched the timelines one at a time. 40 of them, at 20 ms
    each, arrive in well under the 0.8 s one after another would take, all of them."""
    world, run_id = forty
    slow = SlowArtifacts()
    slow.blobs = world.artifacts.blobs
    results = world.store.results.of_run(run_id)
    t0 = time.perf_counter()
    found = timelines(slow, run_id, results)
    took = time.perf_counter() - t0
    assert sorted(found) == sorted(r.item_id for r in results)
    assert found == timelines(world.artifacts, run_id, results)
    assert slow.most > 1 and took < 0.4


def test_the_timelines_are_read_while_the_results_are_queried(forty: tuple[World, str]) -> None:
    """Issue 29.2: the last result's request queried the run's results (about a second for a
    thousand on the local stack) and only then began to read their timelines. Each completed
    item has its result, so its timeline is read meanwhile; the aggregate is the same."""
    world, run_id = forty
    slow = SlowArtifacts()
    slow.blobs = world.artifacts.blobs
    first_get: list[float] = []
    queried: list[float] = []
    get, of_run = slow.get, world.store.results.of_run

    def noted_get(run: str, owner: str, name: str) -> bytes:
        first_get.append(time.monotonic())
        return get(run, owner, name)

    def slow_of_run(run: str) -> Sequence[Result]:
        time.sleep(0.3)
        queried.append(time.monotonic())
        return of_run(run)

    slow.get = noted_get  # type: ignore[method-assign,assignment]
    results = SimpleNamespace(
        of_run=slow_of_run, get=world.store.results.get, create_aggregate=lambda agg: True
    )
    store = cast(Store, SimpleNamespace(results=results))
    run = world.store.runs.get(run_id)
    steps, items = world.store.items.of_run(run_id)
    before = build_aggregates(
        run,
        steps,
        items,
        of_run(run_id),
        timelines(world.artifacts, run_id, of_run(run_id)),
        now_ms=world.clock.ms(),
    )
    aggregate_and_judge(store, slow, None, run, steps, items, world.clock.ms())
    assert first_get and queried and min(first_get) < queried[0]
    stored = unpack_json(slow.blobs[f"runs/{run_id}/{run_id}.s0/series"])
    assert stored == before[0].series


def test_a_thousand_idle_simulated_clients_poll_the_queue_at_most_50_times_a_second() -> None:
    """Issue 29: each idle client polled 4 times a second, 4,000 a second for a thousand.
    Each backs off (doubling from idle_min_s) to an interval that bounds the fleet's polls;
    ten clients keep the agent's quick 0.25 s."""
    for count, most in ((10, 0.25), (1000, 20.0)):
        fleet = Fleet("http://127.0.0.1:1", "http://127.0.0.1:2", POOL, count, RATE, ["a"])
        try:
            assert fleet.idle_max_s == most
            assert count / fleet.idle_max_s <= FLEET_IDLE_POLLS_PER_S  # at the mean jitter
        finally:
            fleet.shutdown()


def test_a_sender_that_could_not_reach_the_queue_gives_its_lease_back() -> None:
    """The outbox sends the step again after its first backoff (1 s), not after the lease."""
    world = World(5)
    failing = [True]
    send_all = world.queues.send_all

    def flaky(items: Sequence[WorkItem]) -> None:
        if failing:
            failing.clear()
            raise StoreUnavailable("cannot send (simulated)", "the queue service")
        send_all(items)

    world.queues.send_all = flaky  # type: ignore[method-assign]
    body = {"pool": POOL, "target": "a", "clients": 5, "workload": WORKLOAD}
    world.service.submit(body)
    assert not world.queues.sent
    world.clock.advance(2)
    world.service.tick()
    assert len(world.queues.sent) == 5 and set(world.queues.sent.values()) == {1}
