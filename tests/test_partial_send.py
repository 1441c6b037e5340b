"""A step's send that failed part-way is completed with only the messages it did not get
out (issue 29.2: one send that timed out had the outbox send all 1,000 again, 2,450 sends
for 1,000 items): on the in-memory store, whose queues keep the adapter's contract, and
the adapter's own PartialSend when Azure Storage cannot be reached."""

from __future__ import annotations

import socket
from collections import Counter
from functools import partial

import pytest

from adapters.queue import WorkQueues
from core.errors import PartialSend, StoreUnavailable
from core.memory import MemoryQueues
from core.models import WorkItem
from tests.test_thousand_clients import POOL, WORKLOAD, World

CLIENTS = 40


@pytest.mark.unit
def test_a_send_that_failed_part_way_sends_only_what_it_left_each_time() -> None:
    """Every 4th client's first send fails, and client 0's second too: the sender tries
    those 10 once more at once (the 9 then go), and leaves client 0 to the outbox's retry,
    which sends client 0 only; each item goes out once and is created once."""
    world = World(CLIENTS)
    attempts: Counter[str] = Counter()
    send = world.queues.send

    def flaky(item: WorkItem) -> None:
        attempts[item.item_id] += 1
        fails = 2 if item.client == 0 else 1 if item.client % 4 == 0 else 0
        if attempts[item.item_id] <= fails:
            raise StoreUnavailable("cannot send (simulated)", "the queue service")
        send(item)

    world.queues.send = flaky  # type: ignore[method-assign]
    # The memory queues' own send_all (every item tried), not World's halving one.
    world.queues.send_all = partial(MemoryQueues.send_all, world.queues)  # type: ignore[method-assign]
    body = {"pool": POOL, "target": "a", "clients": CLIENTS, "workload": WORKLOAD}
    run, _ = world.service.submit(body)
    step = world.store.items.get_step(run.id, 0)
    assert sum(attempts.values()) == CLIENTS + 10  # the 10 failed, once more: no other
    assert len(world.queues.sent) == CLIENTS - 1 and not step.enqueued
    assert step.unsent == [0]
    created = world.hook.calls[("items", "create")]

    world.clock.advance(2)
    world.service.tick()
    step = world.store.items.get_step(run.id, 0)
    assert sum(attempts.values()) == CLIENTS + 10 + 1
    assert len(world.queues.sent) == CLIENTS and set(world.queues.sent.values()) == {1}
    assert step.enqueued and step.unsent is None
    assert world.hook.calls[("items", "create")] == created  # none created again
    world.claim_visible()
    assert len(world.claimed) == CLIENTS


@pytest.mark.unit
def test_the_adapter_names_every_message_it_could_not_send() -> None:
    """Nothing listens on the port: each send fails, and PartialSend names all of them."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queues = WorkQueues.connect(
        f"http://127.0.0.1:{port}/devstoreaccount1", local_emulators=True, retries=0
    )
    run = "r-" + "0" * 32
    items = [
        WorkItem.model_validate(
            {
                "run_id": run,
                "item_id": f"{run}.s0.c{c}",
                "step": 0,
                "client": c,
                "clients": 3,
                "pool": POOL,
                "targets": ["a"],
                "engine": "fio",
                "workload": WORKLOAD,
            }
        )
        for c in range(3)
    ]
    with pytest.raises(PartialSend) as caught:
        queues.send_all(items)
    assert sorted(caught.value.unsent) == sorted(i.item_id for i in items)
