"""The start barrier over shards (issue 29.2): no claim or ready report rewrites a document
that grows with the clients, and the step starts exactly when every client is ready.

At 1,000 clients every claim and ready report rewrote the one step document (~100 KB of
per-client maps) by compare-and-swap: 62,752 replaces for 6,401 requests, 762 requests
gave up, the sender's "sent" mark among them. Counted on the in-memory store (core.memory),
which sees every call the Cosmos DB adapter would make."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import cast

import pytest

from adapters.cosmos.base import Container
from adapters.cosmos.items import CosmosItems
from core.errors import NotFound, StoreUnavailable
from core.models.barrier_shard import SHARDS, shard_count, shard_of, shard_size
from core.models.holder import AgentRef
from core.models.state import ItemState
from core.models.stored import Step
from core.ports import Store
from core.runs import barrier
from core.runs.cas import Contended
from core.runs.sending import MARK_SENT_TRIES, marking_sent
from tests.test_report_calls import claimed_step


def _size(doc: object) -> int:
    return len(json.dumps(doc, separators=(",", ":")).encode())


def written_sizes(clients: int) -> tuple[int, int, dict[tuple[str, str], int]]:
    """The step document's size once every client is ready, the largest shard's, and
    what the first ready report cost (its shard not yet complete)."""
    s = claimed_step(clients)
    ids = [w.item_id for w in s.work]
    cost = s.cost(lambda: s.service.ready(s.run_id, ids[0], s.agents[0], 20))
    for i in range(1, clients - 1):
        assert s.service.ready(s.run_id, ids[i], s.agents[i], 20).status == "wait"
    assert s.service.ready(s.run_id, ids[-1], s.agents[-1], 20).status == "go"
    step = s.store.items.get_step(s.run_id, 0)
    shards = barrier.shards(s.store, step)
    return _size(step.doc()), max(_size(x.doc()) for x in shards), cost


def test_the_step_document_does_not_grow_with_the_clients_and_a_ready_writes_two() -> None:
    small, shard_small, cost_small = written_sizes(20)
    large, shard_large, cost_large = written_sizes(200)
    assert large - small < 200  # the ready shards' numbers, not a map of the clients
    assert shard_large < 12 * shard_small  # ceil(200 / 16) entries against 2
    # Its item and its shard, each read and replaced, and the step read (a shard not
    # complete does not write it); the shard is created by its first ready.
    assert cost_small == cost_large
    assert cost_large == {("items", "read"): 3, ("items", "replace"): 1, ("items", "create"): 1}


def test_shards_share_the_clients_out() -> None:
    for clients in (1, 2, 15, 16, 17, 1000):
        count = shard_count(clients)
        assert count == min(SHARDS, clients)
        assert sum(shard_size(k, clients) for k in range(count)) == clients
        assert {shard_of(c, clients) for c in range(clients)} == set(range(count))


def test_a_client_claimed_again_must_be_ready_again_before_the_step_starts() -> None:
    """Its shard was complete and recorded on the step; the claim again takes the client out
    of it and the shard out of the step: the other clients' readiness does not start it."""
    s = claimed_step(3)
    ids = [w.item_id for w in s.work]
    assert s.service.ready(s.run_id, ids[0], s.agents[0], 20).status == "wait"
    assert s.service.ready(s.run_id, ids[1], s.agents[1], 20).status == "wait"
    assert s.store.items.get_step(s.run_id, 0).ready_shards == [0, 1]
    # Client 0's holder lost its lease: another agent takes the message again.
    w0, late = s.work[0], AgentRef("agent-late", principal="oid-late")
    item = s.store.items.get_item(s.run_id, ids[0])
    again = s.service.claim(
        w0, agent=late, dequeue_count=item.attempts + 1, message_id=item.message_id or ""
    )
    assert again.action == "run"
    assert s.store.items.get_step(s.run_id, 0).ready_shards == [1]
    assert s.service.ready(s.run_id, ids[2], s.agents[2], 20).status == "wait"
    assert s.store.items.get_step(s.run_id, 0).start_at_ms is None
    go = s.service.ready(s.run_id, ids[0], late, 20)
    assert go.status == "go" and go.start_at_ms is not None


