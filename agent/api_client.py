"""The agent's calls to the service API (agents hold no database rights).

The plumbing is ``apiclient`` (shared with benchctl): a transient failure (no answer, a
timeout, 429 or a 5xx) is retried with capped, jittered backoff for up to ``retry_budget_s``
and only until the event given to :meth:`ApiClient.retry_until` is set (the worker gives its
lease's ``lost``: once the message may be someone else's, nothing more is sent). Every
retried call is idempotent on the server: a claim or a ready again by the same agent is the
same claim or ready, a barrier poll is a read, a failure report carries its ``report_id`` and
is recorded once, a result is stored once per item, a cancelled report again is accepted as
done.

Heartbeats are never retried: the next beat comes 2 s later, and a long retry would hold
up the lease renewals that share their thread.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter
from tenacity import RetryCallState

from adapters import telemetry
from apiclient import Refused, Transport, Unavailable, retrying
from core.errors import BenchError, StoreUnavailable
from core.models import MAX_RTT_MS, WorkItem
from core.models.live import LiveSample
from core.receipts import receipts_header
from core.runs.protocol import BarrierDecision, ClaimDecision

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

log = logging.getLogger(__name__)
RETRY_BUDGET_S = 120.0  # at least 60 s (issue 12.9): an API restart or a Functions cold start
RETRY_MAX_WAIT_S = 8.0  # the backoff's cap: a recovered API is heard within this
HEARTBEAT_TIMEOUT_S = 2.0
# The server's own decision types are the replies' contract (extra keys are ignored).
CLAIM_REPLY = TypeAdapter(ClaimDecision)
BARRIER_REPLY = TypeAdapter(BarrierDecision)


class ApiError(BenchError):
    """The API answered with a 4xx: an answer, not a failure to retry."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"API answered {status}: {body[:500]}")
        self.status = status


def _log_retry(state: RetryCallState) -> None:
    failed = state.outcome.exception() if state.outcome else None
    log.warning("API call failed (%s); retry %d", failed, state.attempt_number)


# How much longer than the wait it asks for a held barrier call may take to be answered.
HELD_SLACK_S = 30.0
# The calls whose round trip is a barrier poll's (a read of the item and one of its step,
# no write): the polls themselves and the item's heartbeats (core.runs.agent_reports).
LIGHT_PATHS = frozenset({"/api/agent/barrier", "/api/agent/heartbeat"})
# How long a "go" timed from the instant's setting stands for this agent's way from the API:
# a sweep's steps follow each other within it; after a longer pause the agent times round
# trips again, as a fresh one does (the API may be busier than it was).
GO_FRESH_S = 600.0


