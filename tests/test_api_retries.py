"""The agent's API client against a loopback HTTP server that answers what each test says:
transient failures are retried with backoff, refusals are not, a lost lease stops the
retries at once and nothing more is sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.api_client import ApiClient, ApiError
from core.errors import StoreUnavailable
from core.models import WorkItem, Workload
from core.models.live import LiveDirection, LiveSample
from tests.loopback import Quiet, serve

ITEM = WorkItem(
    run_id="r-" + "a" * 32,
    item_id="r-" + "a" * 32 + ".s0.c0",
    step=0,
    client=0,
    clients=1,
    pool="default",
    targets=["scratch"],
    engine="fio",
    workload=Workload(),
)


class Scripted:
    """Answers each request with the next status of ``statuses`` (the last one repeats)."""

    def __init__(
        self,
        statuses: list[int],
        delays: dict[str, float] | None = None,
        before_answer: Callable[[int], None] = lambda n: None,
    ) -> None:
        """``before_answer``: called with the number of requests seen, before answering."""
        self.statuses = statuses
        self.seen: list[tuple[float, dict[str, Any]]] = []
        seen, script, slow = self.seen, self.statuses, delays or {}

        class Handler(Quiet):
            def do_POST(self) -> None:
                time.sleep(slow.get(self.path, 0.0))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append((time.monotonic(), {**body, "key": self.headers.get("X-Api-Key")}))
                before_answer(len(seen))
                status = script[min(len(seen), len(script)) - 1]
                reply = json.dumps(
                    {"status": "go", "start_at_ms": 1, "final": True, "action": "run"}
                ).encode()
                self.send_body(status, reply)

            do_PUT = do_POST

        self.server, self.url = serve(Handler)


@pytest.fixture
def scripted() -> Iterator[Any]:
    servers: list[Scripted] = []

    def make(statuses: list[int], delays: dict[str, float] | None = None, **kw: Any) -> Scripted:
        servers.append(Scripted(statuses, delays, **kw))
        return servers[-1]

    yield make
    for s in servers:
        s.server.shutdown()


@pytest.mark.slow  # the waits are real: 2-4 s
def test_transient_answers_are_retried_with_growing_waits(scripted: Any) -> None:
    server = scripted([503, 500, 429, 200])
    client = ApiClient(server.url, api_key="k" * 20)
    assert client.ready(ITEM, "vm1").status == "go"
    assert len(server.seen) == 4
    assert all(body["key"] == "k" * 20 for _, body in server.seen)  # the agent's key, each time


def test_a_retried_failure_report_carries_one_report_id(scripted: Any) -> None:
    server = scripted([502, 200])
    assert ApiClient(server.url).failure(ITEM, "vm1", "disk on fire") is True
    ids = {body["report_id"] for _, body in server.seen}
    assert len(server.seen) == 2 and len(ids) == 1  # the server counts it once


def test_refusals_are_answers_not_retried(scripted: Any) -> None:
    server = scripted([409])
    with pytest.raises(ApiError) as refused:
        ApiClient(server.url).put_result({"item_id": ITEM.item_id, "agent_id": "vm1"})
    assert refused.value.status == 409 and len(server.seen) == 1


@pytest.mark.timing
def test_retries_stop_at_once_when_the_lease_is_lost(scripted: Any) -> None:
    """The lease is lost while the third attempt is at the API (set before its 503 goes
    back): no fourth is sent, and the client gives up at once, not after a backoff of up to
    8 s. (Lost by a timer at 1 s instead, a loaded machine's late timer thread let a retry
    the client had rightly sent at 1.0x s fail the check: CI rehearsal, 2026-11-28.)"""
    lost = threading.Event()
    lost_at: list[float] = []

    def lose_on_third(seen: int) -> None:
        if seen == 3:
            lost_at.append(time.monotonic())
            lost.set()

    server = scripted([503], before_answer=lose_on_third)
    client = ApiClient(server.url)
    with client.retry_until(lost), pytest.raises(StoreUnavailable):
        client.put_result({"item_id": ITEM.item_id, "agent_id": "vm1"})
    gave_up = time.monotonic()
    assert len(server.seen) == 3  # nothing sent once lost
    assert gave_up - lost_at[0] < 0.5  # not the rest of a backoff of up to 8 s


@pytest.mark.slow
@pytest.mark.timing
def test_retries_last_the_budget_then_give_up(scripted: Any) -> None:
    server = scripted([503])
    client = ApiClient(server.url, retry_budget_s=3)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        client.barrier(ITEM, "vm1")
    assert 3 <= time.monotonic() - started < 3 + 8.5  # the budget, plus at most one wait
    assert len(server.seen) >= 2


def test_heartbeats_are_not_retried(scripted: Any) -> None:
    server = scripted([503])
    with pytest.raises(StoreUnavailable):
        ApiClient(server.url).heartbeat(ITEM, "vm1")
    assert len(server.seen) == 1


# A slow call, and the bound a plain call's round trip stays under, a third of it: a stub's
# loopback round trip took over 100 ms in make unit at load 12-17 (2026-11-27 18:26 UTC), so
# both are twice what they were, in the same ratio.
SLOW_S = 0.6
FAST_MS = SLOW_S * 1000 / 3


def test_the_round_trip_sent_with_ready_is_the_barrier_calls_once_there_are_some(
    scripted: Any,
) -> None:
    """The start's lead covers a barrier poll's round trip: a slow claim never counts once
    the agent has timed a barrier call of its own (half as slow)."""
    server = scripted([200], delays={"/api/agent/claim": SLOW_S, "/api/agent/barrier": SLOW_S / 2})
    client = ApiClient(server.url)
    client.claim(ITEM, "vm1", 1, "m1")
    client.barrier(ITEM, "vm1")
    client.ready(ITEM, "vm1")
    sent = [body.get("rtt_ms") for _, body in server.seen if "rtt_ms" in body]
    assert len(sent) == 1
    assert SLOW_S * 500 <= sent[0] < SLOW_S * 1000


def test_a_ready_report_and_a_beat_with_samples_do_not_count_as_a_polls_round_trip(
    scripted: Any,
) -> None:
    """A ready report writes (its item, its barrier shard, maybe the step), as does a
    heartbeat carrying fio's samples: neither is how long a poll takes to bring "go" back
    (issue 29.3: 32 agents reporting ready at once took 0.75-1.7 s each, and the slowest
    sized the next step's lead)."""
    sample = LiveSample(end_ms=2000, dur_ms=1000, read=LiveDirection(ios=5, bytes=20480))
    for slow in ("/api/agent/ready", "/api/agent/heartbeat"):
        server = scripted([200], delays={slow: SLOW_S})
        client = ApiClient(server.url)
        client.barrier(ITEM, "vm1")
        if slow.endswith("ready"):
            client.ready(ITEM, "vm1")
        else:
            client.heartbeat(ITEM, "vm1", [sample])
        client.ready(ITEM, "vm1")
        sent = [body.get("rtt_ms") for _, body in server.seen if "rtt_ms" in body]
        assert sent[-1] < FAST_MS, slow


def test_a_heartbeat_times_a_poll_before_the_agent_has_polled(scripted: Any) -> None:
    """Between its claim and its ready report the agent heartbeats every second (a read of
    its item, as a poll's): that round trip, not the claim's, is the one it reports; an
    agent ready before its first beat sends one first (a fleet's first run)."""
    server = scripted([200], delays={"/api/agent/claim": SLOW_S})
    client = ApiClient(server.url)
    client.claim(ITEM, "vm1", 1, "m1")
    client.heartbeat(ITEM, "vm1")
    client.ready(ITEM, "vm1")
    sent = [body.get("rtt_ms") for _, body in server.seen if "rtt_ms" in body]
    assert sent == [sent[0]] and sent[0] < FAST_MS
    beats = len(server.seen)

    fresh = ApiClient(server.url)
    fresh.claim(ITEM, "vm2", 1, "m2")
    fresh.ready(ITEM, "vm2")  # no beat yet: one is sent first
    assert len(server.seen) == beats + 3
    assert server.seen[-1][1]["rtt_ms"] < FAST_MS
