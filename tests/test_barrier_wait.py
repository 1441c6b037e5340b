"""The agent at its step's start barrier with held calls (issue 29.3; agent/barrier_wait.py,
agent/api_client.py), against loopback stand-ins of the API: it sends ``barrier_wait`` and
``wait_ms`` only to an API that offers held calls (the simulated clients keep polling); its
first held call goes with its ready report and the next before the last comes back; a go
from any call is the answer and a failure is raised once no call is left; a call no longer
needed is not retried; the round trip its ready report gives is this item's."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pytest

from agent.api_client import GO_FRESH_S, ApiClient, ApiError
from agent.barrier_wait import hear_start
from agent.outcome import Outcome
from core.models import WorkItem, Workload
from core.runs.protocol import BarrierDecision
from simagent.fleet import CountingApiClient
from tests.loopback import Quiet, serve


class FakeApi:
    """A loopback API that answers every call with ``reply`` and records what it was sent."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        sent = self.sent

        class Handler(Quiet):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sent.append((self.path, body))
                data = json.dumps(reply).encode()
                self.send_body(200, data)

        self.server, self.url = serve(Handler)


WORK = WorkItem(
    run_id="r-" + "b" * 32,
    item_id="r-" + "b" * 32 + ".s0.c0",
    step=0,
    client=0,
    clients=2,
    pool="default",
    targets=["scratch"],
    engine="fio",
    workload=Workload(),
)
ANSWER = {"action": "run", "reason": "", "status": "wait", "start_at_ms": None}


@pytest.mark.parametrize(("offered", "protocol"), [(None, None), (5_000, None), (5_000, 2)])
def test_an_agent_waits_in_held_calls_only_when_the_api_offers_them(
    offered: int | None, protocol: int | None
) -> None:
    """An older API (no ``barrier_wait_ms`` in the claim's answer, or no ``agent_protocol``
    2) refuses fields it does not know: the agent then sends none of them."""
    said = {"barrier_wait_ms": offered, "agent_protocol": protocol}
    api = FakeApi({**ANSWER, **{k: v for k, v in said.items() if v is not None}})
    try:
        client = ApiClient(api.url)
        client.claim(WORK, "a1", 1, "m1")
        client.ready(WORK, "a1")
        client.barrier(WORK, "a1")
        client.heartbeat(WORK, "a1", waiting=True)
    finally:
        api.server.shutdown()
    sent = {path: body for path, body in api.sent}
    assert client.holds_barrier is bool(offered)
    assert client.holds_ready is bool(offered and protocol)
    if offered:
        assert sent["/api/agent/ready"]["barrier_wait"] is True
        assert sent["/api/agent/barrier"]["wait_ms"] == offered
    else:
        assert "barrier_wait" not in sent["/api/agent/ready"]
        assert "wait_ms" not in sent["/api/agent/barrier"]
    if protocol:
        assert sent["/api/agent/ready"]["wait_ms"] == offered  # held as the first call
        assert sent["/api/agent/heartbeat"]["waiting"] is True
    else:
        assert "wait_ms" not in sent["/api/agent/ready"]
        assert "waiting" not in sent["/api/agent/heartbeat"]


def test_simulated_clients_keep_polling() -> None:
    api = FakeApi({**ANSWER, "barrier_wait_ms": 5_000})
    try:
        client = CountingApiClient(api.url)
        client.claim(WORK, "s1", 1, "m1")
    finally:
        api.server.shutdown()
    assert client.barrier_wait_ms == 5_000 and not client.holds_barrier


class ScriptedCalls:
    """The agent's calls at the barrier, answered after ``delay_s`` each as scripted."""

    holds_barrier = True
    holds_ready = True
    barrier_wait_ms = 400

    def __init__(self, ready: object, barrier: object, delay_s: float = 0.05) -> None:
        self.answers = {"ready": ready, "barrier": barrier}
        self.delay_s = delay_s
        self.sent: list[str] = []

    def _answer(self, name: str) -> BarrierDecision:
        self.sent.append(name)
        time.sleep(self.delay_s)
        answer = self.answers[name]
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, BarrierDecision)
        return answer

    def ready(self, item: WorkItem, agent: str, give_up: threading.Event) -> BarrierDecision:
        return self._answer("ready")

    def barrier(self, item: WorkItem, agent: str, give_up: threading.Event) -> BarrierDecision:
        return self._answer("barrier")


GO = BarrierDecision("go", start_at_ms=123)
WAIT = BarrierDecision("wait")