class Either(threading.Event):
    """Set when either of two events is (read only: as retrying's ``give_up``)."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        super().__init__()
        self._a, self._b = a, b

    def is_set(self) -> bool:
        return self._a.is_set() or self._b.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                break
            self._a.wait(left)
        return self.is_set()


class ApiClient:
    # Whether the agent waits for its step's start in held barrier calls when the API offers
    # them (core.runs.barrier_watch), one call at a time, rather than polling.
    HOLDS_BARRIER = True

    def __init__(
        self,
        base_url: str,
        *,
        credential: TokenCredential | None = None,
        scope: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        retry_budget_s: float = RETRY_BUDGET_S,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self._transport = Transport(
            base_url,
            api_key=api_key,
            credential=credential,
            scope=scope,
            timeout=timeout,
            verify=verify,
        )
        self.retry_budget_s = retry_budget_s
        self._give_up = threading.Event()  # never set: retry for the whole budget
        # Round trips of the last answered calls, ms: the start barrier's lead is derived
        # from them (core.runs.barrier_timing). Hearing "go" takes a barrier poll, so the
        # calls that cost what a poll costs are kept apart: not a claim, a ready report or
        # a result, which write (issue 29.3: 32 clients claiming and reporting ready at
        # once took up to 1.2 s each, and the lead sized on them was 3-3.4 s while every
        # client had heard "go" 2.4-2.7 s before the instant).
        self._round_trips: deque[float] = deque(maxlen=8)
        self._light_trips: deque[float] = deque(maxlen=8)
        # How long the last "go" heard in a held barrier call took to reach this agent from
        # when the API set the instant (its ``set_at_ms``), with the item it was for: the
        # time the lead has to cover, measured once every client was ready and the start-up
        # storm over (issue 29.3: round trips timed in the storm of 32 fio start-ups were
        # 1.5-2.1 s, and every agent heard "go" 1.5-2.1 s before the instant).
        self._heard: tuple[str, int, float] | None = None  # item, ms, when (monotonic s)
        # The longest the API holds a barrier call, as its last claim's answer said (an API
        # that does not say holds none: the agent polls).
        self.barrier_wait_ms = 0
        # 2 (as that answer says): held ready reports, beats' "waiting"; 3, 4: carried artifacts.
        self.api_protocol = 1

    @property
    def holds_barrier(self) -> bool:
        """Whether this agent's barrier calls wait at the API (and it says so when ready)."""
        return self.HOLDS_BARRIER and self.barrier_wait_ms > 0

    @property
    def holds_ready(self) -> bool:
        """Whether its ready report is held as its first barrier call (agent.barrier_wait)."""
        return self.holds_barrier and self.api_protocol >= 2

    def round_trip_ms(self) -> int | None:
        """The slowest of the recent polls' and heartbeats' round trips, ms; before any, of
        the recent calls' (None before any call)."""
        trips = self._light_trips or self._round_trips
        return round(max(trips)) if trips else None

    def go_took_ms(self) -> int | None:
        """How long the last "go" heard in a held barrier call took to come from when the
        API set the instant, ms (None before any, or GO_FRESH_S after it)."""
        if self._heard is None or time.monotonic() - self._heard[2] > GO_FRESH_S:
            return None
        return self._heard[1]

    def _heard_go(self, item: WorkItem, reply: dict[str, Any]) -> None:
        """Times a held call's "go" from the instant's setting to now, on this host's clock,
        the one it starts fio by: the first "go" of each item (another held call may bring
        the same "go" later)."""
        set_at = reply.get("set_at_ms")
        if reply.get("status") != "go" or not isinstance(set_at, int):
            return
        if self._heard is None or self._heard[0] != item.item_id:
            took = max(0, round(time.time() * 1000) - set_at)
            self._heard = (item.item_id, took, time.monotonic())

    @contextlib.contextmanager
    def retry_until(self, give_up: threading.Event) -> Iterator[None]:
        """Within the block, stop retrying as soon as ``give_up`` is set."""
        previous, self._give_up = self._give_up, give_up
        try:
            yield
        finally:
            self._give_up = previous

    def _send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content: bytes | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
        timed: bool = True,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One attempt. StoreUnavailable for what may pass, ApiError for a refusal.
        ``timed``: its round trip counts (not a held call's, which is its wait's)."""
        sent = time.perf_counter()
        # The current stage's trace context: the API's spans of this call nest under it.
        sent_headers = {**telemetry.headers(), **(headers or {})}
        if content_type:
            sent_headers["Content-Type"] = content_type
        try:
            r = self._transport.request(
                method,
                path,
                json=body,
                content=content,
                headers=sent_headers or None,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except Unavailable as e:
            raise StoreUnavailable(str(e)) from e
        except Refused as e:
            raise ApiError(e.status, e.text) from None
        if content is None and timed:  # an upload's time is its size's, not the round trip's
            trip = (time.perf_counter() - sent) * 1000
            self._round_trips.append(trip)
            if path in LIGHT_PATHS and not (body or {}).get("live"):
                self._light_trips.append(trip)  # a beat with samples writes them
        data: dict[str, Any] = r.json()
        return data

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        also_give_up: threading.Event | None = None,
        **raw: Any,
    ) -> dict[str, Any]:
        """``also_give_up``: stop retrying when it is set too (a barrier call whose answer
        is no longer needed, agent.barrier_wait)."""
        give_up = self._give_up if also_give_up is None else Either(self._give_up, also_give_up)

        def attempt() -> dict[str, Any]:
            if give_up.is_set():  # the lease was lost while we waited: send nothing more
                raise StoreUnavailable(f"{method} {path} not sent: the item's lease is lost")
            return self._send(method, path, body, **raw)

        retry = retrying(
            StoreUnavailable,
            budget_s=self.retry_budget_s,
            max_wait_s=RETRY_MAX_WAIT_S,
            give_up=give_up,  # a lost lease also cuts the backoff short
            before_sleep=_log_retry,
        )
        result: dict[str, Any] = retry(attempt)
        return result

    def claim(
        self, item: WorkItem, agent_id: str, dequeue_count: int, message_id: str
    ) -> ClaimDecision:
        reply = self._call(
            "POST",
            "/api/agent/claim",
            {
                "work_item": item.model_dump(mode="json"),
                "agent_id": agent_id,
                "dequeue_count": dequeue_count,
                "message_id": message_id,
            },
        )
        offered = reply.get("barrier_wait_ms")
        self.barrier_wait_ms = offered if isinstance(offered, int) and offered > 0 else 0
        spoken = reply.get("agent_protocol")
        self.api_protocol = spoken if isinstance(spoken, int) else 1
        # The round trip this item's ready report gives (the lead is sized on it) is timed
        # from here on: not on the last item's calls, whose slowest came from its end, 32
        # agents storing their results at once (issue 29.3: 1.2-2.0 s from the run before
        # in one of every agent's last 8, while this run's took 0.1-0.6 s; 16:00 UTC).
        self._round_trips.clear()
        self._light_trips.clear()
        return CLAIM_REPLY.validate_python(reply)

    def _ref(self, item: WorkItem, agent_id: str) -> dict[str, str]:
        return {"run_id": item.run_id, "item_id": item.item_id, "agent_id": agent_id}

    def ready(
        self, item: WorkItem, agent_id: str, give_up: threading.Event | None = None
    ) -> BarrierDecision:
        body: dict[str, Any] = self._ref(item, agent_id)
        went = self.go_took_ms() if self.holds_barrier else None
        if not self._light_trips and went is None:
            # Nothing timed yet that costs what a poll costs (a fresh agent, ready within a
            # second of its claim): one heartbeat first, a read of the item, so that the
            # round trip it reports is not its claim's (issue 29.3: claims of 32 at once
            # took 0.8-1.4 s, and the lead of a fleet's first run was sized on them). Not
            # when it reports its last go's way instead: a call less in the start-up storm.
            with contextlib.suppress(BenchError):  # ready itself says what is wrong
                self.heartbeat(item, agent_id)
        rtt = self.round_trip_ms()
        if went is not None:
            # What the lead covers for a client in held calls is its "go" coming from the
            # instant's setting (core.runs.barrier_timing), as timed on its last step, in
            # the quiet once every client was ready: not a round trip timed while its
            # step's clients start fio.
            rtt = went
        if rtt is not None:
            body["rtt_ms"] = min(rtt, MAX_RTT_MS)
        if self.holds_barrier:
            body["barrier_wait"] = True
        if self.holds_ready:
            body["wait_ms"] = self.barrier_wait_ms  # held as its first barrier call
        # The lead is sized on it (bench/start_skew.py's margins are read against it).
        log.info(
            "item %s: ready, round trip %s ms%s, %s",
            item.item_id,
            body.get("rtt_ms"),
            " (its last go's way from the instant's setting)" if went is not None else "",
            "waits in held barrier calls" if self.holds_barrier else "polls the barrier",
        )
        if not self.holds_ready:
            reply = self._call("POST", "/api/agent/ready", body, also_give_up=give_up)
            return BARRIER_REPLY.validate_python(reply)
        timeout = self.barrier_wait_ms / 1000 + HELD_SLACK_S
        reply = self._call(
            "POST", "/api/agent/ready", body, timeout=timeout, timed=False, also_give_up=give_up
        )
        if item.clients > 1:  # held: a lone client's report completes its set at once
            self._heard_go(item, reply)
        return BARRIER_REPLY.validate_python(reply)

    def barrier(
        self, item: WorkItem, agent_id: str, give_up: threading.Event | None = None
    ) -> BarrierDecision:
        """A poll of the start barrier; held at the API while the answer is "wait" (up to
        its ``barrier_wait_ms``) when it offers that. ``give_up``: stop retrying once set."""
        body: dict[str, Any] = self._ref(item, agent_id)
        path = "/api/agent/barrier"
        if not self.holds_barrier:
            return BARRIER_REPLY.validate_python(self._call("POST", path, body))
        body["wait_ms"] = self.barrier_wait_ms
        timeout = self.barrier_wait_ms / 1000 + HELD_SLACK_S
        # Not timed: its time is the wait's, not a round trip.
        reply = self._call("POST", path, body, timeout=timeout, timed=False, also_give_up=give_up)
        self._heard_go(item, reply)
        return BARRIER_REPLY.validate_python(reply)

    def heartbeat(
        self,
        item: WorkItem,
        agent_id: str,
        live: Sequence[LiveSample] = (),
        *,
        waiting: bool = False,
    ) -> bool:
        """True when the run was cancelled. ApiError 404/409: the run or item is gone or
        no longer this agent's. ``live``: fio's status intervals since the last beat;
        ``waiting``: not released yet (an API that knows it reads no step for it)."""
        body: dict[str, Any] = self._ref(item, agent_id)
        if waiting and self.api_protocol >= 2:
            body["waiting"] = True
        if live:
            body["live"] = [s.model_dump(mode="json", exclude_none=True) for s in live]
        r = self._send("POST", "/api/agent/heartbeat", body, timeout=HEARTBEAT_TIMEOUT_S)
        return bool(r.get("cancel"))

    def failure(
        self, item: WorkItem, agent_id: str, message: str, *, permanent: bool = False
    ) -> bool:
        """Reports a failed attempt; True when it is final (delete the message). A
        ``permanent`` failure (no retry can succeed: no space, no such mount, no engine)
        is final at once. The report id makes a retried report count once."""
        body = {
            **self._ref(item, agent_id),
            "message": message,
            "permanent": permanent,
            "report_id": uuid.uuid4().hex,
        }
        return bool(self._call("POST", "/api/agent/failure", body).get("final"))

    def cancelled(self, item: WorkItem, agent_id: str) -> None:
        self._call("POST", "/api/agent/cancelled", self._ref(item, agent_id))

    def put_artifact(self, item: WorkItem, agent_id: str, name: str, data: bytes) -> str:
        """Uploading again writes the same blob: retried like the others. Returns the API's
        receipt for it (core.receipts; empty from an API that gives none)."""
        path = f"/api/agent/artifacts/{item.item_id}/{name}?agent_id={quote(agent_id)}"
        reply = self._call("PUT", path, content=data, content_type="application/gzip")
        receipt = reply.get("receipt")
        return receipt if isinstance(receipt, str) else ""

    def put_result(
        self, result: dict[str, Any], receipts: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """``receipts``: the artifacts' puts' (the API then need not check them again)."""
        header = receipts_header(receipts or {})
        sent = {"X-Upload-Receipts": header} if header else None
        return self._call("PUT", f"/api/agent/results/{result['item_id']}", result, headers=sent)

    def register(self, registration: dict[str, Any]) -> dict[str, Any]:
        """Registration and heartbeat in the registry: one attempt (the next beat follows)."""
        return self._send("POST", "/api/agent/register", registration, timeout=10.0)

    def close(self) -> None:
        self._transport.close()
