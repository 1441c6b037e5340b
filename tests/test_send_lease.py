"""A step's sender renews its send lease while it sends (issue 29: Azurite sent 3-8 messages
a second under load, a send of 1,000 items outlasted its lease, and the timer created and
sent the whole step again beside it, 5.7 sends per item).

On the in-memory store and queues (core.memory), with a clock the queue moves as it sends:
a live sender slower than its lease is never overtaken; a sender killed mid-send is taken
over once its lease lapses, and the next sender sends only what the dead one had not
recorded as sent; every item is claimed to run exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import PartialSend
from core.models import WorkItem
from core.models.stored import Step
from core.runs import sending
from core.runs.sender import StepSender
from core.runs.sending import (
    RENEW_EVERY_MS,
    SEND_LEASE_MS,
    SendInProgress,
    lapses_ms,
    next_chunk,
    taking_send,
)
from tests.test_thousand_clients import POOL, WORKLOAD, World


class Killed(BaseException):
    """The API process died in the middle of the send: nothing in the service catches it,
    as nothing catches a SIGKILL (no lease given back, no progress written)."""


def body(clients: int) -> dict[str, object]:
    return {"pool": POOL, "target": "a", "clients": clients, "workload": WORKLOAD}


def slow_queue(
    world: World, seconds: float, every: Callable[[int], None] | None = None
) -> Callable[[WorkItem], None]:
    """Each message takes ``seconds`` of the world's clock; ``every(n)`` runs after the
    n-th. Returns the queue's own send, to put back."""
    send = world.queues.send

    def slow(item: WorkItem) -> None:
        world.clock.advance(seconds)
        send(item)
        if every is not None:
            every(sum(world.queues.sent.values()))

    world.queues.send = slow  # type: ignore[method-assign]
    return send