def test_the_ready_report_is_the_first_held_call() -> None:
    """Issue 29.3: no barrier call beside the ready report, which the API holds (one call
    and two reads fewer per client in a step's start-up storm)."""
    calls = ScriptedCalls(ready=GO, barrier=GO, delay_s=0.1)  # answered before the next
    assert hear_start(calls, WORK, "a1", lambda: None) == GO  # type: ignore[arg-type]
    assert calls.sent == ["ready"]


def test_an_api_answering_the_ready_report_at_once_gets_a_barrier_call_at_once() -> None:
    calls = ScriptedCalls(ready=WAIT, barrier=GO)
    began = time.monotonic()
    assert hear_start(calls, WORK, "a1", lambda: None) == GO  # type: ignore[arg-type]
    assert calls.sent == ["ready", "barrier"]
    assert time.monotonic() - began < 0.2 + 2 * calls.delay_s  # not at the next call's time


def test_with_an_api_that_holds_no_ready_report_a_barrier_call_goes_beside_it() -> None:
    calls = ScriptedCalls(ready=WAIT, barrier=GO, delay_s=0.1)
    calls.holds_ready = False
    assert hear_start(calls, WORK, "a1", lambda: None) == GO  # type: ignore[arg-type]
    assert sorted(calls.sent) == ["barrier", "ready"]


def test_a_refused_ready_report_is_not_the_answer_a_barrier_call_is() -> None:
    """A ready report retried after an outage may be refused once the item moved on (a
    heartbeat made it running): a barrier call's "go" is the answer, not that refusal."""
    calls = ScriptedCalls(ready=ApiError(409, "ready refused: item is running"), barrier=GO)
    assert hear_start(calls, WORK, "a1", lambda: None) == GO  # type: ignore[arg-type]
    assert calls.sent == ["ready", "barrier"]


def test_a_failure_is_raised_once_no_call_is_left_to_answer() -> None:
    calls = ScriptedCalls(ready=WAIT, barrier=ApiError(409, "barrier refused"))
    with pytest.raises(ApiError):
        hear_start(calls, WORK, "a1", lambda: None)  # type: ignore[arg-type]


def test_one_call_is_always_held_until_the_answer() -> None:
    """With 2 s holds: the next call is sent when 1.25 s of the last are left (not after
    it came back), so one is held at every moment."""
    calls = ScriptedCalls(ready=WAIT, barrier=WAIT, delay_s=2.0)
    calls.barrier_wait_ms = 2_000
    sent: list[float] = []
    original = calls._answer

    def timed(name: str) -> BarrierDecision:
        if name == "barrier":
            sent.append(time.monotonic())
        return original(name)

    calls._answer = timed  # type: ignore[method-assign]
    stop_at = time.monotonic() + 3.5
    stopped = hear_start(
        calls,  # type: ignore[arg-type]
        WORK,
        "a1",
        lambda: Outcome.INTERRUPTED if time.monotonic() > stop_at else None,
    )
    assert stopped is Outcome.INTERRUPTED
    assert len(sent) >= 3, sent
    # Each sent 1 s after the last (half of 2 s: the quarter left would be 0.75 s), before
    # it came back.
    assert all(b - a < 2.0 for a, b in itertools.pairwise(sent)), sent


def test_a_call_no_longer_needed_is_not_retried() -> None:
    """The ready report's "go" is the answer: the barrier call sent with it, failing (an API
    restarting), is not retried: answered late it would give the item an instant of its
    own after it started on the common one (core.runs.protocol._rebarrier)."""
    seen: list[str] = []

    class Handler(Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.path)
            ok = self.path.endswith("/ready")
            data = json.dumps({"status": "go", "start_at_ms": 1, "reason": ""}).encode()
            self.send_body(200 if ok else 503, data)

    server, url = serve(Handler)
    try:
        client = ApiClient(url)
        client.barrier_wait_ms = 5_000
        assert hear_start(client, WORK, "a1", lambda: None).status == "go"  # type: ignore[union-attr]
        time.sleep(2.0)  # the backoff's first waits are well under this
    finally:
        server.shutdown()
    assert seen.count("/api/agent/ready") == 1
    assert seen.count("/api/agent/barrier") <= 1, seen


def test_the_round_trip_a_ready_report_gives_is_this_items() -> None:
    """Issue 29.3: the slowest of an agent's last 8 polls and heartbeats came from the run
    before (its end, every agent storing its result at once) and sized the next run's lead;
    a claim starts the count afresh, and the ready report's heartbeat times one."""
    api = FakeApi({**ANSWER, "barrier_wait_ms": 5_000})
    try:
        client = ApiClient(api.url)
        client._light_trips.extend([1_900.0, 1_950.0])  # the last run's
        client.claim(WORK, "a1", 1, "m1")
        assert client.round_trip_ms() is None
        client.ready(WORK, "a1")
    finally:
        api.server.shutdown()
    paths = [path for path, _ in api.sent]
    assert paths == ["/api/agent/claim", "/api/agent/heartbeat", "/api/agent/ready"]
    assert api.sent[-1][1]["rtt_ms"] < 1_000  # a loopback heartbeat's, not 1,950


