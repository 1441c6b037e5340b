"""The ports' contract (tests/test_ports_contract.py), the queue's and the artifacts' part:
visibility timeouts and redelivery, leases renewed to zero, poison and the 64 KiB limit, a
clean order on the pool's queue, artifacts stored as given; and the in-memory faults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.queue import poison_queue_name
from core.errors import BenchError, LeaseLost, NotFound, PartialSend
from core.memory import Effect, MemoryStore, SimClock
from core.models import WorkItem
from tests.ports_world import Ports, a_run, new_id, open_ports, work


# The servers' side is fetched by name (tests/ports_world.py), which tests/lanes.py cannot
# see: marked here.
@pytest.fixture(params=["memory", pytest.param("azure", marks=pytest.mark.stack)])
def ports(request: pytest.FixtureRequest, pool: str) -> Iterator[Ports]:
    yield from open_ports(request, pool)


def test_a_received_message_is_hidden_for_its_visibility_timeout_then_redelivered(
    ports: Ports,
) -> None:
    q = ports.queues
    item = work(new_id(), ports.pool)
    q.send(item)
    first = q.receive(ports.pool, visibility_timeout=2)
    assert first is not None and first.dequeue_count == 1
    assert WorkItem.model_validate_json(first.content) == item
    assert q.receive(ports.pool, visibility_timeout=2) is None  # hidden while held
    ports.wait(2.5)
    second = q.receive(ports.pool, visibility_timeout=30)
    assert second is not None and second.id == first.id and second.dequeue_count == 2
    assert second.pop_receipt != first.pop_receipt
    with pytest.raises(LeaseLost):  # the first receiver's lease is gone
        q.renew(ports.pool, first, 30)
    with pytest.raises(LeaseLost):
        q.delete(ports.pool, first)
    renewed = q.renew(ports.pool, second, 30)
    assert renewed.pop_receipt != second.pop_receipt
    with pytest.raises(LeaseLost):  # only the newest receipt holds it
        q.delete(ports.pool, second)
    q.delete(ports.pool, renewed)
    assert q.receive(ports.pool, visibility_timeout=1) is None


def test_a_receipt_whose_visibility_ran_out_renews_until_another_receive(ports: Ports) -> None:
    """What a holder relies on after a queue outage longer than its visibility
    (agent/lease.py): nobody received its message meanwhile, so its receipt still holds."""
    q = ports.queues
    q.send(work(new_id(), ports.pool))
    held = q.receive(ports.pool, visibility_timeout=1)
    assert held is not None
    ports.wait(1.5)  # visible again, and nobody received it
    renewed = q.renew(ports.pool, held, 30)
    assert q.receive(ports.pool, visibility_timeout=30) is None  # hidden again: still held
    q.delete(ports.pool, renewed)


def test_a_renewal_to_zero_hands_the_message_back_at_once(ports: Ports) -> None:
    q = ports.queues
    q.send(work(new_id(), ports.pool))
    held = q.receive(ports.pool, visibility_timeout=30)
    assert held is not None
    q.renew(ports.pool, held, 0)
    again = q.receive(ports.pool, visibility_timeout=30)
    assert again is not None and again.id == held.id and again.dequeue_count == 2
    q.delete(ports.pool, again)


def test_poison_and_the_64_kib_limit(ports: Ports) -> None:
    q = ports.queues
    name = poison_queue_name(ports.pool)
    before = q.approximate_count(name)
    q.send_poison(ports.pool, "a poisoned work item")
    assert q.approximate_count(name) == before + 1
    # 48 KiB of JSON is 64 KiB in Base64, the queue's limit: refused before it is sent.
    too_big = work(new_id(), ports.pool).model_copy(update={"targets": ["x" * 49_000]})
    with pytest.raises(BenchError, match="64 KiB"):
        q.send(too_big)


def drain(ports: Ports) -> list[WorkItem]:
    got = []
    while (m := ports.queues.receive(ports.pool, visibility_timeout=30)) is not None:
        ports.queues.delete(ports.pool, m)
        got.append(WorkItem.model_validate_json(m.content))
    return got


def test_a_steps_messages_go_out_together_each_once_or_the_first_error_after_all(
    ports: Ports,
) -> None:
    """send_all (issue 29.3: the adapter sends several at once): every item once; an item
    over the limit refuses the lot before any is sent; a send that fails (a queue that is
    not there) fails the call once the others were sent, naming it (PartialSend: the outbox
    sends it again, and only it)."""
    q = ports.queues
    drain(ports)
    run_id = new_id()
    step = [work(run_id, ports.pool, c) for c in range(20)]
    q.send_all(step)
    got = drain(ports)
    assert sorted(w.item_id for w in got) == sorted(w.item_id for w in step)
    too_big = step[5].model_copy(update={"targets": ["x" * 49_000]})
    with pytest.raises(BenchError, match="64 KiB"):
        q.send_all([*step[:5], too_big, *step[6:]])
    assert drain(ports) == []
    lost = step[3].model_copy(update={"pool": f"{ports.pool}-none"})
    with pytest.raises(PartialSend) as caught:
        q.send_all([*step[:3], lost, *step[4:]])
    assert caught.value.unsent == [lost.item_id]
    assert sorted(w.item_id for w in drain(ports)) == sorted(
        w.item_id for w in step if w.item_id != lost.item_id
    )


def test_a_clean_order_goes_on_the_pools_work_queue(ports: Ports) -> None:
    q = ports.queues
    while (stale := q.receive(ports.pool, visibility_timeout=1)) is not None:
        q.delete(ports.pool, stale)
    q.send_clean(ports.pool, '{"kind": "clean"}')
    got = q.receive(ports.pool, visibility_timeout=30)
    assert got is not None and got.content == '{"kind": "clean"}'
    q.delete(ports.pool, got)


def test_artifacts_are_stored_as_given_and_overwritten(ports: Ports) -> None:
    a = ports.artifacts
    run_id = new_id()
    with pytest.raises(NotFound):
        a.get(run_id, "owner", "raw")
    a.put(run_id, "owner", "raw", b"\x00\x01first")
    a.put(run_id, "owner", "raw", b"second")
    assert a.get(run_id, "owner", "raw") == b"second"
    assert a.size(run_id, "owner", "raw") == 6
    with pytest.raises(NotFound):
        a.size(run_id, "owner", "logs")


def test_an_artifact_is_created_only_where_none_is(ports: Ports) -> None:
    """core.receipts' key: instances that find none at once keep the first one written."""
    a = ports.artifacts
    run_id = new_id()
    assert a.create(run_id, "owner", "key", b"first") is True
    assert a.create(run_id, "owner", "key", b"second") is False
    assert a.get(run_id, "owner", "key") == b"first"


def test_memory_faults_lose_answers_or_hold_writes_until_resumed() -> None:
    """What the simulation injects (the real servers do it when killed or paused): a write
    applied whose answer is lost, and a write held until the server resumes, stamped then."""
    clock = SimClock()
    effects: list[Effect] = []

    def faults(op: str, table: str, key: str) -> Effect:
        return effects.pop(0) if effects else "ok"

    store = MemoryStore(clock, faults)
    effects.append("lost")
    run = a_run("p")
    with pytest.raises(BenchError):
        store.runs.create(run)
    assert store.runs.get(run.id).id == run.id  # done all the same
    effects.append("defer")
    late = a_run("p")
    with pytest.raises(BenchError):
        store.runs.create(late)
    with pytest.raises(NotFound):
        store.runs.get(late.id)
    clock.advance(7)
    assert store.tables.apply_deferred() == 1
    stored = store.runs.get(late.id)
    assert stored.ts == int(clock())