def refusals(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every attempt to take a step's send lease, True when it was refused."""
    seen: list[bool] = []
    take = sending.taking_send

    def recorded(now_ms: int, taken: list[bool]) -> Callable[[Step], bool | None]:
        change = take(now_ms, taken)

        def wrapped(s: Step) -> bool | None:
            out = change(s)
            seen.append(not taken[0])
            return out

        return wrapped

    monkeypatch.setattr(sending, "taking_send", recorded)
    return seen


@pytest.mark.unit
def test_a_sender_slower_than_its_lease_keeps_the_step_while_it_renews(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """100 messages at 1 s each: the send lasts 100 s, more than three leases. Every 10
    messages the timer ticks and another API instance advances the run: each finds the
    lease held and leaves the step to its sender, which sends each item once."""
    world = World(100)
    refused = refusals(monkeypatch)
    run_ids: list[str] = []

    def others(sent: int) -> None:
        if sent % 10 == 0:
            world.service.tick()
            world.service.lifecycle.advance(run_ids[0])

    began = world.clock.ms()
    slow_queue(world, 1.0, others)
    send_all = world.queues.send_all

    def noting_run(items: Sequence[WorkItem]) -> None:
        run_ids[:] = [items[0].run_id]
        send_all(items)

    world.queues.send_all = noting_run  # type: ignore[method-assign]
    run, _ = world.service.submit(body(100))
    took_ms = world.clock.ms() - began
    assert took_ms >= 100_000 > 3 * SEND_LEASE_MS
    assert len(world.queues.sent) == 100 and set(world.queues.sent.values()) == {1}
    # The items and the step: none created again.
    assert world.hook.calls[("items", "create")] == 100 + 1
    assert refused.count(True) >= 10  # the others looked, and left it
    step = world.store.items.get_step(run.id, 0)
    assert step.enqueued and step.unsent is None
    world.claim_visible()
    assert sorted(w.client for w, _ in world.claimed) == list(range(100))


@pytest.mark.unit
def test_while_a_sender_renews_the_timer_reads_the_run_once_a_lease_not_every_tick() -> None:
    """The timer ticking every second through a 100 s send: the run is due again when the
    lease would lapse (at most a lease after its last renewal), so its items are read a
    handful of times, not at each of the 90 ticks after it fell due (10 s after the POST;
    each read of a 1,000-item run is a query of 1,000 documents)."""
    world = World(100)

    def tick(_: int) -> None:
        world.service.tick()

    slow_queue(world, 1.0, tick)
    world.service.submit(body(100))
    assert len(world.queues.sent) == 100 and set(world.queues.sent.values()) == {1}
    # The intake's two reads (before and after the send), and the timer's, one per lease
    # less a renewal's interval.
    assert world.of_run_reads <= 2 + -(-100_000 // (SEND_LEASE_MS - RENEW_EVERY_MS))


def killed_mid_send(clients: int, kill_at: int, seconds: float) -> tuple[World, str, list[str]]:
    """Submit a run whose sender dies as it is about to send its ``kill_at``-th message;
    the world, the run and the items it sent."""
    world = World(clients)
    send = slow_queue(world, seconds)
    slow = world.queues.send
    run_ids: list[str] = []

    def dying(item: WorkItem) -> None:
        run_ids[:] = [item.run_id]
        if sum(world.queues.sent.values()) == kill_at:
            raise Killed
        slow(item)

    world.queues.send = dying  # type: ignore[method-assign]
    with pytest.raises(Killed):
        world.service.submit(body(clients))
    world.queues.send = send  # type: ignore[method-assign,assignment]
    return world, run_ids[0], list(world.queues.sent)


@pytest.mark.unit
def test_a_sender_killed_mid_send_is_taken_over_after_its_lease_and_only_the_rest_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed at its 57th message of 100 (1 s each): until its lease lapses, the timer
    leaves the step; then it takes the step over and sends exactly the clients the dead
    sender had recorded as not sent, each once, without creating the items again. The
    only items sent twice are those the dead sender sent after its last renewal (at most
    a renewal's interval of them), and each of those runs once: its second copy is dropped
    at claim."""
    world, run_id, dead_sent = killed_mid_send(100, 57, 1.0)
    assert len(dead_sent) == 57
    step = world.store.items.get_step(run_id, 0)
    recorded = step.unsent
    assert recorded is not None and not step.enqueued
    created = world.hook.calls[("items", "create")]
    lapses = lapses_ms(step)
    assert lapses is not None and lapses - world.clock.ms() < SEND_LEASE_MS

    world.clock.advance((lapses - world.clock.ms() - 1) / 1000)
    world.service.tick()
    assert sum(world.queues.sent.values()) == 57  # its lease holds until it lapses

    world.clock.advance(0.002)
    world.service.tick()
    twice = sorted(i for i, n in world.queues.sent.items() if n == 2)
    by_client = {f"{run_id}.s0.c{c}" for c in recorded}
    assert len(world.queues.sent) == 100 and max(world.queues.sent.values()) <= 2
    assert Counter(world.queues.sent) - Counter(dead_sent) == Counter(by_client)
    assert set(twice) == by_client & set(dead_sent)
    assert len(twice) <= 2 * RENEW_EVERY_MS // 1000
    assert world.hook.calls[("items", "create")] == created  # none created again
    assert world.store.items.get_step(run_id, 0).enqueued

    world.claim_visible()
    assert sorted(w.client for w, _ in world.claimed) == list(range(100))


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    clients=st.integers(1, 60),
    kill_frac=st.floats(0, 1),
    seconds=st.sampled_from([0.05, 0.4, 1.0, 2.5]),
)
def test_whenever_a_sender_dies_every_item_is_sent_and_claimed_to_run_once(
    clients: int, kill_frac: float, seconds: float
) -> None:
    """Killed before any given message, at any pace of the queue: after its lease the
    timer sends the rest; no item is lost, none is sent more than twice, none runs twice."""
    kill_at = min(clients - 1, int(kill_frac * clients))
    world, run_id, dead_sent = killed_mid_send(clients, kill_at, seconds)
    step = world.store.items.get_step(run_id, 0)
    lapses = lapses_ms(step)
    assert lapses is not None
    world.clock.advance(max(0, lapses - world.clock.ms()) / 1000 + 0.001)
    world.service.tick()
    assert len(world.queues.sent) == clients and max(world.queues.sent.values()) <= 2
    assert {i for i, n in world.queues.sent.items() if n == 2} <= set(dead_sent)
    assert world.store.items.get_step(run_id, 0).enqueued
    world.claim_visible()
    assert sorted(w.client for w, _ in world.claimed) == list(range(clients))


# ---- the sender's rules, pure (a step document in hand, a clock the queue moves) --------


RUN = "r-" + "0" * 32


class Paced:
    """A sender of ``clients`` items over a queue whose n-th message takes ``times[n]`` ms,
    its step document updated in place (no other writer); every renewal recorded."""

    def __init__(self, clients: int, times: list[int], fail: set[int] | None = None) -> None:
        self.now = 0
        self.times = times
        self.fail = fail or set()
        self.step = Step(id="s", run_id=RUN, step=0, clients=clients)
        taken: list[bool] = []
        taking_send(0, taken)(self.step)
        self.sender = StepSender(0, 0, self.update, lambda: self.now)
        self.sent: list[int] = []
        self.worst_hold_ms = 0  # the longest time the lease went unrenewed
        self.records: list[tuple[list[int], set[int]]] = []  # (recorded unsent, not sent)
        first = WorkItem.model_validate(
            {
                "run_id": RUN,
                "item_id": f"{RUN}.s0.c0",
                "step": 0,
                "client": 0,
                "clients": clients,
                "pool": POOL,
                "targets": ["a"],
                "engine": "fio",
                "workload": WORKLOAD,
            }
        )
        self.work = [
            first.model_copy(update={"client": c, "item_id": f"{RUN}.s0.c{c}"})
            for c in range(clients)
        ]

    def update(self, change: Callable[[Step], bool | None]) -> Step:
        draft = self.step.model_copy(deep=True)
        if change(draft) is not False:
            self.step = draft
            if draft.unsent is not None:
                self.records.append((list(draft.unsent), self.not_sent()))
        return self.step

    def not_sent(self) -> set[int]:
        return set(range(len(self.work))) - set(self.sent)

    def send_all(self, items: Sequence[WorkItem]) -> None:
        failed = []
        for item in items:
            assert self.step.sending_ms is not None
            self.now += self.times[len(self.sent) % len(self.times)]
            self.worst_hold_ms = max(self.worst_hold_ms, self.now - self.step.sending_ms)
            if item.client in self.fail:
                failed.append(item.item_id)
                continue
            self.sent.append(item.client)
        if failed:
            raise PartialSend("cannot send (simulated)", failed)


@pytest.mark.unit
@settings(max_examples=40, deadline=None)
@given(
    clients=st.integers(1, 1000),
    base_ms=st.integers(1, 1200),
    jitter=st.lists(st.floats(1.0, 2.0), min_size=1, max_size=50),
)
def test_a_sender_keeps_its_lease_at_any_steady_pace_and_records_only_what_it_sent(
    clients: int, base_ms: int, jitter: list[float]
) -> None:
    """Each message takes between base and twice base (up to 2.4 s each, one at a time:
    25 a minute): the lease is never left unrenewed for SEND_LEASE_MS, every item is sent
    once, and every renewal records as not sent at least every item not yet sent (a
    sender taking over loses none)."""
    paced = Paced(clients, [int(base_ms * j) for j in jitter])
    paced.sender.send(paced.send_all, paced.work)
    assert sorted(paced.sent) == list(range(clients))
    assert paced.worst_hold_ms < SEND_LEASE_MS
    for recorded, not_sent in paced.records:
        assert set(recorded) >= not_sent


@pytest.mark.unit
@settings(max_examples=100, deadline=None)
@given(clients=st.integers(2, 300), fail=st.sets(st.integers(0, 299)))
def test_a_sender_tries_every_item_and_names_every_failed_one(clients: int, fail: set[int]) -> None:
    """Failures along the way do not stop the send: every item is tried once, PartialSend
    names exactly those that failed, and each renewal keeps them recorded as not sent."""
    fail = {c for c in fail if c < clients}
    paced = Paced(clients, [700], fail)
    if fail:
        with pytest.raises(PartialSend) as caught:
            paced.sender.send(paced.send_all, paced.work)
        assert sorted(caught.value.unsent) == sorted(f"{RUN}.s0.c{c}" for c in fail)
        assert paced.sender.left == sorted(fail)
    else:
        paced.sender.send(paced.send_all, paced.work)
    assert sorted(paced.sent) == sorted(set(range(clients)) - fail)
    for recorded, not_sent in paced.records:
        assert set(recorded) >= not_sent


@pytest.mark.unit
def test_a_sender_whose_lease_was_taken_over_stops() -> None:
    """Its lease lapsed (it stalled) and another sender took the step: at its next look it
    stops sending, and says when the other's lease lapses."""
    paced = Paced(50, [1000])
    sent_before: list[int] = []

    def stall_then_lose(items: Sequence[WorkItem]) -> None:
        paced.send_all(items)
        if len(paced.sent) >= 8 and not sent_before:
            sent_before.extend(paced.sent)
            paced.now += SEND_LEASE_MS
            taken: list[bool] = []
            taking_send(paced.now, taken)(paced.step)
            assert taken == [True]

    with pytest.raises(SendInProgress) as caught:
        paced.sender.send(stall_then_lose, paced.work)
    assert paced.sent == sent_before
    assert caught.value.lapses_ms == paced.now + SEND_LEASE_MS


@pytest.mark.unit
def test_the_lease_lapses_a_lease_after_its_last_renewal() -> None:
    """A step taken at 0 and renewed at 20 s is held until 50 s, whatever its size."""
    for clients in (2, 1000):
        step = Step(id="s", run_id="r", step=0, clients=clients, sending_ms=0)
        kept: list[bool] = []
        sending.renewing(0, 20_000, [1], kept)(step)
        assert kept == [True] and step.unsent == [1]
        taken: list[bool] = []
        taking_send(20_000 + SEND_LEASE_MS - 1, taken)(step)
        assert taken == [False]
        taking_send(20_000 + SEND_LEASE_MS, taken)(step)
        assert taken == [True] and step.sending_ms == 20_000 + SEND_LEASE_MS


@pytest.mark.unit
@given(size=st.integers(1, 10_000), took=st.integers(-5, 10_000_000))
def test_each_chunk_is_sized_to_take_a_renewal_interval_at_the_last_ones_rate(
    size: int, took: int
) -> None:
    chunk = next_chunk(size, took)
    assert 1 <= chunk <= sending.MAX_CHUNK
    if took > 0 and chunk > 1:
        assert chunk * took / size <= RENEW_EVERY_MS  # at the same rate, in time