def test_a_held_agent_reports_how_long_its_last_go_took_not_a_round_trip_of_the_storm() -> None:
    """Issue 29.3: round trips timed while 32 fio start on 2 cores were 1.5-2.1 s, and every
    agent heard "go" 1.5-2.1 s before the instant. A "go" says when the API set the instant
    (``set_at_ms``): an agent in held calls times its way from then, once every client was
    ready, and its next ready report gives that. The first "go" of an item counts."""
    set_at = round(time.time() * 1000) - 300  # the instant was set 300 ms before the go came
    go = {**ANSWER, "barrier_wait_ms": 5_000, "status": "go", "start_at_ms": set_at + 400}
    go["agent_protocol"] = 2
    api = FakeApi({**go, "set_at_ms": set_at})
    try:
        client = ApiClient(api.url)
        client.claim(WORK, "a1", 1, "m1")
        assert client.go_took_ms() is None
        client._light_trips.extend([1_900.0, 2_050.0])  # timed in the start-up storm
        client.barrier(WORK, "a1")
        took = client.go_took_ms()
        assert took is not None and 300 <= took < 1_000
        time.sleep(0.2)
        client.barrier(WORK, "a1")  # the same item's go again, by another held call
        assert client.go_took_ms() == took
        nxt = WORK.model_copy(update={"item_id": WORK.run_id + ".s1.c0", "step": 1})
        client.claim(nxt, "a1", 1, "m2")
        client.ready(nxt, "a1")  # held: its "go" is this item's
        took_next = client.go_took_ms()
        assert took_next is not None and took_next >= took
        client._light_trips.extend([1_900.0, 2_050.0])
        client.ready(nxt, "a1")
    finally:
        api.server.shutdown()
    # Its first ready report needs no heartbeat to time a round trip: it has its go's way.
    assert [path for path, _ in api.sent[-3:]] == [
        "/api/agent/claim",
        "/api/agent/ready",
        "/api/agent/ready",
    ]
    assert api.sent[-2][1]["rtt_ms"] == took
    # Heard long ago it stands for nothing: the agent times a round trip again.
    item, ms, _ = client._heard or ("", 0, 0.0)
    client._heard = (item, ms, time.monotonic() - GO_FRESH_S - 1)
    assert client.go_took_ms() is None
    assert api.sent[-1][1]["rtt_ms"] == took_next
    assert api.sent[-1][1]["barrier_wait"] is True


def test_a_polling_agent_or_a_go_without_its_setting_time_keeps_the_round_trip() -> None:
    api = FakeApi({**ANSWER, "status": "go", "start_at_ms": 1, "set_at_ms": 0})  # no holds
    try:
        client = ApiClient(api.url)
        client.claim(WORK, "a1", 1, "m1")
        client.barrier(WORK, "a1")  # a poll: nothing held, nothing timed from the setting
        assert client.go_took_ms() is None
        client._light_trips.append(700.0)
        client.ready(WORK, "a1")
    finally:
        api.server.shutdown()
    assert api.sent[-1][1]["rtt_ms"] == 700
    older = FakeApi({**ANSWER, "barrier_wait_ms": 5_000, "status": "go", "start_at_ms": 1})
    try:
        client = ApiClient(older.url)
        client.claim(WORK, "a1", 1, "m1")
        client.barrier(WORK, "a1")
        assert client.go_took_ms() is None  # an API that does not stamp its go
    finally:
        older.server.shutdown()


def test_a_lone_clients_ready_report_times_no_go() -> None:
    """Its "go" comes in its own ready report's answer, which completed the set: no held
    call's way from the instant's setting (its lead is its round trip, barrier_timing)."""
    set_at = round(time.time() * 1000) - 300
    go = {**ANSWER, "barrier_wait_ms": 5_000, "agent_protocol": 2, "status": "go"}
    api = FakeApi({**go, "start_at_ms": set_at + 400, "set_at_ms": set_at})
    lone = WORK.model_copy(update={"clients": 1})
    try:
        client = ApiClient(api.url)
        client.claim(lone, "a1", 1, "m1")
        client.ready(lone, "a1")
        assert client.go_took_ms() is None
        client.ready(WORK, "a1")  # two clients: its held ready report's go counts
        assert client.go_took_ms() is not None
    finally:
        api.server.shutdown()
