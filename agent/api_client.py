"""The agent's calls to the service API (agents hold no database rights).

A transient failure (no answer, a timeout, 429 or a 5xx) is retried with capped exponential
backoff and full jitter (tenacity's ``wait_random_exponential``, the "Full Jitter" of
AWS's "Exponential Backoff and Jitter"), for up to ``retry_budget_s`` and only until the
event given to :meth:`ApiClient.retry_until` is set (the worker gives its lease's ``lost``:
once the message may be someone else's, nothing more is sent). Every retried call is
idempotent on the server: a claim or a ready again by the same agent is the same claim or
ready, a barrier poll is a read, a failure report carries its ``report_id`` and is recorded
once, a result is stored once per item, a cancelled report again is accepted as done.

tenacity rather than azure-core's RetryPolicy: azure-core counts attempts instead of time,
has no jitter in its backoff and cannot stop when the lease is lost without a subclass;
tenacity composes all three (``stop_after_delay | stop_when_event_set``).

Heartbeats are never retried: the next beat comes 2 s later, and a long retry would hold
up the lease renewals that share their thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    sleep_using_event,
    stop_after_delay,
    stop_when_event_set,
    wait_random_exponential,
)

from core.errors import BenchError, StoreUnavailable
from core.models import MAX_RTT_MS, WorkItem

log = logging.getLogger(__name__)
RETRY_BUDGET_S = 120.0  # at least 60 s (issue 12.9): an API restart or a Functions cold start
RETRY_MAX_WAIT_S = 8.0  # the backoff's cap: a recovered API is heard within this
HEARTBEAT_TIMEOUT_S = 2.0


class ApiError(BenchError):
    """The API answered with a 4xx: an answer, not a failure to retry."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"API answered {status}: {body[:500]}")
        self.status = status


def _log_retry(state: RetryCallState) -> None:
    failed = state.outcome.exception() if state.outcome else None
    log.warning("API call failed (%s); retry %d", failed, state.attempt_number)


class ApiClient:
    def __init__(
        self,
        base_url: str,
        *,
        token_provider: Any = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        retry_budget_s: float = RETRY_BUDGET_S,
    ) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self._token = token_provider
        self._api_key = api_key
        self.retry_budget_s = retry_budget_s
        self._give_up = threading.Event()  # never set: retry for the whole budget
        # Round trips of the last answered calls, ms: the start barrier's lead is derived
        # from them (core.runs.protocol.AgentProtocol.lead_ms).
        self._round_trips: deque[float] = deque(maxlen=8)

    def round_trip_ms(self) -> int | None:
        """The slowest of the recent round trips to the API, ms (None before any)."""
        return round(max(self._round_trips)) if self._round_trips else None

    @contextlib.contextmanager
    def retry_until(self, give_up: threading.Event) -> Iterator[None]:
        """Within the block, stop retrying as soon as ``give_up`` is set."""
        previous, self._give_up = self._give_up, give_up
        try:
            yield
        finally:
            self._give_up = previous

    def _headers(self) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self._token()}"} if self._token else {}
        if self._api_key:
            headers["X-Api-Key"] = self._api_key
        return headers

    def _send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content: bytes | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One attempt. StoreUnavailable for what may pass, ApiError for a refusal."""
        headers = self._headers()
        if content_type:
            headers["Content-Type"] = content_type
        sent = time.perf_counter()
        try:
            r = self._http.request(
                method,
                path,
                json=body,
                content=content,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.TransportError as e:  # refused, reset, timed out
            raise StoreUnavailable(f"API unreachable: {e!r}") from e
        if content is None:  # an upload's time is its size's, not the round trip's
            self._round_trips.append((time.perf_counter() - sent) * 1000)
        if r.status_code >= 500 or r.status_code == 429:
            raise StoreUnavailable(f"API answered {r.status_code}: {r.text[:300]}")
        if r.status_code >= 400:
            raise ApiError(r.status_code, r.text)
        data: dict[str, Any] = r.json()
        return data

    def _call(self, method: str, path: str, body: Any = None, **raw: Any) -> dict[str, Any]:
        give_up = self._give_up

        def attempt() -> dict[str, Any]:
            if give_up.is_set():  # the lease was lost while we waited: send nothing more
                raise StoreUnavailable(f"{method} {path} not sent: the item's lease is lost")
            return self._send(method, path, body, **raw)

        retrying = Retrying(
            retry=retry_if_exception_type(StoreUnavailable),
            wait=wait_random_exponential(multiplier=0.5, max=RETRY_MAX_WAIT_S),
            stop=stop_after_delay(self.retry_budget_s) | stop_when_event_set(give_up),
            sleep=sleep_using_event(give_up),  # a lost lease cuts the backoff short
            before_sleep=_log_retry,
            reraise=True,
        )
        result: dict[str, Any] = retrying(attempt)
        return result

    def claim(
        self, item: WorkItem, agent_id: str, dequeue_count: int, message_id: str
    ) -> dict[str, Any]:
        return self._call(
            "POST",
            "/api/agent/claim",
            {
                "work_item": item.model_dump(mode="json"),
                "agent_id": agent_id,
                "dequeue_count": dequeue_count,
                "message_id": message_id,
            },
        )

    def _ref(self, item: WorkItem, agent_id: str) -> dict[str, str]:
        return {"run_id": item.run_id, "item_id": item.item_id, "agent_id": agent_id}

    def ready(self, item: WorkItem, agent_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self._ref(item, agent_id)
        rtt = self.round_trip_ms()
        if rtt is not None:
            body["rtt_ms"] = min(rtt, MAX_RTT_MS)
        return self._call("POST", "/api/agent/ready", body)

    def barrier(self, item: WorkItem, agent_id: str) -> dict[str, Any]:
        return self._call("POST", "/api/agent/barrier", self._ref(item, agent_id))

    def heartbeat(self, item: WorkItem, agent_id: str) -> bool:
        """True when the run was cancelled. ApiError 404/409: the run or item is gone or
        no longer this agent's."""
        body = self._ref(item, agent_id)
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

    def put_artifact(self, item: WorkItem, agent_id: str, name: str, data: bytes) -> None:
        """Uploading again writes the same blob: retried like the others."""
        path = f"/api/agent/artifacts/{item.item_id}/{name}?agent_id={quote(agent_id)}"
        self._call("PUT", path, content=data, content_type="application/gzip")

    def put_result(self, result: dict[str, Any]) -> dict[str, Any]:
        return self._call("PUT", f"/api/agent/results/{result['item_id']}", result)

    def close(self) -> None:
        self._http.close()