def test_a_shard_recorded_but_no_longer_complete_is_dropped_not_started_on() -> None:
    """A ready report's shard write and its step write are two writes: a client taken out
    between them leaves the step naming a shard that is not complete. The write that makes
    the set whole reads every shard afresh and drops it."""
    s = claimed_step(2)
    ids = [w.item_id for w in s.work]
    assert s.service.ready(s.run_id, ids[0], s.agents[0], 20).status == "wait"
    step = s.store.items.get_step(s.run_id, 0)
    barrier.leave(s.service.lifecycle, step, 0)  # out of shard 0, and shard 0 off the step
    step = s.store.items.get_step(s.run_id, 0)
    # The ready report that raced it records shard 0 after all (its step write came last).
    step = s.service.lifecycle.update_step(
        s.run_id, 0, lambda x: setattr(x, "ready_shards", [0]), read=step
    )
    assert s.service.ready(s.run_id, ids[1], s.agents[1], 20).status == "wait"
    step = s.store.items.get_step(s.run_id, 0)
    assert step.start_at_ms is None and step.ready_shards == [1]


def test_every_client_ready_but_unrecorded_starts_at_the_deadline_not_fails() -> None:
    """A crash between the last shard's write and the step's: the deadline's check finds
    every shard complete and starts the step rather than failing it."""
    s = claimed_step(2)
    ids = [w.item_id for w in s.work]
    assert s.service.ready(s.run_id, ids[0], s.agents[0], 20).status == "wait"
    step = s.store.items.get_step(s.run_id, 0)

    # Client 1 is ready on its item and in its shard; the step write never came.
    life = s.service.lifecycle
    life.update_item(s.run_id, ids[1], lambda d: d.move(ItemState.READY))
    shard = barrier.shards(s.store, step)[1]
    shard.ready["1"] = s.agents[1].id
    s.store.items.create_shard(shard)
    assert s.store.items.get_step(s.run_id, 0).start_at_ms is None
    step = barrier.settle(life, s.store.items.get_step(s.run_id, 0), barrier.default_lead)
    assert step.start_at_ms is not None


def test_the_sent_mark_is_tried_again_when_the_step_is_contended() -> None:
    tries: list[int] = []
    pauses: list[float] = []

    def mark() -> None:
        tries.append(1)
        if len(tries) < 3:
            raise Contended("step kept changing under us")

    marking_sent(mark, pauses.append)
    assert len(tries) == 3 and len(pauses) == 2

    def never() -> None:
        raise StoreUnavailable("down", "Cosmos DB")

    with pytest.raises(StoreUnavailable):
        marking_sent(never, pauses.append)
    assert len(pauses) == 2 + MARK_SENT_TRIES - 1


class _MeetingContainer:
    """A Cosmos DB container whose point reads each wait for three others to be in flight
    (and then find nothing): read one after another, the first never returns."""

    def __init__(self) -> None:
        self.meeting = threading.Barrier(4, timeout=10)
        self.reads = 0

    def read(self, id_: str, pk: str) -> dict[str, object]:
        self.reads += 1
        self.meeting.wait()
        raise NotFound(id_)


def test_the_report_completing_a_step_reads_its_shards_at_once() -> None:
    """The report that completes the set reads every shard before it sets the start
    instant: through the Cosmos DB adapter, at once (issue 29.3: 16 reads one after another
    were 90-120 ms of that report at 32 clients, on the way to the start)."""
    container = _MeetingContainer()
    store = cast("Store", SimpleNamespace(items=CosmosItems(cast("Container", container))))
    step = Step(id="r-x.s0", run_id="r-x", step=0, clients=32)
    got = barrier.shards(store, step)
    assert container.reads == 16
    assert [s.shard for s in got] == list(range(16)) and not any(s.ready for s in got)
