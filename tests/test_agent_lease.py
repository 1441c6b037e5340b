"""The agent's lease through a queue outage (agent/lease.py, agent/queue_return.py).

The chaos test's surviving client was failed as follows (tests/test_chaos.py; agent logs of
a failing run): its fio had finished and it was uploading its result while Azurite
restarted for about 20 s; its renewals failed, and at the visibility timeout it gave up
("could not renew before the visibility timeout ran out") although the API still accepted
its heartbeats; when the queue came back, an idle agent received its message and that claim
failed the item ("client agent-2 stopped renewing its lease during the step"). Here: the
lease is kept while the API confirms the item, lost when nobody does or when the queue
refuses the receipt, and an idle agent waits for the queue to answer, then a grace, before
it receives again. Real threads, in-memory queue and heartbeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from adapters.queue import LeaseLost, Message
from agent.api_client import ApiError
from agent.lease import Lease
from agent.queue_return import after_outage
from core.errors import StoreUnavailable
from core.models.live import LiveSample

TIMEOUT_S = 1  # the lease renews at 0.5 s and would lapse at 1 s
BEAT_S = 0.05


class Queue:
    """A pool's queue that is down (``StoreUnavailable``), up, or refuses the receipt."""

    def __init__(self) -> None:
        self.state = "up"
        self.renewals = 0
        self.probes = 0
        self.receives = 0

    def renew(self, pool: str, message: Message, visibility_timeout: int) -> Message:
        if self.state == "down":
            raise StoreUnavailable("connection refused", "the queue service")
        if self.state == "refused":
            raise LeaseLost(f"lost the lease on message {message.id}: pop receipt mismatch")
        self.renewals += 1
        return Message(message.id, f"r{self.renewals}", message.dequeue_count, message.content)

    def approximate_count(self, name: str) -> int:
        self.probes += 1
        if self.state == "down":
            raise StoreUnavailable("connection refused", "the queue service")
        return 0

    def receive(self, pool: str, visibility_timeout: int) -> Message | None:
        self.receives += 1
        return None


def lease_on(queue: Queue, heartbeat: Callable[[list[LiveSample]], bool]) -> Lease:
    lease = Lease(
        queue,  # type: ignore[arg-type]  # the three calls the lease makes
        "default",
        Message("m1", "r0", 1, "{}"),
        TIMEOUT_S,
        heartbeat=heartbeat,
        heartbeat_every_s=BEAT_S,
    )
    lease.start(heartbeats=True)
    return lease


def accepted(samples: list[LiveSample]) -> bool:
    return False  # the API accepted the beat; the run is not cancelled


def test_a_queue_down_past_the_visibility_keeps_the_lease_while_the_api_confirms() -> None:
    queue = Queue()
    lease = lease_on(queue, accepted)
    try:
        time.sleep(0.2)
        queue.state = "down"
        lease.wait(2 * TIMEOUT_S)  # well past the visibility timeout
        assert not lease.lost.is_set()
        queue.state = "up"
        time.sleep(0.3)  # renewal is due: the holder renews with its receipt
        assert queue.renewals >= 1 and lease.message.pop_receipt.startswith("r")
        assert not lease.lost.is_set()
    finally:
        lease.stop()


def test_nobody_confirming_for_the_visibility_timeout_loses_the_lease() -> None:
    queue = Queue()
    api_up = threading.Event()
    api_up.set()

    def beat(samples: list[LiveSample]) -> bool:
        if not api_up.is_set():
            raise StoreUnavailable("cannot reach the API", "the API")
        return False

    lease = lease_on(queue, beat)
    try:
        time.sleep(0.2)
        queue.state = "down"
        api_up.clear()
        started = time.monotonic()
        lease.wait(3 * TIMEOUT_S)
        assert lease.lost.is_set()
        # Lost once the visibility ran out since the last renewal or accepted beat (at most
        # one renewal period, half the timeout, before the outage), not sooner.
        assert TIMEOUT_S / 2 - 0.1 <= time.monotonic() - started <= 2 * TIMEOUT_S
    finally:
        lease.stop()


@pytest.mark.parametrize("refusal", ["queue", "api"])
def test_a_refused_receipt_or_heartbeat_loses_the_lease_at_once(refusal: str) -> None:
    queue = Queue()

    def beat(samples: list[LiveSample]) -> bool:
        if refusal == "api":
            raise ApiError(409, "heartbeat refused: agent agent-2 does not hold item i")
        return False

    lease = lease_on(queue, beat)
    try:
        if refusal == "queue":
            queue.state = "refused"  # another agent received the message
        lease.wait(2 * TIMEOUT_S)
        assert lease.lost.is_set()
    finally:
        lease.stop()


def test_an_idle_agent_receives_again_only_a_grace_after_the_queue_answers() -> None:
    queue = Queue()
    queue.state = "down"
    stop = threading.Event()
    back_at: list[float] = []

    def come_back() -> None:
        time.sleep(0.3)
        back_at.append(time.monotonic())
        queue.state = "up"

    threading.Thread(target=come_back).start()
    after_outage(queue, "default", stop, grace_s=0.5, probe_every_s=0.05)  # type: ignore[arg-type]
    returned = time.monotonic()
    assert queue.receives == 0 and queue.probes >= 2  # probed with a read, received nothing
    assert returned - back_at[0] >= 0.5  # the holders' grace, counted from the return


def test_a_stop_ends_the_wait_for_the_queue() -> None:
    queue = Queue()
    queue.state = "down"
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    began = time.monotonic()
    after_outage(queue, "default", stop, grace_s=5, probe_every_s=0.05)  # type: ignore[arg-type]
    assert time.monotonic() - began < 1
